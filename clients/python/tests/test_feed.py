"""update_session (labels, conditional on the metadata version) and subscribe_sessions (the
session feed, resumed exactly once after dropped connections and after a reconnect)."""
from __future__ import annotations

from typing import Iterator, List

import pytest

from palimpsest import events as ev
from palimpsest.client import Client, PalimpsestError, SessionFeedItem


def next_change(it: Iterator[SessionFeedItem]) -> SessionFeedItem:
    """The next change of the feed (skips caught_up and heartbeats)."""
    while True:
        item = next(it)
        if item.kind not in ("caught_up", "heartbeat"):
            return item


def until_caught_up(it: Iterator[SessionFeedItem]) -> List[SessionFeedItem]:
    """The changes before the next caught_up."""
    out: List[SessionFeedItem] = []
    while True:
        item = next(it)
        if item.kind == "caught_up":
            return out
        if item.kind != "heartbeat":
            out.append(item)


def test_update_session_sets_and_removes_labels(client: Client, session_id: str) -> None:
    s = client.create_session(session_id, {"team": "a", "stage": "draft"})
    v0 = s.metadata_version
    s = client.update_session(session_id, {"stage": "review", "owner": "kim"}, ["team"])
    assert dict(s.labels) == {"stage": "review", "owner": "kim"}
    assert s.metadata_version > v0
    s = client.update_session(session_id, remove_labels=["owner"], expected_version=s.metadata_version)
    assert dict(s.labels) == {"stage": "review"}
    assert dict(client.get_session(session_id).labels) == {"stage": "review"}


def test_a_stale_update_is_refused_and_changes_nothing(client: Client, session_id: str) -> None:
    s = client.create_session(session_id, {"stage": "draft", "team": "a"})
    client.append(session_id, [ev.user_message("hi")])
    stale = s.metadata_version
    now = client.update_session(session_id, {"stage": "review"}, expected_version=stale)
    with pytest.raises(PalimpsestError) as info:
        client.update_session(session_id, {"stage": "done"}, ["team"], expected_version=stale)
    assert (info.value.code, info.value.reason) == ("ABORTED", "METADATA_VERSION_MISMATCH")
    after = client.get_session(session_id)
    assert dict(after.labels) == {"stage": "review", "team": "a"}
    assert after.metadata_version == now.metadata_version
    assert client.head(session_id) == 0 and [m["content"][0]["text"] for m in client.messages(session_id)] == ["hi"]


def test_update_session_refuses_a_key_both_set_and_removed(client: Client, session_id: str) -> None:
    client.create_session(session_id, {"stage": "draft"})
    with pytest.raises(PalimpsestError) as info:
        client.update_session(session_id, {"stage": "x"}, ["stage"])
    assert info.value.code == "INVALID_ARGUMENT"
    assert dict(client.get_session(session_id).labels) == {"stage": "draft"}
    with pytest.raises(PalimpsestError) as info:
        client.update_session(f"{session_id}-missing", {"a": "b"})
    assert (info.value.code, info.value.reason) == ("NOT_FOUND", "SESSION_NOT_FOUND")


def test_the_feed_reports_every_kind_of_change(client: Client, session_id: str) -> None:
    suite = {"suite": session_id}
    it = client.subscribe_sessions(from_now=True, selector=suite)
    assert next(it).kind == "caught_up"
    client.create_session(session_id, suite)
    client.create_session(f"{session_id}-other")  # not selected: never on this feed
    client.append(session_id, [ev.turn_start(1), ev.user_message("hi"), ev.user_message("again")])
    client.update_session(session_id, {"stage": "review"})
    client.delete_session(session_id)
    created, appended, changed, deleted = (next_change(it) for _ in range(4))
    it.close()
    assert (created.kind, created.session_id, created.head_seq, created.labels) == ("created", session_id, None, suite)
    assert (appended.kind, appended.head_seq, appended.event_count) == ("appended", 2, 3)
    assert appended.event_types == ["turn/start", "user/message"] and appended.surface_length == 2
    assert (changed.kind, changed.previous_labels, changed.labels) == ("labels_changed", suite, {**suite, "stage": "review"})
    assert (deleted.kind, deleted.session_id) == ("deleted", session_id)
    positions = [created.position, appended.position, changed.position, deleted.position]
    assert positions == sorted(set(positions))
    assert created.created_at > 0 and deleted.time >= created.time


