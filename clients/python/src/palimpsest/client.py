"""A thin client over the generated SessionService stub.

- Every failure is raised as :class:`PalimpsestError` with the ``google.rpc.Status`` details
  decoded (``code``, ``reason``, ``metadata``, ``violations``).
- UNAVAILABLE is retried by gRPC itself, from the service config the channel is created with
  (``retries=False`` turns that off). Appends are only safe to retry because every append
  carries an idempotency key: the caller's, or a fresh one generated per call, so a retried
  request returns the original result instead of appending twice.
- :meth:`Client.subscribe_surface` is an iterator that reconnects after a dropped connection or
  a server restart and resumes from the last cursor it yielded, so no delta is lost or repeated.
  :meth:`Client.subscribe_sessions` (the session feed) resumes the same way from the last
  feed position it yielded.

    from palimpsest.client import Client
    from palimpsest import events as ev
    with Client("127.0.0.1:50051") as c:
        c.create_session("demo")
        c.append("demo", [ev.user_message("hi")])
        print(c.messages("demo"))
"""
from __future__ import annotations

import ipaddress
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Generator, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

import grpc

from palimpsest.errors import PalimpsestError, Violation, decode_status
from palimpsest.events import with_derived_ids
from palimpsest.search import SearchHit, Time, search_request, snippet_parts
from palimpsest.writer import AppendWriter
from palimpsest.v1 import content_pb2, event_pb2, service_pb2, service_pb2_grpc, session_pb2

try:  # The OpenTelemetry API is optional: with it, calls carry the current trace context.
    from opentelemetry.propagate import inject as _otel_inject
except ImportError:  # pragma: no cover - depends on the environment
    _otel_inject = None  # type: ignore[assignment]

__all__ = ["AppendWriter", "Client", "PalimpsestError", "RenderedMessage", "SearchHit", "SessionFeedItem", "SurfaceDelta", "TLS", "Violation", "decode_status", "snippet_parts", "SERVICE_CONFIG"]

T = TypeVar("T")

#: Codes of a broken blob stream that a read resumes after (from the bytes it has).
_RESUMABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN)

SERVICE = "palimpsest.v1.SessionService"

#: The channel's service config: UNAVAILABLE (server restarting, connection dropped before the
#: request was committed) is retried with exponential backoff, up to 5 attempts in ~3 s.
SERVICE_CONFIG: Dict[str, Any] = {
    "methodConfig": [{
        "name": [{"service": SERVICE}],
        "retryPolicy": {
            "maxAttempts": 5,
            "initialBackoff": "0.1s",
            "maxBackoff": "2s",
            "backoffMultiplier": 2,
            "retryableStatusCodes": ["UNAVAILABLE"],
        },
    }],
}


_FORMATS = {
    "openai-chat": "MESSAGE_FORMAT_OPENAI_CHAT",
    "openai-responses": "MESSAGE_FORMAT_OPENAI_RESPONSES",
    "anthropic": "MESSAGE_FORMAT_ANTHROPIC",
    "gemini": "MESSAGE_FORMAT_GEMINI",
}


def _message_format(name: str) -> "service_pb2.MessageFormat.ValueType":
    """The MessageFormat enum value of a provider format name."""
    if name not in _FORMATS:
        raise ValueError(f"unknown format {name!r}; use one of {', '.join(_FORMATS)}")
    return service_pb2.MessageFormat.Value(_FORMATS[name])


class RenderedMessage(Tuple[List[int], Any]):
    """One message of the model history in a provider's format: a ``(seqs, message)`` pair (so
    ``for seqs, message in client.rendered_messages(...)`` works) with ``seqs``, ``message`` and
    ``tokens`` attributes: the seqs of the surface events it was rendered from, the provider
    message, and its estimated tokens (the server's estimator over what the message carries, plus
    its role framing; docs/providers.md "Token counts")."""

    tokens: int

    def __new__(cls, seqs: List[int], message: Any, tokens: int) -> "RenderedMessage":
        pair: Iterable[Any] = (seqs, message)
        self = super().__new__(cls, pair)
        self.tokens = tokens
        return self

    @property
    def seqs(self) -> List[int]:
        return self[0]

    @property
    def message(self) -> Any:
        return self[1]

    def __repr__(self) -> str:
        return f"RenderedMessage(seqs={self[0]!r}, message={self[1]!r}, tokens={self.tokens!r})"


@dataclass
class TLS:
    """TLS settings: ``ca`` (PEM file of the server's CA; None = system roots), and for mutual
    TLS ``cert`` and ``key`` (PEM files)."""

    ca: Optional[str] = None
    cert: Optional[str] = None
    key: Optional[str] = None


@dataclass
class SurfaceDelta:
    """One message of a surface subscription.

    ``op`` is ``"snapshot"`` (``seqs``), ``"append"`` (``seq``, ``event``), ``"replace"``
    (``start``, ``end``, ``seq``, ``shadowed``, ``event``), or a signal: ``"checkpoint"``,
    ``"caught_up"``, ``"heartbeat"``. ``cursor`` is the last seq processed (None before any
    event); ``message`` the derived message as JSON when ``include_messages`` was set."""

    op: str
    cursor: Optional[int]
    seq: Optional[int] = None
    start: Optional[int] = None
    end: Optional[int] = None
    shadowed: List[int] = field(default_factory=list)
    seqs: List[int] = field(default_factory=list)
    event: Optional[event_pb2.SessionEvent] = None
    message: Optional[Dict[str, Any]] = None


