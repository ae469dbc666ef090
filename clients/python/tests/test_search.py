"""search (SearchEvents, issue #40): hits across sessions with the snippet cut at the matches,
every filter, pages, and a malformed query's position. Each test searches for words of its own
(the server is shared with the other tests)."""
from __future__ import annotations

import uuid
from typing import List

import pytest

from palimpsest import events as ev
from palimpsest.client import Client, PalimpsestError
from palimpsest.search import SearchHit, snippet_parts


def _word() -> str:
    return "zq" + uuid.uuid4().hex[:10]


def _where(hits: List[SearchHit]) -> List[str]:
    return [f"{h.session_id}#{h.seq}" for h in hits]


@pytest.fixture
def corpus(client: Client, session_id: str) -> dict:  # type: ignore[type-arg]
    """Two sessions mentioning one word: a tool round (pruned result) and a user message."""
    w = _word()
    red, blue = f"{session_id}-red", f"{session_id}-blue"
    client.create_session(red, {"team": "red", "suite": w})
    client.append(red, [
        ev.user_message(f"Please ship {w} to production"),
        ev.assistant_message(f"Deploying {w}.", turn=1, step=1, provider="p", model="m", tool_calls=[("c1", "deploy", f'{{"ref":"{w}"}}')]),
        ev.tool_result("c1", f"deploy failed: {w} is locked", turn=1, step=1, id="r1", call_seq=1),
    ])
    client.create_session(blue, {"team": "blue", "suite": w})
    client.append(blue, [ev.user_message(f"🙂 where is {w} now?")])
    return {"w": w, "red": red, "blue": blue}


def test_hits_across_sessions_newest_first_with_marked_snippets(client: Client, corpus: dict) -> None:  # type: ignore[type-arg]
    w, red, blue = corpus["w"], corpus["red"], corpus["blue"]
    hits = list(client.search(w))
    assert _where(hits) == [f"{blue}#0", f"{red}#2", f"{red}#1", f"{red}#0"]
    assert [h.type for h in hits] == ["user/message", "tool/result", "assistant/message", "user/message"]
    assert hits[0].time > 0 and hits[0].time >= hits[-1].time
    # Code points: the emoji before the word does not shift the mark.
    assert snippet_parts(hits[0]) == [("🙂 where is ", False), (w, True), (" now?", False)]
    assert "".join(t for t, _ in snippet_parts(hits[1])) == hits[1].snippet
    assert _where(list(client.search(f'"ship {w}" -locked'))) == [f"{red}#0"]
    assert list(client.search(_word())) == []


def test_every_filter(client: Client, corpus: dict) -> None:  # type: ignore[type-arg]
    w, red, blue = corpus["w"], corpus["red"], corpus["blue"]
    assert _where(list(client.search(w, labels={"team": "blue"}))) == [f"{blue}#0"]
    assert _where(list(client.search(w, session_ids=[red]))) == [f"{red}#2", f"{red}#1", f"{red}#0"]
    assert _where(list(client.search(w, event_types=["tool/result"]))) == [f"{red}#2"]
    assert _where(list(client.search(w, tool_name="deploy"))) == [f"{red}#2", f"{red}#1"]
    t = list(client.search(w, session_ids=[blue]))[0].time
    assert _where(list(client.search(w, start_time=t + 1))) == []
    assert _where(list(client.search(w, session_ids=[blue], start_time=t, end_time=t + 1))) == [f"{blue}#0"]
    assert sorted(_where(list(client.search(w, session_ids=[red], order="score")))) == [f"{red}#0", f"{red}#1", f"{red}#2"]
    # A prune takes the result off the surface: left out by default, back with include_shadowed,
    # and the stub is what surface_only sees.
    client.append(red, [
        ev.event("compaction/prune", {"shadowedRange": {"start": 2, "end": 2}, "shadowedSeqs": [2], "shadowedTokenCount": 5}),
        ev.tool_result("c1", f"[pruned {w}]", turn=1, step=1, id="r1", replace=(2, 2), cites=[2]),
    ])
    assert _where(list(client.search(w, session_ids=[red]))) == [f"{red}#4", f"{red}#1", f"{red}#0"]
    assert _where(list(client.search(w, session_ids=[red], include_shadowed=True))) == [f"{red}#4", f"{red}#2", f"{red}#1", f"{red}#0"]
    assert _where(list(client.search(w, session_ids=[red], surface_only=True))) == [f"{red}#4", f"{red}#1", f"{red}#0"]
    with pytest.raises(ValueError, match="unknown order"):
        list(client.search(w, order="best"))


def test_pages(client: Client, corpus: dict) -> None:  # type: ignore[type-arg]
    w, red, blue = corpus["w"], corpus["red"], corpus["blue"]
    first, token = client.search_page(w, page_size=3)
    assert _where(first) == [f"{blue}#0", f"{red}#2", f"{red}#1"] and token
    second, last = client.search_page(w, token, page_size=3)
    assert _where(second) == [f"{red}#0"] and last == ""
    assert _where(list(client.search(w, page_size=1))) == _where(first + second)
    # Stopping early reads no further.
    it = client.search(w, page_size=1)
    assert [next(it).seq, next(it).seq] == [0, 2]


def test_a_malformed_query_names_its_position(client: Client) -> None:
    with pytest.raises(PalimpsestError) as e:
        list(client.search("deploy fo*o"))
    assert (e.value.code, e.value.reason, e.value.metadata.get("position")) == ("INVALID_ARGUMENT", "SEARCH_QUERY_INVALID", "9")
    assert "position 9" in str(e.value)
    with pytest.raises(PalimpsestError) as e:
        client.search_page("deploy", surface_only=True, include_shadowed=True)
    assert (e.value.code, e.value.reason) == ("INVALID_ARGUMENT", "SEARCH_REQUEST_INVALID")