def test_the_feed_resumes_exactly_once_after_dropped_connections(client: Client, proxy, session_id: str) -> None:  # type: ignore[no-untyped-def]
    suite = {"suite": session_id}
    start = next(client.subscribe_sessions(from_now=True, selector=suite))
    assert start.kind == "caught_up"
    seen: List[SessionFeedItem] = []
    with Client(proxy.address) as sub:
        it = sub.subscribe_sessions(after=start.position, selector=suite)
        assert until_caught_up(it) == []
        for round_ in range(3):
            sid = f"{session_id}-{round_}"
            client.create_session(sid, suite)
            client.append(sid, [ev.user_message(f"r{round_}")])
            seen += [next_change(it), next_change(it)]
            assert proxy.drop() >= 1  # cut the connection; the next changes come over a new one
            client.append(sid, [ev.user_message(f"r{round_} again")])
            seen.append(next_change(it))
        it.close()
    assert proxy.accepted >= 4
    assert [(i.kind, i.session_id, i.head_seq) for i in seen] == [
        (k, f"{session_id}-{r}", h) for r in range(3) for k, h in (("created", None), ("appended", 0), ("appended", 1))]
    # The same range read again in one piece: the same items, each once, in the same order.
    again = until_caught_up(client.subscribe_sessions(after=start.position, selector=suite))
    assert [(i.position, i.kind, i.session_id, i.head_seq) for i in again] == [(i.position, i.kind, i.session_id, i.head_seq) for i in seen]


def test_the_feed_resumes_across_a_server_restart(server_process, session_id: str) -> None:  # type: ignore[no-untyped-def]
    fast = [("grpc.initial_reconnect_backoff_ms", 50), ("grpc.max_reconnect_backoff_ms", 250)]
    with Client(server_process.address, options=fast) as c:
        it = c.subscribe_sessions(max_backoff=0.25)
        assert next(it).kind == "caught_up"
        c.create_session(session_id)
        c.append(session_id, [ev.user_message("before")])
        seen = [next_change(it), next_change(it)]
        # SIGTERM: the stream ends with UNAVAILABLE / SERVER_SHUTDOWN; then the same port and database.
        server_process.restart()
        c.append(session_id, [ev.user_message("after")])
        c.delete_session(session_id)
        seen += [next_change(it), next_change(it)]
        it.close()
        assert [(i.kind, i.head_seq) for i in seen] == [("created", None), ("appended", 0), ("appended", 1), ("deleted", 1)]
        # Positions survive the restart: the whole feed read again is the same items, each once.
        again = until_caught_up(c.subscribe_sessions())
        assert [(i.position, i.kind, i.head_seq) for i in again] == [(i.position, i.kind, i.head_seq) for i in seen]


def test_a_new_subscription_after_the_last_position_continues_exactly(client: Client, session_id: str) -> None:
    suite = {"suite": session_id}
    it = client.subscribe_sessions(from_now=True, selector=suite)
    assert next(it).kind == "caught_up"
    client.create_session(session_id, suite)
    first = next_change(it)
    it.close()  # cancelled: nothing is read while no one subscribes
    client.append(session_id, [ev.user_message("while away")])
    client.update_session(session_id, {"stage": "review"})
    resumed = client.subscribe_sessions(after=first.position, selector=suite)
    missed = until_caught_up(resumed)
    assert [(i.kind, i.head_seq) for i in missed] == [("appended", 0), ("labels_changed", 0)]
    assert all(i.position > first.position for i in missed)
    client.delete_session(session_id)
    assert next_change(resumed).kind == "deleted"
    resumed.close()


def test_the_feed_without_reconnect_raises(client: Client, proxy, session_id: str) -> None:  # type: ignore[no-untyped-def]
    with Client(proxy.address) as sub:
        it = sub.subscribe_sessions(from_now=True, selector={"suite": session_id}, reconnect=False)
        assert next(it).kind == "caught_up"
        proxy.drop()
        with pytest.raises(PalimpsestError) as info:
            next_change(it)
        assert info.value.code == "UNAVAILABLE"


def test_a_batch_is_yielded_one_change_at_a_time_and_resumes_after_any_of_them(client: Client, session_id: str) -> None:
    from palimpsest.v1 import service_pb2

    suite = {"suite": session_id}
    start = next(client.subscribe_sessions(from_now=True, selector=suite))
    for i in range(4):
        client.create_session(f"{session_id}-{i}", suite)

    def raw(batch: bool) -> List[service_pb2.SubscribeSessionsResponse]:
        call = client.stub.SubscribeSessions(service_pb2.SubscribeSessionsRequest(
            after=start.position, label_selector=suite, batch=batch), metadata=client._metadata)
        out: List[service_pb2.SubscribeSessionsResponse] = []
        for res in call:
            out.append(res)
            if res.WhichOneof("kind") == "caught_up":
                break
        call.cancel()
        return out

    # With batch, the four changes read together come in one `changes` message, each with its position.
    batched = raw(True)
    assert [m.WhichOneof("kind") for m in batched] == ["changes", "caught_up"]
    in_batch = list(batched[0].changes.changes)
    assert [c.session_id for c in in_batch] == [f"{session_id}-{i}" for i in range(4)]
    assert batched[0].position == in_batch[-1].position
    # Without it (an older client), one change per message.
    assert [m.WhichOneof("kind") for m in raw(False)] == ["change"] * 4 + ["caught_up"]

    items = until_caught_up(client.subscribe_sessions(after=start.position, selector=suite))
    assert [(i.session_id, i.position) for i in items] == [(c.session_id, c.position) for c in in_batch]
    for k in range(len(items)):
        rest = until_caught_up(client.subscribe_sessions(after=items[k].position, selector=suite))
        assert [i.position for i in rest] == [i.position for i in items[k + 1:]]
