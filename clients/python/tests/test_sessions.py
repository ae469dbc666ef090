"""The retry pattern (message ids derived from the idempotency key) and the session RPCs:
list_sessions (paged), fork, repair, export_session and import_session (streamed)."""
from __future__ import annotations

import pytest

from palimpsest import events as ev
from palimpsest.client import Client, PalimpsestError


def _turn(answer: str) -> list:  # type: ignore[type-arg]
    return [ev.turn_start(1), ev.user_message("What is here?"),
            ev.assistant_message(answer, turn=1, step=1, provider="p", model="m"),
            ev.user_message("explicit", id="mine"), ev.turn_end(1)]


def test_a_retry_rebuilds_its_batch_with_the_same_key(client: Client, session_id: str) -> None:
    client.create_session(session_id)
    key = f"retry-{session_id}"
    first = client.append(session_id, _turn("README.md"), expected_last_seq=-1, idempotency_key=key)
    again = client.append(session_id, _turn("README.md"), expected_last_seq=-1, idempotency_key=key)
    assert first == again == [0, 1, 2, 3, 4]
    assert client.head(session_id) == 4
    assert [m["id"] for m in client.messages(session_id)] == [ev.derived_id("u", key, 1), ev.derived_id("a", key, 2), "mine"]
    # The same derivation as the Go and TypeScript clients.
    assert ev.derived_id("u", "k", 0) == "u-7306c07d1e16ba09572c2397"
    # Another batch under the same key is still refused and leaves the log as it was.
    with pytest.raises(PalimpsestError) as e:
        client.append(session_id, _turn("src/"), idempotency_key=key)
    assert e.value.reason == "IDEMPOTENCY_KEY_REUSED"
    assert client.head(session_id) == 4


def test_repair_fork_and_list_sessions_paged(client: Client, session_id: str) -> None:
    labels = {"suite": session_id}
    client.create_session(session_id, labels)
    client.append(session_id, [ev.turn_start(1), ev.user_message("hi")])
    closers = client.repair(session_id)
    assert closers and closers[-1].type == "turn/end"
    assert client.repair(session_id) == []
    head = client.head(session_id)
    child = client.fork(session_id, child_session_id=f"{session_id}-child", labels=labels)
    assert (child.id, child.parent_session, child.seed_length) == (f"{session_id}-child", session_id, head + 1)
    client.create_session(f"{session_id}-third", labels)
    listed = sorted(s.id for s in client.list_sessions(labels, page_size=1))
    assert listed == [session_id, f"{session_id}-child", f"{session_id}-third"]


def test_export_then_import_streamed(client: Client, session_id: str) -> None:
    client.create_session(session_id)
    client.append(session_id, [ev.turn_start(1), ev.user_message("hi", id="u1"), ev.turn_end(1)])
    data = b"".join(client.export_session(session_id))
    assert data.count(b"\n") == 5  # the header, three events and the session metadata line
    copy = f"{session_id}-copy"
    res = client.import_session((data[i:i + 7] for i in range(0, len(data), 7)), copy)
    assert (res.session.id, res.session.head_seq, res.uncommitted_tail_bytes) == (copy, 2, 0)
    assert client.get_surface(copy) == client.get_surface(session_id)
    # A second import under the same id is refused and leaves the copy as it was.
    with pytest.raises(PalimpsestError) as e:
        client.import_session(data, copy)
    assert e.value.reason == "SESSION_ALREADY_EXISTS"
    assert client.head(copy) == 2
    # A file without a header is refused and leaves no session behind.
    with pytest.raises(PalimpsestError) as e:
        client.import_session("not json\n", f"{session_id}-bad")
    assert e.value.reason == "HEADER_INVALID"
    with pytest.raises(PalimpsestError) as e:
        client.get_session(f"{session_id}-bad")
    assert e.value.reason == "SESSION_NOT_FOUND"
    with pytest.raises(PalimpsestError) as e:
        list(client.export_session(f"{session_id}-bad"))
    assert e.value.reason == "SESSION_NOT_FOUND"
