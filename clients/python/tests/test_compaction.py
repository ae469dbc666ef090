"""Compaction, pruning, time travel and the tool-pairing guard through palimpsest.client, against a
real server: each refusal is decoded (reason, metadata) and leaves the log untouched, with the
success case next to it."""
from __future__ import annotations

from typing import Any, Dict, List

import pytest

from palimpsest import events as ev
from palimpsest.client import Client, PalimpsestError

from test_client import one_turn

LONG = "line of build output\n" * 400  # 8400 characters


def long_result_turn(c: Client, sid: str, n: int) -> Dict[str, int]:
    """A turn whose tool result is long enough to be worth pruning."""
    head = c.head(sid)
    batch = [ev.turn_start(n), ev.step_start(n, 1), ev.user_message("Build it.", id=f"u{n}"),
             ev.assistant_message(turn=n, step=1, provider="p", model="m", id=f"a{n}", tool_calls=[(f"c{n}", "make", "{}")]),
             ev.tool_call(f"c{n}", "make", "{}", turn=n, step=1)]
    call = head + len(batch)
    batch += [ev.tool_result(f"c{n}", LONG, turn=n, step=1, id=f"r{n}", call_seq=call), ev.step_end(n, 1), ev.turn_end(n)]
    seqs = c.append(sid, batch, expected_last_seq=head)
    return {"user": seqs[2], "assistant": seqs[3], "call": call, "result": call + 1, "head": seqs[-1]}


def text_of(message: Dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in message["content"])


def test_plan_then_compact_shows_the_summary_and_as_of_seq_shows_before(client: Client, session_id: str) -> None:
    client.create_session(session_id)
    # Turns with long results: a summary must be smaller than the range it replaces.
    t1 = long_result_turn(client, session_id, 1)
    t2 = long_result_turn(client, session_id, 2)
    surface_before = client.get_surface(session_id)
    messages_before = client.messages(session_id)
    plan = client.plan_compaction(session_id, up_to_seq=t1["result"])
    assert (plan.start, plan.end, list(plan.shadowed_seqs)) == (t1["user"], t1["result"], [t1["user"], t1["assistant"], t1["result"]])
    assert plan.expected_last_seq == t2["head"] and not plan.blockers and len(plan.messages) == 3

    seen: List[List[Dict[str, Any]]] = []

    def summarise(msgs: List[Dict[str, Any]]) -> str:
        seen.append(msgs)
        return f"The user asked what is here; ls showed {len(msgs)} messages worth of README.md and src/."

    res = client.compact(session_id, summarise, plan=plan, provider="p", model="summariser")
    assert res is not None and len(res.seqs) == 4 and res.compaction_id
    assert [m["id"] for m in seen[0]] == ["u1", "a1", "r1"]
    after = client.messages(session_id)
    assert after[0]["source"] == {"kind": "plugin", "plugin": "compact", "compactionId": res.compaction_id}
    assert "<compacted-summary>" in text_of(after[0]) and "ls showed 3 messages" in text_of(after[0])
    assert after[1:] == messages_before[3:]
    assert client.get_surface(session_id) == [res.seqs[2]] + surface_before[3:]
    # Time travel: right after turn 2, before the compaction, the old surface and history.
    assert client.get_surface(session_id, as_of_seq=t2["head"]) == surface_before
    assert client.messages(session_id, as_of_seq=t2["head"]) == messages_before
    assert client.messages(session_id, as_of_seq=res.seqs[-1]) == after
    with pytest.raises(PalimpsestError) as info:
        client.messages(session_id, as_of_seq=res.seqs[-1] + 1)
    assert (info.value.code, info.value.reason) == ("OUT_OF_RANGE", "AS_OF_SEQ_AFTER_HEAD")
    assert info.value.metadata["headSeq"] == str(res.seqs[-1])


def test_compact_with_a_stale_plan_is_refused_and_leaves_the_log_untouched(client: Client, session_id: str) -> None:
    client.create_session(session_id)
    t1 = long_result_turn(client, session_id, 1)
    plan = client.plan_compaction(session_id, up_to_seq=t1["result"])
    long_result_turn(client, session_id, 2)  # another writer moves the head
    head, surface = client.head(session_id), client.get_surface(session_id)
    with pytest.raises(PalimpsestError) as info:
        client.compact(session_id, "summary", plan=plan, provider="p", model="m")
    assert (info.value.code, info.value.reason) == ("FAILED_PRECONDITION", "HEAD_MISMATCH")
    assert client.head(session_id) == head and client.get_surface(session_id) == surface
    # Planning again (the budget form: plan + compact in one call) succeeds.
    res = client.compact(session_id, [{"type": "text", "text": "two turns of ls"}], keep_tokens=1, provider="p", model="m")
    assert res is not None and res.seqs[0] == head + 1
    assert "two turns of ls" in text_of(client.messages(session_id)[0])


