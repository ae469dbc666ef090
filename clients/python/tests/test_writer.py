"""Client.append_stream against a real server: batches pipelined over one AppendStream land in
order with their seqs, a refused batch fails alone with the decoded PalimpsestError, close waits
for the outstanding answers, and a broken stream fails every outstanding batch."""
from __future__ import annotations

import threading
import uuid

import pytest

from palimpsest import events as ev
from palimpsest.client import Client, PalimpsestError


def test_pipelined_batches_land_in_order_and_a_refused_batch_fails_alone(client: Client, session_id: str) -> None:
    other = f"py-{uuid.uuid4()}"
    client.create_session(session_id)
    client.create_session(other)
    with client.append_stream() as w:
        batches = [w.append(session_id if i % 2 == 0 else other, [ev.user_message(f"q{i}"), ev.user_message(f"r{i}")])
                   for i in range(40)]
        # Written after the 20 batches of session_id (head 39), guarded on an empty log.
        refused = w.append(session_id, [ev.user_message("late")], expected_last_seq=-1)
        after = w.append(session_id, [ev.user_message("next")], expected_last_seq=39)
        tail = [w.append(other, [ev.user_message(f"t{i}")]) for i in range(10)]
    # Leaving the block closed the writer after every answer arrived.
    assert all(f.done() for f in batches + [refused, after] + tail)
    assert w.outstanding == 0
    for i, f in enumerate(batches):
        k = (i // 2) * 2
        assert f.result() == [k, k + 1]
    err = refused.exception()
    assert isinstance(err, PalimpsestError)
    assert (err.code, err.reason, err.metadata["expected"], err.metadata["actual"]) == ("FAILED_PRECONDITION", "HEAD_MISMATCH", "-1", "39")
    assert [(v.kind, v.type) for v in err.violations] == [("precondition", "HEAD_MISMATCH")]
    assert after.result() == [40]
    assert [f.result() for f in tail] == [[40 + i] for i in range(10)]
    assert client.head(session_id) == 40 and client.head(other) == 49
    with pytest.raises(PalimpsestError) as closed:
        w.append_sync(session_id, [ev.user_message("closed")])
    assert closed.value.code == "FAILED_PRECONDITION"
    assert client.head(session_id) == 40


def test_appends_from_threads_and_close_waits(client: Client, session_id: str) -> None:
    client.create_session(session_id)
    w = client.append_stream()
    futures = []
    lock = threading.Lock()

    def write(i: int) -> None:
        f = w.append(session_id, [ev.user_message(f"m{i}")])
        with lock:
            futures.append(f)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.close()
    assert w.outstanding == 0 and all(f.done() for f in futures)
    assert sorted(s for f in futures for s in f.result()) == list(range(16))
    assert client.head(session_id) == 15


def test_the_same_key_is_answered_from_the_stored_result(client: Client, session_id: str) -> None:
    client.create_session(session_id)
    with client.append_stream() as w:
        first = w.append_sync(session_id, [ev.user_message("once")], idempotency_key="py-stream-k")
        again = w.append_sync(session_id, [ev.user_message("once")], idempotency_key="py-stream-k")
    assert first == again == client.append(session_id, [ev.user_message("once")], idempotency_key="py-stream-k") == [0]
    assert client.head(session_id) == 0


def test_a_broken_stream_fails_every_outstanding_batch(client: Client, session_id: str) -> None:
    client.create_session(session_id)
    w = client.append_stream()
    futures = [w.append(session_id, [ev.user_message(f"m{i}")]) for i in range(20)]
    w.cancel()
    w.close()
    for f in futures:
        if f.exception() is not None:
            assert isinstance(f.exception(), PalimpsestError) and f.exception().code == "CANCELLED"
    landed = [f for f in futures if f.exception() is None]
    # Answered batches landed; a cancelled one may still have landed (its answer was lost).
    assert client.head(session_id) >= len(landed) - 1
    assert w.append(session_id, [ev.user_message("after")]).exception().code == "CANCELLED"


def test_a_cancelled_future_does_not_break_the_writer(client: Client, session_id: str) -> None:
    client.create_session(session_id)
    with client.append_stream() as w:
        futures = [w.append(session_id, [ev.user_message(f"c{i}")]) for i in range(50)]
        # The caller gives up on one in the middle (asyncio.wait_for on a wrapped future does this).
        cancelled = futures[25].cancel()
    # Every other batch is still answered (the cancelled one's answer is dropped, not an error
    # for the rest of the stream).
    assert all(f.result(timeout=10) == [i] for i, f in enumerate(futures) if i != 25)
    if not cancelled:
        assert futures[25].result(timeout=10) == [25]
    # The batch itself was still sent: the log holds all 50.
    assert client.head(session_id) == 49
    assert w.outstanding == 0
