"""Builders for the events the engine accepts (the reference vocabulary, docs/dsh-semantics.md §1).

Each builder returns a ``palimpsest.v1.event_pb2.EventInput`` whose data is the canonical JSON
the reference writes, with the surface op its type needs: messages are appended to the surface
(pass ``replace=(start, end)`` for a compaction or prune replacement), everything else is
log-only. ``cites`` is the event's ``sourceEventSeqs``: an assistant message cites the chunks it
was assembled from (``[]`` for a known empty stream), a tool result the ``tool/call`` seq.

    from palimpsest import events as ev
    batch = [ev.turn_start(1), ev.user_message("hi"), ev.turn_end(1)]
"""
from __future__ import annotations

import base64
import hashlib
import json
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from palimpsest.v1 import event_pb2

Json = Any
Range = Tuple[int, int]


# The id prefix of each message type whose builder leaves the id to ``Client.append``.
_ID_PREFIX = {"user/message": "u", "assistant/message": "a", "tool/result": "r"}


def derived_id(prefix: str, key: str, index: int) -> str:
    """The message id ``Client.append`` gives the message at ``index`` of a batch sent with
    idempotency key ``key`` when its builder was given no id: ``prefix-`` + 24 hex digits of
    sha256(``key/index``), the same in the Go and TypeScript clients. The same key and batch give
    the same ids, so a retry that rebuilds its batch is answered from the stored result instead of
    IDEMPOTENCY_KEY_REUSED."""
    return f"{prefix}-{hashlib.sha256(f'{key}/{index}'.encode()).hexdigest()[:24]}"


def with_derived_ids(key: str, events: Sequence[event_pb2.EventInput]) -> List[event_pb2.EventInput]:
    """``events`` with every message id a builder left empty set to :func:`derived_id` (copies;
    the caller's events are not changed)."""
    out = list(events)
    for i, e in enumerate(out):
        prefix = _ID_PREFIX.get(e.type)
        if prefix is None or e.data.WhichOneof("kind") != "json" or '"id":""' not in e.data.json:
            continue
        data = json.loads(e.data.json)
        msg = data if e.type == "user/message" else data.get("message")
        if not isinstance(msg, dict) or msg.get("id") != "":
            continue
        msg["id"] = derived_id(prefix, key, i)
        c = event_pb2.EventInput()
        c.CopyFrom(e)
        c.data.json = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
        out[i] = c
    return out


def event(type: str, data: Json, *, append: bool = False, replace: Optional[Range] = None,
          cites: Optional[Sequence[int]] = None, ignorable: bool = False) -> event_pb2.EventInput:
    """Any event: ``data`` as JSON, an ``append`` or ``replace=(start, end)`` surface op, citations."""
    if append and replace is not None:
        raise ValueError("an event is either appended to the surface or replaces a range, not both")
    e = event_pb2.EventInput(type=type, data=event_pb2.EventData(json=json.dumps(data, separators=(",", ":"), ensure_ascii=False)),
                             ignorable=ignorable)
    if append:
        e.append.SetInParent()
    if replace is not None:
        e.replace.start, e.replace.end = replace
    if cites is not None:
        e.source_event_seqs.SetInParent()
        e.source_event_seqs.seqs.extend(cites)
    return e



# ---------------------------------------------------------------- content blocks

def text(t: str) -> Dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": t}


def reasoning(t: str) -> Dict[str, Any]:
    """A reasoning content block."""
    return {"type": "reasoning", "text": t}


def tool_call_block(call_id: str, name: str, arguments: str) -> Dict[str, Any]:
    """A tool-call content block (``arguments``: the raw JSON string the model produced)."""
    return {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}


