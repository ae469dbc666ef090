"""palimpsest.client against a real server: a turn built with palimpsest.events, decoded errors
(each rejection leaves the log untouched), idempotent appends, UNAVAILABLE retries from the
service config, and a surface subscription that resumes by itself after dropped connections."""
from __future__ import annotations

import json
import threading
from typing import Any, List

import grpc
import pytest

from palimpsest import events as ev
from palimpsest.client import Client, PalimpsestError, SurfaceDelta, event_json
from palimpsest.v1 import service_pb2, service_pb2_grpc


def one_turn(c: Client, sid: str, n: int = 1) -> dict:
    """Appends a turn with a streamed answer and a tool call; returns the seqs by name."""
    head = c.head(sid)
    base = head + 1
    chunks = ev.text_chunks(n, 1, "Let me look.", parts=2)
    batch = [ev.turn_start(n), ev.step_start(n, 1), ev.user_message("What is here?", id=f"u{n}")] + chunks
    chunk_seqs = list(range(base + 3, base + 3 + len(chunks)))
    batch.append(ev.assistant_message("Let me look.", turn=n, step=1, provider="p", model="m", id=f"a{n}",
                                      tool_calls=[(f"c{n}", "ls", '{"path":"."}')],
                                      usage={"inputTokens": 10, "outputTokens": 3}, cites=chunk_seqs))
    call_seq = base + len(batch)
    batch.append(ev.tool_call(f"c{n}", "ls", '{"path":"."}', turn=n, step=1))
    batch.append(ev.tool_result(f"c{n}", "README.md\nsrc/", turn=n, step=1, id=f"r{n}", call_seq=call_seq))
    batch += [ev.step_end(n, 1), ev.turn_end(n)]
    seqs = c.append(sid, batch, expected_last_seq=head)
    assert seqs == list(range(base, base + len(batch)))
    return {"user": base + 2, "assistant": call_seq - 1, "call": call_seq, "result": call_seq + 1, "head": seqs[-1]}


