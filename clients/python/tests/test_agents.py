"""palimpsest.agents.PalimpsestSession against the OpenAI Agents SDK's documented Session
behaviour, driven by a stand-in runner that uses a session the way ``Runner.run`` does: read the
history, send history + new input to the model, store the new input and the model's output items."""
from __future__ import annotations

import asyncio
from typing import Any, Dict, List

import pytest

from palimpsest.agents import CLEAR, ITEMS, POP, PalimpsestSession
from palimpsest.client import Client, PalimpsestError, event_json

Item = Dict[str, Any]


class EchoModel:
    """Answers every user message with a function call, then its output, then a text message."""

    def __init__(self) -> None:
        self.inputs: List[List[Item]] = []

    def respond(self, items: List[Item]) -> List[Item]:
        self.inputs.append(list(items))
        n = len(self.inputs)
        last = items[-1]["content"]
        return [
            {"type": "function_call", "call_id": f"call_{n}", "name": "lookup", "arguments": '{"q":"%s"}' % last},
            {"type": "function_call_output", "call_id": f"call_{n}", "output": f"found {last}"},
            {"type": "message", "role": "assistant", "id": f"msg_{n}", "status": "completed",
             "content": [{"type": "output_text", "text": f"echo: {last}", "annotations": []}]},
        ]


async def run_turn(session: PalimpsestSession, model: EchoModel, user_input: str) -> List[Item]:
    """What Runner.run(agent, user_input, session=session) does with the session."""
    history = await session.get_items()
    new_input = [{"role": "user", "content": user_input}]
    output = model.respond(history + new_input)
    await session.add_items(new_input + output)
    return output


def test_a_runner_sees_the_whole_history_on_every_turn(client: Client, session_id: str) -> None:
    session = PalimpsestSession(session_id, client)
    model = EchoModel()

    async def main() -> None:
        await run_turn(session, model, "first")
        await run_turn(session, model, "second")

    asyncio.run(main())
    assert [len(i) for i in model.inputs] == [1, 5]
    assert model.inputs[1][0] == {"role": "user", "content": "first"}
    assert model.inputs[1][3]["content"][0]["text"] == "echo: first"
    items = asyncio.run(session.get_items())
    assert len(items) == 8 and items[4] == {"role": "user", "content": "second"}
    # The items are in the log verbatim, one atomic batch per add_items call.
    logged = [e for e in client.events(session_id, types=[ITEMS, POP, CLEAR])]
    assert [e.type for e in logged] == [ITEMS, ITEMS]
    assert event_json(logged[0])["items"] == items[:4]
    assert dict(client.get_session(session_id).labels) == {"client": "openai-agents"}


def test_get_items_with_a_limit_returns_the_latest_in_order(client: Client, session_id: str) -> None:
    session = PalimpsestSession(session_id, client)

    async def main() -> None:
        assert await session.get_items() == []
        await session.add_items([{"role": "user", "content": str(i)} for i in range(5)])
        assert [i["content"] for i in await session.get_items(limit=2)] == ["3", "4"]
        assert [i["content"] for i in await session.get_items(limit=10)] == ["0", "1", "2", "3", "4"]
        assert await session.get_items(limit=0) == []

    asyncio.run(main())


def test_session_settings_limit_is_the_default_limit(client: Client, session_id: str) -> None:
    class Settings:
        limit = 2

    session = PalimpsestSession(session_id, client, session_settings=Settings())

    async def main() -> None:
        await session.add_items([{"role": "user", "content": str(i)} for i in range(4)])
        assert [i["content"] for i in await session.get_items()] == ["2", "3"]
        assert [i["content"] for i in await session.get_items(limit=3)] == ["1", "2", "3"]

    asyncio.run(main())
    assert PalimpsestSession("x", client).session_settings is None