def blob_digest(data: bytes) -> str:
    """The digest a blob of ``data`` has on the server (docs/blobs.md): ``"sha256:"`` and the
    SHA-256 of the bytes (for an image, the image file itself)."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def image(data: bytes, media_type: str = "image/png") -> Dict[str, Any]:
    """An image content block carrying the image's bytes (as base64). A large one (``serve
    --blob-min-bytes``) is stored once per tenant as a blob; later events can send
    :func:`image_ref` of :func:`blob_digest` ``(data)`` instead of the bytes again."""
    return {"type": "image", "attachment": {"mimeType": media_type, "data": base64.b64encode(data).decode("ascii")}}


def image_ref(digest: str, media_type: str = "image/png") -> Dict[str, Any]:
    """An image content block that references a blob the tenant already stored (an image sent
    before, by :func:`image`) by digest instead of carrying its bytes: the server stores the
    event exactly as if the bytes had been sent. A digest the tenant has no blob for is refused
    with ``BLOB_NOT_FOUND`` (nothing stored): send :func:`image` then."""
    return {"type": "image", "attachment": {"mimeType": media_type, "data": {"$blob": digest, "encoding": "base64"}}}


def _blocks(content: "str | Iterable[Mapping[str, Any]]") -> List[Dict[str, Any]]:
    return [text(content)] if isinstance(content, str) else [dict(b) for b in content]


# ---------------------------------------------------------------- messages (surface events)

def user_message(content: "str | Iterable[Mapping[str, Any]]", id: Optional[str] = None, *,
                 source: Optional[Mapping[str, Any]] = None, replace: Optional[Range] = None,
                 cites: Optional[Sequence[int]] = None) -> event_pb2.EventInput:
    """A ``user/message`` (text or content blocks); ``source`` defaults to ``{"kind": "user"}``
    (use ``{"kind": "plugin", "plugin": ...}`` for injected context or a compaction summary).
    Without ``id`` the id is left to ``Client.append``, which derives it from the idempotency key
    and the event's index (:func:`derived_id`); the same holds for the other message builders."""
    data = {"id": id or "", "role": "user", "content": _blocks(content), "source": dict(source or {"kind": "user"})}
    return event("user/message", data, append=replace is None, replace=replace, cites=cites)


def assistant_message(content: "str | Iterable[Mapping[str, Any]]" = (), *, turn: int, step: int, provider: str, model: str,
                      id: Optional[str] = None, tool_calls: Iterable[Tuple[str, str, str]] = (),
                      usage: Optional[Mapping[str, int]] = None, interrupted: bool = False,
                      replay_state: Json = None, cites: Optional[Sequence[int]] = None,
                      replace: Optional[Range] = None) -> event_pb2.EventInput:
    """An ``assistant/message``: ``content`` (text or blocks), then one tool-call block per
    ``(call_id, name, arguments)``; ``cites`` = the chunk seqs it was assembled from."""
    blocks = _blocks(content) + [tool_call_block(*c) for c in tool_calls]
    source: Dict[str, Any] = {"kind": "model", "provider": provider, "model": model}
    if replay_state is not None:
        source["replayState"] = replay_state
    data: Dict[str, Any] = {"turn": turn, "step": step,
                            "message": {"id": id or "", "role": "assistant", "content": blocks, "source": source}}
    if usage is not None:
        data["usage"] = dict(usage)
    if interrupted:
        data["interrupted"] = True
    return event("assistant/message", data, append=replace is None, replace=replace, cites=cites)


def tool_result(call_id: str, output: "str | Iterable[Mapping[str, Any]]", *, turn: int, step: int,
                id: Optional[str] = None, is_error: bool = False, error: Optional[Mapping[str, Any]] = None,
                meta: Json = None, call_seq: Optional[int] = None, replace: Optional[Range] = None,
                cites: Optional[Sequence[int]] = None) -> event_pb2.EventInput:
    """A ``tool/result`` for ``call_id``; ``call_seq`` (the ``tool/call`` seq) is cited.

    A prune is the same data with only ``output`` changed, the original ``id``, and
    ``replace=(seq, seq)``, ``cites=[seq]``."""
    block: Dict[str, Any] = {"type": "tool-result", "toolCallId": call_id, "content": _blocks(output)}
    if is_error:
        block["isError"] = True
    data: Dict[str, Any] = {"turn": turn, "step": step, "message": {
        "id": id or "", "role": "user", "content": [block], "source": {"kind": "tool", "callId": call_id}}}
    if error is not None:
        data["error"] = dict(error)
    if meta is not None:
        data["meta"] = meta
    if cites is None and call_seq is not None:
        cites = [call_seq]
    return event("tool/result", data, append=replace is None, replace=replace, cites=cites)