@dataclass
class SessionFeedItem:
    """One message of the session feed (:meth:`Client.subscribe_sessions`).

    ``kind`` is a change, ``"created"``, ``"deleted"``, ``"labels_changed"`` or ``"appended"``
    (with ``session_id``, ``head_seq`` (None for an empty log), ``event_count``,
    ``surface_length``, ``event_types`` (appended: the distinct types appended, in order),
    ``labels`` (after the change; deleted: before it), ``previous_labels`` (labels_changed),
    ``created_at`` and ``time`` (Unix epoch ms)), or a signal: ``"caught_up"`` (what follows is
    live) or ``"heartbeat"``. ``position`` is the feed position after this item: resume with
    ``after=position``."""

    kind: str
    position: int
    session_id: str = ""
    head_seq: Optional[int] = None
    event_count: int = 0
    surface_length: int = 0
    event_types: List[str] = field(default_factory=list)
    labels: Dict[str, str] = field(default_factory=dict)
    previous_labels: Dict[str, str] = field(default_factory=dict)
    created_at: int = 0
    time: int = 0


_FEED_KINDS = {
    service_pb2.SESSION_CHANGE_KIND_CREATED: "created",
    service_pb2.SESSION_CHANGE_KIND_DELETED: "deleted",
    service_pb2.SESSION_CHANGE_KIND_LABELS_CHANGED: "labels_changed",
    service_pb2.SESSION_CHANGE_KIND_APPENDED: "appended",
}


def _change_item(c: service_pb2.SessionChange, position: int) -> SessionFeedItem:
    return SessionFeedItem(_FEED_KINDS.get(c.kind, "unspecified"), position, session_id=c.session_id,
                           head_seq=c.head_seq if c.HasField("head_seq") else None, event_count=c.event_count,
                           surface_length=c.surface_length, event_types=list(c.event_types), labels=dict(c.labels),
                           previous_labels=dict(c.previous_labels), created_at=c.created_at, time=c.time)


def _feed_items(res: service_pb2.SubscribeSessionsResponse) -> List[SessionFeedItem]:
    """The items of one feed message: a batch (``changes``, asked for with ``batch``) one change
    at a time, each with its own position (a lone ``change`` from a server before batching has no
    position of its own: the message's is used)."""
    kind = res.WhichOneof("kind") or ""
    if kind == "change":
        return [_change_item(res.change, res.change.position or res.position)]
    if kind == "changes":
        return [_change_item(c, c.position) for c in res.changes.changes]
    return [SessionFeedItem(kind, res.position)]


def _is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _read(path: Optional[str]) -> Optional[bytes]:
    if path is None:
        return None
    with open(path, "rb") as f:
        return f.read()


def event_json(e: event_pb2.SessionEvent) -> Any:
    """The event's data as JSON (reads return the canonical ``json`` form by default)."""
    return json.loads(e.data.json) if e.data.WhichOneof("kind") == "json" else None