def test_pop_item_removes_the_most_recent_item(client: Client, session_id: str) -> None:
    session = PalimpsestSession(session_id, client)

    async def main() -> None:
        assert await session.pop_item() is None  # nothing to pop: nothing written
        assert client.head(session_id) == -1
        await session.add_items([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
        assert await session.pop_item() == {"role": "user", "content": "b"}
        assert await session.get_items() == [{"role": "user", "content": "a"}]
        # The SDK's "correct the last answer" pattern: pop, then add the corrected item.
        await session.add_items([{"role": "user", "content": "c"}])
        assert [i["content"] for i in await session.get_items()] == ["a", "c"]
        assert await session.pop_item() == {"role": "user", "content": "c"}
        assert await session.pop_item() == {"role": "user", "content": "a"}
        assert await session.pop_item() is None

    asyncio.run(main())
    types = [e.type for e in client.events(session_id, types=[ITEMS, POP, CLEAR])]
    assert types == [ITEMS, POP, ITEMS, POP, POP]  # the popped items stay in the log


def test_concurrent_pops_never_remove_the_same_item(client: Client, session_id: str) -> None:
    session = PalimpsestSession(session_id, client)
    other = PalimpsestSession(session_id, Client(client.address))

    async def main() -> List[Any]:
        await session.add_items([{"role": "user", "content": str(i)} for i in range(6)])
        return await asyncio.gather(*(s.pop_item() for s in [session, other, session, other]))

    popped = asyncio.run(main())
    assert sorted(p["content"] for p in popped) == ["2", "3", "4", "5"]
    assert [i["content"] for i in asyncio.run(session.get_items())] == ["0", "1"]


def test_clear_session_removes_every_item_and_later_adds_start_fresh(client: Client, session_id: str) -> None:
    session = PalimpsestSession(session_id, client)
    model = EchoModel()

    async def main() -> None:
        await run_turn(session, model, "before")
        await session.clear_session()
        assert await session.get_items() == []
        await run_turn(session, model, "after")

    asyncio.run(main())
    assert model.inputs[1] == [{"role": "user", "content": "after"}]
    assert [e.type for e in client.events(session_id, types=[ITEMS, POP, CLEAR])] == [ITEMS, CLEAR, ITEMS]


def test_an_item_that_is_not_json_is_refused_before_anything_is_written(client: Client, session_id: str) -> None:
    session = PalimpsestSession(session_id, client)
    with pytest.raises(TypeError):
        asyncio.run(session.add_items([{"role": "user", "content": object()}]))
    assert client.head(session_id) == -1
    asyncio.run(session.add_items([{"role": "user", "content": "fine"}]))
    assert client.head(session_id) == 1  # the user/message on the surface, then the item record


def test_errors_other_than_an_existing_session_surface(address: str) -> None:
    with Client(address) as c:
        session = PalimpsestSession("bad id with spaces", c)
        with pytest.raises(PalimpsestError) as info:
            asyncio.run(session.get_items())
        assert info.value.code == "INVALID_ARGUMENT"


def test_the_items_have_a_model_history_and_render_back_as_responses_items(client: Client, session_id: str) -> None:
    session = PalimpsestSession(session_id, client)
    model = EchoModel()

    async def main() -> None:
        await run_turn(session, model, "first")
        await session.add_items([{"type": "reasoning", "id": "rs_1", "summary": []}])  # no surface meaning
        await run_turn(session, model, "second")

    asyncio.run(main())
    history = client.messages(session_id)
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert history[1]["content"] == [{"type": "tool-call", "id": "call_1", "name": "lookup", "arguments": '{"q":"first"}'}]
    items = client.messages(session_id, format="openai-responses")
    assert items[0] == {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "first"}]}
    assert items[1] == {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": '{"q":"first"}'}
    assert items[2] == {"type": "function_call_output", "call_id": "call_1", "output": "found first"}
    assert items[3] == {"type": "message", "role": "assistant", "content": "echo: first"}
    assert len(items) == 8
    # The rendered seqs point at the surface events.
    seqs = [s for s, _ in client.rendered_messages(session_id, "anthropic")]
    assert all(len(s) >= 1 for s in seqs)


def test_get_items_reads_only_new_events(client: Client, session_id: str) -> None:
    session = PalimpsestSession(session_id, client)
    asyncio.run(session.add_items([{"role": "user", "content": "a"}]))
    assert asyncio.run(session.get_items()) == [{"role": "user", "content": "a"}]
    calls: List[Any] = []
    original = client.events

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs.get("after"))
        return original(*args, **kwargs)

    client.events = spy  # type: ignore[method-assign]
    try:
        asyncio.run(session.add_items([{"role": "user", "content": "b"}]))
        assert asyncio.run(session.get_items()) == [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
        assert asyncio.run(session.get_items(limit=1)) == [{"role": "user", "content": "b"}]
    finally:
        client.events = original  # type: ignore[method-assign]
    # The second read started after the seq the first one saw; the third read nothing.
    assert len(calls) == 1 and calls[0] is not None and calls[0] >= 1


def test_messages_in_a_provider_format_and_import_messages(client: Client, session_id: str) -> None:
    client.create_session(session_id)
    seqs = client.import_messages(session_id, "anthropic", [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"p": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "ok"}]}]},
    ])
    assert seqs == [0, 1, 2, 3]
    gemini = client.messages(session_id, format="gemini")
    assert gemini[1] == {"role": "model", "parts": [{"functionCall": {"id": "toolu_1", "name": "read", "args": {"p": 1}}}]}
    assert gemini[2] == {"role": "user", "parts": [{"functionResponse": {"id": "toolu_1", "name": "read", "response": {"output": "ok"}}}]}
    # Each rendered message carries its estimated tokens; one provider message per DSH message
    # here, so they add up to the session's surface_tokens. Still (seqs, message) pairs.
    rendered = client.rendered_messages(session_id, "anthropic")
    assert all(m.tokens > 4 for m in rendered)
    assert sum(m.tokens for m in rendered) == client.get_session(session_id).surface_tokens
    assert [msg for _, msg in rendered] == client.messages(session_id, format="anthropic")
    with pytest.raises(ValueError):
        client.messages(session_id, format="cohere")
    with pytest.raises(PalimpsestError) as e:
        client.import_messages(session_id, "openai-chat", [{"role": "tool", "tool_call_id": "ghost", "content": "x"}])
    assert e.value.reason == "IMPORT_MESSAGES_INVALID"