def test_a_turn_built_with_the_event_builders(client: Client, session_id: str) -> None:
    s = client.create_session(session_id, {"client": "pytest"})
    assert s.id == session_id and dict(s.labels) == {"client": "pytest"}
    t = one_turn(client, session_id)
    assert client.get_surface(session_id) == [t["user"], t["assistant"], t["result"]]
    assert client.messages(session_id) == [
        {"id": "u1", "role": "user", "content": [{"type": "text", "text": "What is here?"}], "source": {"kind": "user"}},
        {"id": "a1", "role": "assistant", "source": {"kind": "model", "provider": "p", "model": "m"},
         "content": [{"type": "text", "text": "Let me look."}, {"type": "tool-call", "id": "c1", "name": "ls", "arguments": '{"path":"."}'}]},
        {"id": "r1", "role": "user", "source": {"kind": "tool", "callId": "c1"},
         "content": [{"type": "tool-result", "toolCallId": "c1", "content": [{"type": "text", "text": "README.md\nsrc/"}]}]},
    ]
    events = list(client.events(session_id))
    assert [e.type for e in events] == ["turn/start", "step/start", "user/message"] + ["assistant/chunk"] * 4 + [
        "assistant/message", "tool/call", "tool/result", "step/end", "turn/end"]
    assert event_json(events[3]) == {"turn": 1, "step": 1, "chunk": {"type": "block-start", "index": 0, "blockType": "text"}}
    assert event_json(events[6])["chunk"] == {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Let me look."}}
    assert list(events[t["assistant"]].source_event_seqs.seqs) == [3, 4, 5, 6]
    assert event_json(events[t["assistant"]])["usage"] == {"inputTokens": 10, "outputTokens": 3}
    assert list(events[t["result"]].source_event_seqs.seqs) == [t["call"]]
    assert event_json(events[-1]) == {"turn": 1, "reason": {"kind": "completed"}}
    # A prune: the same tool result with only its output changed, replacing the original.
    client.append(session_id, [
        ev.event("compaction/prune", {"shadowedRange": {"start": t["result"], "end": t["result"]}, "shadowedSeqs": [t["result"]], "shadowedTokenCount": 4}),
        ev.tool_result("c1", "[pruned]", turn=1, step=1, id="r1", replace=(t["result"], t["result"]), cites=[t["result"]]),
    ])
    assert client.get_surface(session_id) == [t["user"], t["assistant"], t["head"] + 2]
    assert client.messages(session_id)[-1]["content"][0]["content"] == [{"type": "text", "text": "[pruned]"}]
    transcript = client.messages(session_id, transcript=True)
    assert [m["id"] for m in transcript] == ["u1", "a1", "r1"]
    assert transcript[-1]["content"][0]["content"][0]["text"] == "README.md\nsrc/"


def test_head_mismatch_is_decoded_and_leaves_the_log_untouched(client: Client, session_id: str) -> None:
    client.create_session(session_id)
    client.append(session_id, [ev.user_message("one")], expected_last_seq=-1)
    with pytest.raises(PalimpsestError) as info:
        client.append(session_id, [ev.user_message("two")], expected_last_seq=-1)
    e = info.value
    assert (e.code, e.reason, e.domain) == ("FAILED_PRECONDITION", "HEAD_MISMATCH", "palimpsest.dev")
    assert e.status_code == grpc.StatusCode.FAILED_PRECONDITION
    assert e.metadata["expected"] == "-1" and e.metadata["actual"] == "0"
    assert [v.kind for v in e.violations] == ["precondition"] and e.violations[0].type == "HEAD_MISMATCH"
    assert "re-read" in e.message or "retry" in e.message
    assert client.head(session_id) == 0 and client.get_surface(session_id) == [0]
    # The success case next to it: the right head is accepted.
    assert client.append(session_id, [ev.user_message("two")], expected_last_seq=0) == [1]


def test_bad_request_names_the_failing_event(client: Client, session_id: str) -> None:
    client.create_session(session_id)
    with pytest.raises(PalimpsestError) as info:
        client.append(session_id, [ev.user_message("ok"), ev.event("turn/start", {"turn": 1}, append=True)])
    e = info.value
    assert (e.code, e.reason) == ("INVALID_ARGUMENT", "SURFACE_OP_FORBIDDEN")
    assert e.metadata["index"] == "1"
    assert [(v.kind, v.field) for v in e.violations] == [("field", "events[1]")]
    assert e.as_dict()["code"] == "INVALID_ARGUMENT"
    assert client.head(session_id) == -1 and client.get_surface(session_id) == []
    assert client.append(session_id, [ev.user_message("ok"), ev.turn_start(1)]) == [0, 1]


def test_not_found(client: Client) -> None:
    with pytest.raises(PalimpsestError) as info:
        client.get_surface("py-no-such-session")
    assert (info.value.code, info.value.reason) == ("NOT_FOUND", "SESSION_NOT_FOUND")


class Recorder(grpc.UnaryUnaryClientInterceptor):
    def __init__(self) -> None:
        self.requests: List[Any] = []

    def intercept_unary_unary(self, continuation, details, request):  # type: ignore[no-untyped-def]
        self.requests.append(request)
        return continuation(details, request)


def test_every_append_carries_an_idempotency_key_so_a_retry_replays(address: str, session_id: str) -> None:
    rec = Recorder()
    with Client(address, interceptors=[rec]) as c:
        c.create_session(session_id)
        assert c.append(session_id, [ev.user_message("a")]) == [0]
        assert c.append(session_id, [ev.user_message("b")]) == [1]
        keys = [r.idempotency_key for r in rec.requests if isinstance(r, service_pb2.AppendEventsRequest)]
        assert len(keys) == 2 and all(keys) and keys[0] != keys[1]
        # What a retry of the first request does: the stored result, nothing appended.
        first = next(r for r in rec.requests if isinstance(r, service_pb2.AppendEventsRequest))
        again = service_pb2_grpc.SessionServiceStub(grpc.insecure_channel(address)).AppendEvents(first)
        assert list(again.seqs) == [0] and again.replayed
        assert c.head(session_id) == 1
        # An explicit key is sent as given.
        batch = [ev.user_message("c")]
        assert c.append(session_id, batch, idempotency_key="k-1") == [2]
        assert c.append(session_id, batch, idempotency_key="k-1") == [2]
        assert c.head(session_id) == 2
        # The same key with other events is refused, and nothing is appended.
        with pytest.raises(PalimpsestError) as info:
            c.append(session_id, [ev.user_message("d")], idempotency_key="k-1")
        assert (info.value.code, info.value.reason) == ("FAILED_PRECONDITION", "IDEMPOTENCY_KEY_REUSED")
        assert c.head(session_id) == 2


def test_unavailable_is_retried_by_the_service_config(proxy, session_id: str) -> None:  # type: ignore[no-untyped-def]
    with Client(proxy.address, timeout=20, options=[("grpc.initial_reconnect_backoff_ms", 50),
                                                    ("grpc.min_reconnect_backoff_ms", 50),
                                                    ("grpc.max_reconnect_backoff_ms", 200)]) as c:
        proxy.refuse = 1  # the first connection is closed at once: the first attempt fails UNAVAILABLE
        c.create_session(session_id)
        assert proxy.accepted >= 2
        assert c.get_surface(session_id) == []
    # Without the retry policy the same failure reaches the caller.
    with Client(proxy.address, retries=False) as c:
        proxy.refuse = 1
        with pytest.raises(PalimpsestError) as info:
            c.get_surface(session_id)
        assert info.value.code == "UNAVAILABLE"


def test_a_token_is_never_sent_in_plaintext_off_loopback() -> None:
    with pytest.raises(ValueError, match="without TLS"):
        Client("10.1.2.3:50051", token="secret")
    Client("127.0.0.1:1", token="secret").close()  # loopback is fine


def next_delta(it, op: str) -> SurfaceDelta:  # type: ignore[no-untyped-def]
    while True:
        d = next(it)
        if d.op not in ("heartbeat", "caught_up", "checkpoint"):
            assert d.op == op, d
            return d


def test_subscribe_surface_resumes_after_dropped_connections(client: Client, proxy, session_id: str) -> None:  # type: ignore[no-untyped-def]
    client.create_session(session_id)
    client.append(session_id, [ev.user_message("before")])
    with Client(proxy.address) as sub:
        it = sub.subscribe_surface(session_id, include_messages=True)
        seen: List[SurfaceDelta] = []
        d = next(it)
        assert (d.op, d.seq, d.cursor) == ("append", 0, 0) and d.message is not None and d.message["content"][0]["text"] == "before"
        assert next(it).op == "caught_up"
        for round_ in range(3):
            seqs = client.append(session_id, [ev.user_message(f"r{round_}-{i}") for i in range(3)])
            for s in seqs:
                d = next_delta(it, "append")
                assert d.seq == s and d.cursor == s
                seen.append(d)
            assert proxy.drop() >= 1  # cut the connection; the next deltas come over a new one
        t = client.head(session_id)
        summary = ev.user_message("summary", source={"kind": "plugin", "plugin": "compact"}, replace=(0, 3), cites=[0, 1, 2, 3])
        client.append(session_id, [summary])
        d = next_delta(it, "replace")
        assert (d.seq, d.start, d.end, d.shadowed) == (t + 1, 0, 3, [0, 1, 2, 3])
        it.close()
    assert [d.seq for d in seen] == list(range(1, 10))
    assert proxy.accepted >= 4
    assert client.get_surface(session_id) == [t + 1] + list(range(4, 10))


def test_subscribe_surface_without_reconnect_raises(client: Client, proxy, session_id: str) -> None:  # type: ignore[no-untyped-def]
    client.create_session(session_id)
    with Client(proxy.address) as sub:
        it = sub.subscribe_surface(session_id, reconnect=False)
        assert next(it).op == "caught_up"
        proxy.drop()
        with pytest.raises(PalimpsestError) as info:
            next_delta(it, "append")
        assert info.value.code == "UNAVAILABLE"


def test_subscribe_surface_ends_when_the_session_is_deleted(client: Client, session_id: str) -> None:
    client.create_session(session_id)
    it = client.subscribe_surface(session_id, snapshot=True)
    d = next(it)
    assert (d.op, d.seqs, d.cursor) == ("snapshot", [], None)
    assert next(it).op == "caught_up"
    client.delete_session(session_id)
    with pytest.raises(PalimpsestError) as info:
        next_delta(it, "append")
    assert (info.value.code, info.value.reason) == ("NOT_FOUND", "SESSION_NOT_FOUND")