class Client:
    """A connection to a Palimpsest server.

    ``address`` is ``HOST:PORT``; ``token`` a bearer token (refused in plaintext to a
    non-loopback address, like the CLI); ``tls`` True (system roots), a :class:`TLS` or a
    ``grpc.ChannelCredentials``; ``retries`` False to turn off the UNAVAILABLE retry policy;
    ``timeout`` the deadline in seconds of each unary call; ``interceptors`` wrap the channel.

    Trace context: each call carries the W3C ``traceparent`` (and ``tracestate``) of the caller, so
    the server's spans join the agent's trace. ``traceparent`` is that header, or a callable
    returning it (or None) at each call; without it, the current OpenTelemetry context is injected
    when the ``opentelemetry`` API package is importable (nothing is sent when no SDK is
    configured), and nothing otherwise."""

    def __init__(self, address: str, token: Optional[str] = None, tls: Union[None, bool, TLS, grpc.ChannelCredentials] = None,
                 *, retries: bool = True, timeout: Optional[float] = 30.0,
                 options: Sequence[Tuple[str, Any]] = (), interceptors: Sequence[Any] = (),
                 traceparent: Union[None, str, Callable[[], Optional[str]]] = None):
        host = address.rsplit(":", 1)[0] if ":" in address else address
        if token and not tls and not _is_loopback(host):
            raise ValueError(f"refusing to send a bearer token to {address} without TLS; pass tls=TLS(ca=...) or use a loopback address")
        opts: List[Tuple[str, Any]] = [
            ("grpc.max_receive_message_length", -1),
            ("grpc.enable_retries", 1 if retries else 0),
        ]
        if retries:
            opts.append(("grpc.service_config", json.dumps(SERVICE_CONFIG)))
        opts += list(options)
        if tls:
            if isinstance(tls, grpc.ChannelCredentials):
                creds = tls
            else:
                t = tls if isinstance(tls, TLS) else TLS()
                creds = grpc.ssl_channel_credentials(_read(t.ca), _read(t.key), _read(t.cert))
            channel = grpc.secure_channel(address, creds, options=opts)
        else:
            channel = grpc.insecure_channel(address, options=opts)
        if interceptors:
            channel = grpc.intercept_channel(channel, *interceptors)
        self.address = address
        self.channel: grpc.Channel = channel
        self.stub = service_pb2_grpc.SessionServiceStub(channel)
        self.timeout = timeout
        self._auth: Tuple[Tuple[str, str], ...] = (("authorization", f"Bearer {token}"),) if token else ()
        self._traceparent = traceparent

    # ------------------------------------------------------------ plumbing

    def close(self) -> None:
        """Closes the channel (ends every open subscription)."""
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _metadata(self) -> Tuple[Tuple[str, str], ...]:
        """The metadata of one call: the token, and the caller's trace context."""
        tp = self._traceparent
        if tp is not None:
            value = tp() if callable(tp) else tp
            return self._auth + ((("traceparent", value),) if value else ())
        if _otel_inject is None:
            return self._auth
        carrier: dict = {}
        _otel_inject(carrier)
        return self._auth + tuple((k, v) for k, v in carrier.items() if k in ("traceparent", "tracestate"))

    def _call(self, method: Callable[..., T], request: Any) -> T:
        try:
            return method(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise PalimpsestError.from_rpc_error(e) from None

    # ------------------------------------------------------------ sessions

    def create_session(self, session_id: Optional[str] = None, labels: Optional[Mapping[str, str]] = None, *,
                       strict: bool = False, cwd: Optional[str] = None,
                       pairing_guard: Optional[bool] = None) -> session_pb2.Session:
        """Creates an empty session (``session_id`` None = a generated UUID) and returns it.

        ``pairing_guard`` False turns off the tool-pairing guard (None = the server's default: on);
        with it on, an append that would orphan a tool result or drop one while its call stays is
        refused with FAILED_PRECONDITION / TOOL_PAIRING_BROKEN."""
        req = service_pb2.CreateSessionRequest(session_id=session_id or "", labels=dict(labels or {}), strict=strict)
        if cwd is not None:
            req.cwd = cwd
        if pairing_guard is not None:
            req.pairing_guard = pairing_guard
        return self._call(self.stub.CreateSession, req).session

    def get_session(self, session_id: str) -> session_pb2.Session:
        """The session header, labels and counts, with ``surface_tokens`` (the model history's
        estimated size by the server's estimator, the reference token meter's) and ``usage``
        (sums of the usage recorded in assistant messages)."""
        return self._call(self.stub.GetSession, service_pb2.GetSessionRequest(session_id=session_id)).session

    def head(self, session_id: str) -> int:
        """Seq of the session's last event (-1 for an empty log): the ``expected_last_seq`` of a guarded append."""
        s = self.get_session(session_id)
        return s.head_seq if s.HasField("head_seq") else -1

    def list_sessions(self, labels: Optional[Mapping[str, str]] = None, page_size: int = 0) -> Iterator[session_pb2.Session]:
        """Every session (newest first), paging through ListSessions."""
        token = ""
        while True:
            res = self._call(self.stub.ListSessions, service_pb2.ListSessionsRequest(
                page_size=page_size, page_token=token, label_selector=dict(labels or {})))
            yield from res.sessions
            token = res.next_page_token
            if not token:
                return

    def search(self, query: str, *, labels: Optional[Mapping[str, str]] = None, session_ids: Sequence[str] = (),
               event_types: Sequence[str] = (), start_time: Optional[Time] = None, end_time: Optional[Time] = None,
               tool_name: str = "", surface_only: bool = False, include_shadowed: bool = False,
               order: Optional[str] = None, page_size: int = 0) -> Iterator[SearchHit]:
        """Every event of your sessions matching ``query`` (words, ``"phrases"``, ``-exclusions``,
        ``prefix*``, ``type:``, ``tool:``, ``label:k=v``, ``session:``; docs/search.md), paging
        through SearchEvents as you iterate (the next page is asked for only when you read past
        the current one). Filters: ``labels`` (all must match), ``session_ids``, ``event_types``,
        ``start_time`` / ``end_time`` (Unix ms or a datetime; end excluded), ``tool_name``,
        ``surface_only``, ``include_shadowed``; ``order`` is ``"newest"`` (the default) or
        ``"score"``. A malformed query raises :class:`PalimpsestError` INVALID_ARGUMENT /
        SEARCH_QUERY_INVALID with ``metadata["position"]``, its 0-based offset.
        :func:`palimpsest.search.snippet_parts` cuts a hit's snippet at its matches."""
        token = ""
        while True:
            hits, token = self.search_page(query, page_token=token, labels=labels, session_ids=session_ids,
                                           event_types=event_types, start_time=start_time, end_time=end_time,
                                           tool_name=tool_name, surface_only=surface_only,
                                           include_shadowed=include_shadowed, order=order, page_size=page_size)
            yield from hits
            if not token:
                return

    def search_page(self, query: str, page_token: str = "", **filters: Any) -> Tuple[List[SearchHit], str]:
        """One page of :meth:`search` (same keyword filters): its hits and the next page's token
        (``""`` on the last page)."""
        res = self._call(self.stub.SearchEvents, search_request(query, page_token=page_token, **filters))
        return list(res.hits), res.next_page_token

    def update_session(self, session_id: str, set_labels: Optional[Mapping[str, str]] = None,
                       remove_labels: Sequence[str] = (), *, expected_version: Optional[int] = None) -> session_pb2.Session:
        """Sets (adds or overwrites) and removes labels of a session and returns it with its new
        ``metadata_version``. The limits of :meth:`create_session` apply to the result; a key both
        set and removed is INVALID_ARGUMENT. With ``expected_version`` (a ``metadata_version`` you
        read) the change is made only while the metadata is still at that version: otherwise it is
        refused with ABORTED / METADATA_VERSION_MISMATCH and nothing changes (read the session
        again and retry). Reported on the session feed as ``labels_changed``."""
        if isinstance(remove_labels, str):
            raise TypeError("remove_labels is a sequence of keys, not a string")
        req = service_pb2.UpdateSessionRequest(session_id=session_id, set_labels=dict(set_labels or {}),
                                               remove_labels=list(remove_labels))
        if expected_version is not None:
            req.expected_version = expected_version
        return self._call(self.stub.UpdateSession, req).session

    def delete_session(self, session_id: str) -> None:
        """Deletes a session and its log."""
        self._call(self.stub.DeleteSession, service_pb2.DeleteSessionRequest(session_id=session_id))

    # ------------------------------------------------------------ writes

    def append(self, session_id: str, events: Sequence[event_pb2.EventInput], expected_last_seq: Optional[int] = None,
               idempotency_key: Optional[str] = None) -> List[int]:
        """Appends ``events`` as one atomic batch and returns their seqs.

        ``expected_last_seq`` guards against concurrent writers (HEAD_MISMATCH when the head
        moved; -1 = the session must be empty). Without an ``idempotency_key`` one is generated
        for this call, so a retry after UNAVAILABLE cannot append the batch twice. Message ids the
        builders left empty are derived from the key and the event's index
        (:func:`palimpsest.events.derived_id`): retry a failed append by rebuilding the same batch
        with the same key, and the server answers with the stored seqs."""
        key = idempotency_key or f"py-{uuid.uuid4()}"
        req = service_pb2.AppendEventsRequest(session_id=session_id, events=with_derived_ids(key, events),
                                              idempotency_key=key)
        if expected_last_seq is not None:
            req.expected_last_seq = expected_last_seq
        return list(self._call(self.stub.AppendEvents, req).seqs)

    def append_stream(self) -> AppendWriter:
        """A writer on one AppendStream: ``w.append(session_id, events, ...)`` pipelines batches
        (no per-call cost) and returns a Future of the seqs, failing with the PalimpsestError the
        unary :meth:`append` would raise; ``close`` (or leaving the ``with`` block) half-closes and
        waits for the outstanding answers; a broken stream fails every outstanding batch.

            with client.append_stream() as w:
                futures = [w.append(sid, [ev.user_message(t)]) for t in texts]
            seqs = [f.result() for f in futures]
        """
        return AppendWriter(lambda requests: self.stub.AppendStream(requests, metadata=self._metadata))

    def repair(self, session_id: str) -> List[event_pb2.SessionEvent]:
        """Appends the closers of an interrupted turn (nothing for a balanced log) and returns them."""
        return list(self._call(self.stub.RepairSession, service_pb2.RepairSessionRequest(session_id=session_id)).events)

    def fork(self, session_id: str, at_seq: Optional[int] = None, child_session_id: Optional[str] = None,
             labels: Optional[Mapping[str, str]] = None) -> session_pb2.Session:
        """Forks the session at a boundary seq (default: its last event) into a child session."""
        req = service_pb2.ForkSessionRequest(session_id=session_id, child_session_id=child_session_id or "", labels=dict(labels or {}))
        if at_seq is not None:
            req.at_seq = at_seq
        return self._call(self.stub.ForkSession, req).session

    def export_session(self, session_id: str, *, blob_refs: bool = False) -> Iterator[bytes]:
        """The session as reference JSONL, in the chunks the server streams (write them to a file
        in order). Closing the iterator cancels the stream. ``blob_refs``: a file with blob
        references instead of bytes, which :meth:`import_session` into a tenant holding the blobs
        turns back into the same session."""
        call = self.stub.ExportSession(service_pb2.ExportSessionRequest(session_id=session_id, blob_refs=blob_refs),
                                       metadata=self._metadata)
        try:
            for res in call:
                yield res.chunk
        except grpc.RpcError as e:
            raise PalimpsestError.from_rpc_error(e) from None
        finally:
            call.cancel()

    def import_session(self, source: "bytes | str | Iterable[bytes]", session_id: str = "", *,
                       labels: Optional[Mapping[str, str]] = None, strict: bool = False, allow_seq_gaps: bool = False,
                       pairing_guard: bool = False) -> service_pb2.ImportSessionResponse:
        """Imports reference JSONL (bytes, text, or chunks such as an open binary file) as a new
        session, streamed; atomic: a refused file leaves no session. The response holds the
        ``session`` and ``uncommitted_tail_bytes`` (a final line without its newline, left out)."""
        chunks: Iterable[bytes]
        if isinstance(source, str):
            chunks = [source.encode()]
        elif isinstance(source, (bytes, bytearray)):
            chunks = [bytes(source)]
        else:
            chunks = source

        def requests() -> Iterator[service_pb2.ImportSessionRequest]:
            yield service_pb2.ImportSessionRequest(options=service_pb2.ImportOptions(
                session_id=session_id, labels=dict(labels or {}), strict=strict, allow_seq_gaps=allow_seq_gaps,
                pairing_guard=pairing_guard))
            for chunk in chunks:
                yield service_pb2.ImportSessionRequest(chunk=chunk)

        return self._call(self.stub.ImportSession, requests())

    # ------------------------------------------------------------ reads

    def get_surface(self, session_id: str, as_of_seq: Optional[int] = None) -> List[int]:
        """The surface: ordered seqs of the model-visible events; with ``as_of_seq``, the surface
        right after that event (time travel; OUT_OF_RANGE / AS_OF_SEQ_AFTER_HEAD past the head)."""
        req = service_pb2.GetSurfaceRequest(session_id=session_id)
        if as_of_seq is not None:
            req.as_of_seq = as_of_seq
        return list(self._call(self.stub.GetSurface, req).seqs)

    def messages(self, session_id: str, transcript: bool = False, as_of_seq: Optional[int] = None, *,
                 format: Optional[str] = None, drop_unpaired: bool = False, blob_refs: bool = False) -> List[Any]:
        """What the model sees next (the model history), or with ``transcript=True`` what a human
        reads; each message as the JSON the reference stores (``id``, ``role``, ``content``, ``source``).
        ``as_of_seq``: the messages as they were right after that event.

        ``format`` (``"openai-chat"``, ``"openai-responses"``, ``"anthropic"`` or ``"gemini"``): the
        model history as that provider's request messages, ready to send (docs/providers.md);
        FAILED_PRECONDITION / HISTORY_NOT_RENDERABLE when the provider would refuse it, unless
        ``drop_unpaired=True``. Use :meth:`rendered_messages` for the seqs and tokens of each message.
        ``blob_refs``: blobbed values as their references (fetch them with :meth:`get_blob`)
        instead of their bytes (docs/blobs.md)."""
        if format is not None:
            return [msg for _, msg in self.rendered_messages(session_id, format, as_of_seq=as_of_seq, drop_unpaired=drop_unpaired,
                                                             blob_refs=blob_refs)]
        return [json.loads(m.message_json) for _, m in self.derived_messages(session_id, transcript, as_of_seq, blob_refs=blob_refs)]

    def rendered_messages(self, session_id: str, format: str, as_of_seq: Optional[int] = None,
                          drop_unpaired: bool = False, *, blob_refs: bool = False) -> List[RenderedMessage]:
        """(seqs, provider message) pairs of the model history rendered for ``format`` (see
        :meth:`messages`): the seqs each provider message was rendered from, to cite or prune by,
        each a :class:`RenderedMessage` whose ``tokens`` is the message's estimated tokens."""
        req = service_pb2.GetMessagesRequest(session_id=session_id, view=service_pb2.MESSAGE_VIEW_MODEL_HISTORY,
                                             format=_message_format(format), drop_unpaired=drop_unpaired, blob_refs=blob_refs)
        if as_of_seq is not None:
            req.as_of_seq = as_of_seq
        res = self._call(self.stub.GetMessages, req)
        return [RenderedMessage(list(m.seqs), json.loads(m.provider_json), m.tokens) for m in res.rendered]

    def import_messages(self, session_id: str, format: str, messages: Sequence[Any], *,
                        provider: str = "", model: str = "") -> List[int]:
        """Appends a conversation given in a provider's ``format`` (its messages / input items /
        contents, as JSON-able objects) to an existing session, as the events the reference writes
        (user/message, assistant/message, tool/call, tool/result); returns their seqs. Rendering
        the session back in ``format`` gives the same messages (docs/providers.md)."""
        req = service_pb2.ImportMessagesRequest(session_id=session_id, format=_message_format(format),
                                                messages_json=json.dumps(list(messages)), provider=provider, model=model)
        return list(self._call(self.stub.ImportMessages, req).seqs)

    def derived_messages(self, session_id: str, transcript: bool = False, as_of_seq: Optional[int] = None,
                         typed: bool = False, *, blob_refs: bool = False) -> List[Tuple[int, service_pb2.DerivedMessage]]:
        """(seq, DerivedMessage) pairs, for callers that need the seq each message came from (and
        each message's estimated ``tokens``);
        ``typed`` also fills ``DerivedMessage.message`` (the typed palimpsest.v1 content form; not
        for a message holding a blob reference, ``blob_refs``)."""
        view = service_pb2.MESSAGE_VIEW_TRANSCRIPT if transcript else service_pb2.MESSAGE_VIEW_MODEL_HISTORY
        req = service_pb2.GetMessagesRequest(session_id=session_id, view=view, typed=typed, blob_refs=blob_refs)
        if as_of_seq is not None:
            req.as_of_seq = as_of_seq
        res = self._call(self.stub.GetMessages, req)
        return [(m.seq, m) for m in res.messages]

    # ------------------------------------------------------------ compaction and pruning

    def plan_compaction(self, session_id: str, keep_tokens: Optional[int] = None, *, up_to_seq: Optional[int] = None,
                        retain_tokens: Optional[int] = None,
                        token_counts: Optional[Mapping[int, int]] = None,
                        omit_messages: bool = False) -> service_pb2.PlanCompactionResponse:
        """Plans a compaction (read-only) with exactly one budget: ``retain_tokens`` (the
        reference's: keep the shortest recent tail of at least N tokens), ``keep_tokens``
        (Palimpsest's: the longest recent tail of at most N tokens) or ``up_to_seq`` (shadow up to
        that surface seq). The plan holds ``start``,
        ``end``, ``shadowed_seqs``, ``expected_last_seq`` (the head it was made against), the
        derived ``messages`` of the range (what to summarise) and ``blockers`` (empty = ready).
        ``start`` is unset (``plan.HasField("start")`` is False) when there is nothing to compact."""
        if [keep_tokens, up_to_seq, retain_tokens].count(None) != 2:
            raise ValueError("plan_compaction needs exactly one budget: retain_tokens=N, keep_tokens=N or up_to_seq=SEQ")
        req = service_pb2.PlanCompactionRequest(session_id=session_id, token_counts=dict(token_counts or {}),
                                                omit_messages=omit_messages)
        if retain_tokens is not None:
            req.retain_tokens = retain_tokens
        elif keep_tokens is not None:
            req.keep_tokens = keep_tokens
        else:
            req.up_to_seq = up_to_seq  # type: ignore[assignment]
        return self._call(self.stub.PlanCompaction, req)

    def compact(self, session_id: str, summary: Union[str, Sequence[Mapping[str, Any]], Callable[[List[Dict[str, Any]]], Any]], *,
                provider: str, model: str, keep_tokens: Optional[int] = None, up_to_seq: Optional[int] = None,
                retain_tokens: Optional[int] = None,
                plan: Optional[service_pb2.PlanCompactionResponse] = None, token_counts: Optional[Mapping[int, int]] = None,
                usage: Optional[Mapping[str, int]] = None, max_tokens: Optional[int] = None,
                idempotency_key: Optional[str] = None,
                source_command_id: Optional[str] = None) -> Optional[service_pb2.CompactResponse]:
        """Compacts the oldest part of the surface into ``summary`` and returns the CompactResponse
        (``seqs`` of compaction/start, compaction/summary, the replacing user/message and
        compaction/end; ``compaction_id``), or None when the plan has nothing to compact.

        Without ``plan`` it plans first (``retain_tokens``, ``keep_tokens`` or ``up_to_seq``, as
        :meth:`plan_compaction`). A summary that is not smaller than the range is refused as the
        reference refuses it: the response's ``error`` is set (``res.HasField("error")``) and only
        compaction/start and compaction/end were written. ``source_command_id`` is written as
        ``sourceCommandId`` in the compaction's events. The Compact is conditional on the head the plan was made
        against: if another writer moved the session, it fails with FAILED_PRECONDITION /
        HEAD_MISMATCH and nothing is written (plan again). ``summary`` is the text, a list of
        content blocks (``[{"type": "text", "text": ...}]``), or a callable that gets the plan's
        messages (JSON, what to send to your summariser) and returns either. ``usage`` uses the
        TokenUsage field names (``input_tokens``, ``output_tokens``, ...). Without an
        ``idempotency_key`` one is generated, so a retry cannot compact twice."""
        if plan is None:
            plan = self.plan_compaction(session_id, keep_tokens, up_to_seq=up_to_seq, retain_tokens=retain_tokens,
                                        token_counts=token_counts)
        elif keep_tokens is not None or up_to_seq is not None or retain_tokens is not None:
            raise ValueError("compact takes either plan= or a budget (retain_tokens/keep_tokens/up_to_seq), not both")
        if not plan.HasField("start"):
            return None
        text: Any = summary([json.loads(m.message_json) for m in plan.messages]) if callable(summary) else summary
        req = service_pb2.CompactRequest(session_id=session_id, start=plan.start, end=plan.end,
                                         expected_last_seq=plan.expected_last_seq, provider=provider, model=model,
                                         idempotency_key=idempotency_key or f"py-{uuid.uuid4()}")
        if isinstance(text, str):
            req.summary_text = text
        else:
            req.summary_json = json.dumps([dict(b) for b in text])
        if usage is not None:
            req.usage.CopyFrom(content_pb2.TokenUsage(**dict(usage)))
        if max_tokens is not None:
            req.max_tokens = max_tokens
        if source_command_id:
            req.source_command_id = source_command_id
        return self._call(self.stub.Compact, req)

    def prune_tool_results(self, session_id: str, seqs: Sequence[int] = (), *, min_bytes: int = 0, keep_recent: int = 0,
                           exclude_tools: Sequence[str] = (), head_chars: Optional[int] = None, tail_chars: Optional[int] = None,
                           expected_last_seq: Optional[int] = None,
                           idempotency_key: Optional[str] = None, min_chars: int = 0, marker: str = "reference",
                           min_saving_chars: Optional[int] = None) -> service_pb2.PruneToolResultsResponse:
        """Shortens tool results on the surface in place (a compaction/prune, then a tool/result
        copy whose inner text keeps its first ``head_chars`` and last ``tail_chars``): the given
        surface ``seqs``, or by policy (text over ``min_chars`` code points and/or ``min_bytes``
        UTF-8 bytes, except the ``keep_recent`` most recent results and ``exclude_tools``). As the
        reference's pruner: a result is pruned when its text is over the threshold (``min_chars``,
        else head + marker + tail) with the fixed marker; ``marker="with-count"`` (names the
        removed count) and ``min_saving_chars`` are Palimpsest's options. Returns ``pruned``
        (original_seq, replacement_seq, bytes_before/after), ``bytes_saved`` and ``skipped``.
        ``expected_last_seq`` makes it conditional (HEAD_MISMATCH); a seq that is not a tool
        result on the surface is refused with PRUNE_TARGET_INVALID (metadata ``seq``)."""
        if not seqs and not min_bytes and not min_chars:
            raise ValueError("prune_tool_results needs seqs or a policy (min_chars=N or min_bytes=N)")
        if marker not in ("reference", "with-count"):
            raise ValueError(f"marker is 'reference' or 'with-count', not {marker!r}")
        req = service_pb2.PruneToolResultsRequest(session_id=session_id, seqs=list(seqs), min_bytes=min_bytes,
                                                  keep_recent=keep_recent, exclude_tools=list(exclude_tools),
                                                  min_chars=min_chars,
                                                  marker=(service_pb2.PruneToolResultsRequest.MARKER_WITH_COUNT
                                                          if marker == "with-count" else
                                                          service_pb2.PruneToolResultsRequest.MARKER_UNSPECIFIED),
                                                  idempotency_key=idempotency_key or f"py-{uuid.uuid4()}")
        if head_chars is not None:
            req.head_chars = head_chars
        if tail_chars is not None:
            req.tail_chars = tail_chars
        if expected_last_seq is not None:
            req.expected_last_seq = expected_last_seq
        if min_saving_chars is not None:
            req.min_saving_chars = min_saving_chars
        return self._call(self.stub.PruneToolResults, req)

    def events(self, session_id: str, after: Optional[int] = None, types: Sequence[str] = (),
               page_size: int = 0, *, blob_refs: bool = False) -> Iterator[event_pb2.SessionEvent]:
        """Every event after seq ``after`` (default: from the start), paging through ListEvents.
        ``blob_refs``: blobbed values (images, large strings; docs/blobs.md) come as their
        references ``{"$blob": "sha256:…", "bytes": N, "mediaType": …}`` (fetch them with
        :meth:`get_blob`) instead of their bytes."""
        req = service_pb2.ListEventsRequest(session_id=session_id, page_size=page_size, types=list(types),
                                            direction=service_pb2.DIRECTION_FORWARD, blob_refs=blob_refs)
        if after is not None:
            req.from_seq = after + 1
        while True:
            res = self._call(self.stub.ListEvents, req)
            yield from res.events
            if not res.next_page_token:
                return
            req = service_pb2.ListEventsRequest(session_id=session_id, page_token=res.next_page_token, page_size=page_size,
                                                types=list(types), direction=service_pb2.DIRECTION_FORWARD, blob_refs=blob_refs)

    # ------------------------------------------------------------ blobs

    def blob_chunks(self, digest: str, offset: int = 0, *, resume: int = 5) -> Iterator[bytes]:
        """The bytes of the tenant's blob ``digest`` from ``offset``, chunk by chunk (GetBlob). A
        stream that breaks (the connection drops, the server restarts) is opened again from the
        bytes already yielded, up to ``resume`` times in a row without progress; errors that a
        retry cannot fix (NOT_FOUND / BLOB_NOT_FOUND, DATA_LOSS, ...) are raised at once."""
        failures = 0
        while True:
            req = service_pb2.GetBlobRequest(digest=digest, offset=offset)
            try:
                for res in self.stub.GetBlob(req, metadata=self._metadata):
                    if res.data:
                        failures = 0
                        offset += len(res.data)
                        yield res.data
                return
            except grpc.RpcError as e:
                code = e.code() if callable(getattr(e, "code", None)) else None
                if code not in _RESUMABLE or failures >= resume:
                    raise PalimpsestError.from_rpc_error(e) from None
                failures += 1
                time.sleep(min(0.05 * 2 ** failures, 1.0))

    def get_blob(self, digest: str, offset: int = 0) -> bytes:
        """The tenant's blob ``digest`` (from ``offset``) as bytes: :meth:`blob_chunks` joined,
        so a read cut short resumes from what it has."""
        return b"".join(self.blob_chunks(digest, offset))

    # ------------------------------------------------------------ subscriptions

    def subscribe_surface(self, session_id: str, after: Optional[int] = None, *, snapshot: bool = False,
                          include_messages: bool = False, heartbeat_ms: int = 0, reconnect: bool = True,
                          max_backoff: float = 5.0, blob_refs: bool = False) -> Generator[SurfaceDelta, None, None]:
        """Surface deltas from cursor ``after`` (None = from the start; ``snapshot`` = start with
        the current surface), live until the caller stops iterating.

        A dropped connection, a server restart or a shutdown (UNAVAILABLE) is followed by a
        reconnect with backoff that resumes after the last cursor yielded (``reconnect=False``
        raises instead); every other failure (the session was deleted: NOT_FOUND) is raised as
        :class:`PalimpsestError`. Closing the iterator cancels the stream. ``blob_refs``: event
        data and messages with blobbed values as their references (docs/blobs.md)."""
        cursor = after
        first = True
        backoff = 0.05
        while True:
            req = service_pb2.SubscribeSurfaceRequest(session_id=session_id, include_messages=include_messages,
                                                      heartbeat_interval_ms=heartbeat_ms, blob_refs=blob_refs)
            if first and snapshot:
                req.snapshot = True
            elif cursor is not None:
                req.after_seq = cursor
            first = False
            call = self.stub.SubscribeSurface(req, metadata=self._metadata)
            try:
                for res in call:
                    backoff = 0.05  # a message arrived: the connection is healthy again
                    delta = _delta(res)
                    if delta.cursor is not None:
                        cursor = delta.cursor
                    yield delta
                return  # the server ended the stream cleanly (it never does while live)
            except grpc.RpcError as e:
                err = PalimpsestError.from_rpc_error(e)
                if not reconnect or err.code != "UNAVAILABLE":
                    raise err from None
                # A shutdown names the cursor to resume from; it is never ahead of what we yielded.
                time.sleep(backoff)
                backoff = min(max_backoff, backoff * 2)
            finally:
                call.cancel()

    def subscribe_sessions(self, after: Optional[int] = None, *, from_now: bool = False,
                           selector: Optional[Mapping[str, str]] = None, heartbeat_ms: int = 0, reconnect: bool = True,
                           max_backoff: float = 5.0) -> Generator[SessionFeedItem, None, None]:
        """The session feed: one :class:`SessionFeedItem` per change of any session the caller may
        see (``created``, ``deleted``, ``labels_changed``, ``appended``), from feed position
        ``after`` (None = the beginning of the feed; ``from_now`` = only changes from now on), then
        ``caught_up`` and heartbeats, live until the caller stops iterating. ``selector``: only
        sessions carrying every one of these labels.

        A dropped connection, a server restart or a shutdown (UNAVAILABLE) is followed by a
        reconnect with backoff that resumes after the last position yielded, so every change is
        yielded exactly once (``reconnect=False`` raises instead); every other failure is raised as
        :class:`PalimpsestError`. Closing the iterator cancels the stream."""
        position = after
        backoff = 0.05
        while True:
            # batch: several changes per message when they are ready together (yielded one at a time).
            req = service_pb2.SubscribeSessionsRequest(label_selector=dict(selector or {}), heartbeat_interval_ms=heartbeat_ms,
                                                       batch=True)
            if position is not None:
                req.after = position
            elif from_now:
                req.from_now = True
            call = self.stub.SubscribeSessions(req, metadata=self._metadata)
            try:
                for res in call:
                    backoff = 0.05  # a message arrived: the connection is healthy again
                    # One change at a time, the position moving with each: a caller that stops
                    # in the middle of a batch resumes right after the last change it was given.
                    for item in _feed_items(res):
                        position = item.position
                        yield item
                return  # the server ended the stream cleanly (it never does while live)
            except grpc.RpcError as e:
                err = PalimpsestError.from_rpc_error(e)
                if not reconnect or err.code != "UNAVAILABLE":
                    raise err from None
                time.sleep(backoff)
                backoff = min(max_backoff, backoff * 2)
            finally:
                call.cancel()


def _delta(res: service_pb2.SubscribeSurfaceResponse) -> SurfaceDelta:
    cursor = res.cursor if res.HasField("cursor") else None
    kind = res.WhichOneof("kind") or ""
    event = res.event if res.HasField("event") else None
    message = json.loads(res.message.message_json) if res.HasField("message") and res.message.message_json else None
    if kind == "snapshot":
        return SurfaceDelta("snapshot", cursor, seqs=list(res.snapshot.seqs))
    if kind == "append":
        return SurfaceDelta("append", cursor, seq=res.append.seq, event=event, message=message)
    if kind == "replace":
        r = res.replace
        return SurfaceDelta("replace", cursor, seq=r.seq, start=r.start, end=r.end, shadowed=list(r.shadowed_seqs),
                            event=event, message=message)
    return SurfaceDelta(kind, cursor)