# ---------------------------------------------------------------- log-only events

def turn_start(turn: int) -> event_pb2.EventInput:
    """``turn/start``."""
    return event("turn/start", {"turn": turn})


def turn_end(turn: int, reason: "str | Mapping[str, Any]" = "completed") -> event_pb2.EventInput:
    """``turn/end`` with a reason kind (``"completed"``, ``"blocked"``, ``"max-tokens"``) or a full reason."""
    return event("turn/end", {"turn": turn, "reason": {"kind": reason} if isinstance(reason, str) else dict(reason)})


def step_start(turn: int, step: int) -> event_pb2.EventInput:
    """``step/start``."""
    return event("step/start", {"turn": turn, "step": step})


def step_end(turn: int, step: int) -> event_pb2.EventInput:
    """``step/end``."""
    return event("step/end", {"turn": turn, "step": step})


def tool_call(call_id: str, name: str, arguments: str, *, turn: int, step: int) -> event_pb2.EventInput:
    """``tool/call`` (``arguments``: the raw JSON string exactly as the model produced it)."""
    return event("tool/call", {"turn": turn, "step": step, "callId": call_id, "name": name, "arguments": arguments})


# ---------------------------------------------------------------- assistant/chunk

def chunk(turn: int, step: int, data: Mapping[str, Any]) -> event_pb2.EventInput:
    """One ``assistant/chunk`` carrying a StreamChunk."""
    return event("assistant/chunk", {"turn": turn, "step": step, "chunk": dict(data)})


def block_start(turn: int, step: int, index: int, block_type: str) -> event_pb2.EventInput:
    """``block-start`` chunk (``block_type``: text, reasoning, tool-call)."""
    return chunk(turn, step, {"type": "block-start", "index": index, "blockType": block_type})


def text_delta(turn: int, step: int, index: int, t: str) -> event_pb2.EventInput:
    """``text-delta`` chunk."""
    return chunk(turn, step, {"type": "text-delta", "index": index, "text": t})


def reasoning_delta(turn: int, step: int, index: int, t: str) -> event_pb2.EventInput:
    """``reasoning-delta`` chunk."""
    return chunk(turn, step, {"type": "reasoning-delta", "index": index, "text": t})


def tool_call_delta(turn: int, step: int, index: int, call_id: str, arguments_delta: str,
                    name: Optional[str] = None) -> event_pb2.EventInput:
    """``tool-call-delta`` chunk."""
    data: Dict[str, Any] = {"type": "tool-call-delta", "index": index, "id": call_id}
    if name is not None:
        data["name"] = name
    data["argumentsDelta"] = arguments_delta
    return chunk(turn, step, data)


def block_end(turn: int, step: int, index: int, block: Mapping[str, Any]) -> event_pb2.EventInput:
    """``block-end`` chunk with the finished block."""
    return chunk(turn, step, {"type": "block-end", "index": index, "block": dict(block)})


def finish(turn: int, step: int, reason: str = "stop") -> event_pb2.EventInput:
    """``finish`` chunk (``reason``: stop, tool-calls, length, ...)."""
    return chunk(turn, step, {"type": "finish", "reason": reason})


def text_chunks(turn: int, step: int, t: str, *, index: int = 0, parts: int = 1) -> List[event_pb2.EventInput]:
    """A streamed text block: block-start, ``parts`` text deltas, block-end."""
    size = max(1, -(-len(t) // max(1, parts)))
    deltas = [t[i:i + size] for i in range(0, len(t), size)] or [""]
    return ([block_start(turn, step, index, "text")] + [text_delta(turn, step, index, d) for d in deltas]
            + [block_end(turn, step, index, text(t))])