def test_retain_tokens_and_a_summary_not_smaller_than_the_range(client: Client, session_id: str) -> None:
    client.create_session(session_id)
    t1 = one_turn(client, session_id, 1)
    t2 = one_turn(client, session_id, 2)
    # The reference's budget: the shortest tail of at least 1 token is t2's result; its call stays
    # with it, so the range ends before t2's assistant message.
    plan = client.plan_compaction(session_id, retain_tokens=1)
    assert list(plan.shadowed_seqs) == [t1["user"], t1["assistant"], t1["result"], t2["user"]]
    with pytest.raises(ValueError):
        client.plan_compaction(session_id, 5, retain_tokens=1)
    surface = client.get_surface(session_id)
    res = client.compact(session_id, "x" * 4000, plan=plan, provider="p", model="m", source_command_id="cmd-1")
    assert res is not None and res.HasField("error") and res.error.startswith("summary is not smaller than the shadowed content")
    assert len(res.seqs) == 2 and client.get_surface(session_id) == surface
    written = list(client.events(session_id, after=res.seqs[0] - 1))
    assert [e.type for e in written] == ["compaction/start", "compaction/end"]


def test_session_token_counts(client: Client, session_id: str) -> None:
    client.create_session(session_id)
    one_turn(client, session_id, 1)
    s = client.get_session(session_id)
    assert s.surface_tokens > 0
    assert (s.usage.input_tokens, s.usage.output_tokens, s.usage.cache_read_tokens) == (10, 3, 0)
    assert sum(m.tokens for _, m in client.derived_messages(session_id)) == s.surface_tokens


def test_compact_with_nothing_to_compact_returns_none(client: Client, session_id: str) -> None:
    client.create_session(session_id)
    client.append(session_id, [ev.user_message("only one")])
    assert client.compact(session_id, "unused", keep_tokens=1_000_000, provider="p", model="m") is None
    assert client.head(session_id) == 0


def test_prune_tool_results_by_seq_and_by_policy(client: Client, session_id: str) -> None:
    client.create_session(session_id)
    t1 = long_result_turn(client, session_id, 1)
    t2 = long_result_turn(client, session_id, 2)
    res = client.prune_tool_results(session_id, [t1["result"]], head_chars=20, tail_chars=20, expected_last_seq=t2["head"])
    assert [(p.original_seq, p.call_id) for p in res.pruned] == [(t1["result"], "c1")]
    p = res.pruned[0]
    assert p.bytes_before == len(LONG) and p.bytes_after < 200 and res.bytes_saved == p.bytes_before - p.bytes_after
    msgs = client.messages(session_id)
    inner = msgs[2]["content"][0]["content"][0]["text"]
    assert msgs[2]["id"] == "r1" and inner == LONG[:20] + "\n\n[... tool result middle pruned ...]\n\n" + LONG[-20:]
    # Policy: results over 1000 bytes except the most recent one (turn 2's is left alone).
    assert not client.prune_tool_results(session_id, min_bytes=1000, keep_recent=1).pruned
    res2 = client.prune_tool_results(session_id, min_chars=1000, head_chars=100, tail_chars=100, marker="with-count",
                                      min_saving_chars=100)
    assert [x.original_seq for x in res2.pruned] == [t2["result"]]
    assert "pruned: " in client.messages(session_id)[-1]["content"][0]["content"][0]["text"]


def test_prune_of_a_seq_that_is_no_tool_result_is_refused_and_leaves_the_log_untouched(client: Client, session_id: str) -> None:
    client.create_session(session_id)
    t1 = long_result_turn(client, session_id, 1)
    with pytest.raises(PalimpsestError) as info:
        client.prune_tool_results(session_id, [t1["user"]])
    assert (info.value.code, info.value.reason) == ("FAILED_PRECONDITION", "PRUNE_TARGET_INVALID")
    assert info.value.metadata["seq"] == str(t1["user"])
    assert client.head(session_id) == t1["head"]
    with pytest.raises(PalimpsestError) as stale:
        client.prune_tool_results(session_id, [t1["result"]], expected_last_seq=t1["head"] - 1)
    assert stale.value.reason == "HEAD_MISMATCH" and client.head(session_id) == t1["head"]


def test_tool_pairing_broken_is_decoded_with_its_metadata_and_leaves_the_log_untouched(client: Client, session_id: str) -> None:
    client.create_session(session_id)  # the guard is on by default
    t = one_turn(client, session_id, 1)
    surface = client.get_surface(session_id)
    # Shadowing the tool result while its call (in the assistant message) stays breaks the pair.
    bad = ev.user_message("the result is gone", id="x1", replace=(t["result"], t["result"]), cites=[t["result"]])
    with pytest.raises(PalimpsestError) as info:
        client.append(session_id, [bad])
    e = info.value
    assert (e.code, e.reason) == ("FAILED_PRECONDITION", "TOOL_PAIRING_BROKEN")
    assert e.metadata["callId"] == "c1" and e.metadata["resultSeq"] == str(t["result"])
    assert e.metadata["callSeq"] == str(t["assistant"])
    assert client.head(session_id) == t["head"] and client.get_surface(session_id) == surface
    # The same append to a session created with pairing_guard=False is accepted.
    other = session_id + "-unguarded"
    s = client.create_session(other, pairing_guard=False)
    assert s.pairing_guard is False
    t2 = one_turn(client, other, 1)
    assert client.append(other, [bad]) == [t2["head"] + 1]
    assert client.create_session(session_id + "-guarded").pairing_guard is True
