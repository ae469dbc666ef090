"""An OpenAI Agents SDK ``Session`` backed by a Palimpsest session.

The SDK's session protocol (``agents.memory.Session``) is a mutable list of Responses API input
items: ``get_items(limit=None)``, ``add_items(items)``, ``pop_item()``, ``clear_session()``, all
async, plus a ``session_id`` attribute. A Palimpsest log is append-only, so the list is kept as
a fold over three log-only event types, read back with one filtered ListEvents:

- ``openai-agents/items {"items": [...]}``: items appended, verbatim (one atomic batch per call);
- ``openai-agents/pop {"item": {...}}``: the most recent item removed (the item is recorded, so
  the log shows what was popped);
- ``openai-agents/clear {}``: every item before it removed.

Nothing is ever deleted: the whole history, pops and clears included, stays in the log and its
export.

The items with a model-history meaning are also written as surface events (issue #34), with
ImportMessages in the Responses format (the same mapping as ``palimpsest import --from
openai-responses``): user and assistant messages become user/message and assistant/message,
``function_call`` a tool/call (the call inside the assistant message), ``function_call_output`` a
tool/result citing it. So an Agents SDK session has a model history: ``messages``, compaction,
pruning and the viewer work on it, and ``messages(format="openai-responses")`` gives the items
back in the Responses shape. Items without a surface meaning (reasoning, hosted tool calls,
system and developer messages) stay in the log-only record only. The surface events are written
first: an item list the server refuses (e.g. a message after a call without its output, with the
tool-pairing guard on) is not recorded at all. ``pop_item`` and ``clear_session`` change the item
list only (the model history keeps what was said; compact or prune it to change it).

``get_items`` reads incrementally: the fold is kept with the last seq it saw, and each call reads
only the events after it. ``pop_item`` is guarded by ``expected_last_seq`` so two concurrent pops never remove the
same item (a HEAD_MISMATCH is retried on fresh state). The SDK itself is not required: the class
implements the protocol structurally (the SDK's ``Session`` is a ``typing.Protocol``).
"""
from __future__ import annotations

import asyncio
import json
import threading
from typing import Any, Dict, List, Optional

from palimpsest import events as ev
from palimpsest.client import Client, PalimpsestError, event_json

ITEMS = "openai-agents/items"
POP = "openai-agents/pop"
CLEAR = "openai-agents/clear"
TYPES = (ITEMS, POP, CLEAR)

TResponseInputItem = Dict[str, Any]


def surface_item(item: Any) -> bool:
    """Whether a Responses input item has a model-history meaning (written as surface events):
    a user or assistant message, a ``function_call`` or a ``function_call_output``."""
    if not isinstance(item, dict):
        return False
    kind = item.get("type", "message")
    if kind == "message":
        return item.get("role") in ("user", "assistant")
    return kind in ("function_call", "function_call_output")


class PalimpsestSession:
    """``Session`` for ``Runner.run(agent, input, session=PalimpsestSession("chat-1", client))``.

    The Palimpsest session is created on first use when it does not exist (``labels`` are attached
    then)."""

    def __init__(self, session_id: str, client: Client, labels: Optional[Dict[str, str]] = None,
                 max_pop_attempts: int = 5, session_settings: Any = None):
        self.session_id = session_id
        # The protocol's SessionSettings (or anything with a ``limit``): the default limit of get_items.
        self.session_settings = session_settings
        self.client = client
        self.labels = dict(labels or {"client": "openai-agents"})
        self.max_pop_attempts = max_pop_attempts
        self._created = False
        # The fold so far and the last seq it reflects (get_items reads only what came after).
        self._items: List[TResponseInputItem] = []
        self._seen = -1
        # The SDK may call the async methods concurrently (each runs in a worker thread).
        self._lock = threading.Lock()

    # ------------------------------------------------------------ sync core (run in a worker thread)

    def _ensure(self) -> None:
        if self._created:
            return
        try:
            self.client.create_session(self.session_id, self.labels)
        except PalimpsestError as e:
            if e.reason != "SESSION_ALREADY_EXISTS":
                raise
        self._created = True

    def _fold(self) -> "tuple[List[TResponseInputItem], int]":
        """The current items and the head seq they reflect (-1 for an empty log), read from the
        events after the last seq seen."""
        self._ensure()
        with self._lock:
            return self._fold_locked()

    def _fold_locked(self) -> "tuple[List[TResponseInputItem], int]":
        head = self.client.head(self.session_id)
        if head > self._seen:
            after = self._seen if self._seen >= 0 else None
            for e in self.client.events(self.session_id, after=after, types=TYPES):
                if e.seq > head:  # appended after the head was read: the next fold sees it
                    break
                data = event_json(e)
                if e.type == ITEMS:
                    self._items.extend(data["items"])
                elif e.type == POP and self._items:
                    self._items.pop()
                elif e.type == CLEAR:
                    self._items.clear()
            self._seen = head
        return list(self._items), head

    def get_items_sync(self, limit: Optional[int] = None) -> List[TResponseInputItem]:
        if limit is None:
            limit = getattr(self.session_settings, "limit", None)
        items, _ = self._fold()
        if limit is None:
            return items
        return items[-limit:] if limit > 0 else []

    def add_items_sync(self, items: List[TResponseInputItem]) -> None:
        if not items:
            return
        self._ensure()
        # Round-trip through JSON here, so an item that is not JSON fails before anything is sent.
        plain = json.loads(json.dumps(list(items)))
        surface = [i for i in plain if surface_item(i)]
        if surface:
            self.client.import_messages(self.session_id, "openai-responses", surface, provider="openai", model="openai-agents")
        self.client.append(self.session_id, [ev.event(ITEMS, {"items": plain})])

    def pop_item_sync(self) -> Optional[TResponseInputItem]:
        for attempt in range(self.max_pop_attempts):
            items, head = self._fold()
            if not items:
                return None
            try:
                self.client.append(self.session_id, [ev.event(POP, {"item": items[-1]})], expected_last_seq=head)
                return items[-1]
            except PalimpsestError as e:
                if e.reason != "HEAD_MISMATCH" or attempt == self.max_pop_attempts - 1:
                    raise
        return None  # pragma: no cover - the loop returns or raises

    def clear_session_sync(self) -> None:
        self._ensure()
        self.client.append(self.session_id, [ev.event(CLEAR, {})])

    # ------------------------------------------------------------ the SDK's async protocol

    async def get_items(self, limit: Optional[int] = None) -> List[TResponseInputItem]:
        """The items in chronological order; with ``limit`` (default ``session_settings.limit``),
        the latest ``limit`` of them."""
        return await asyncio.to_thread(self.get_items_sync, limit)

    async def add_items(self, items: List[TResponseInputItem]) -> None:
        """Appends items (one atomic batch)."""
        await asyncio.to_thread(self.add_items_sync, items)

    async def pop_item(self) -> Optional[TResponseInputItem]:
        """Removes and returns the most recent item (None when there is none)."""
        return await asyncio.to_thread(self.pop_item_sync)

    async def clear_session(self) -> None:
        """Removes every item."""
        await asyncio.to_thread(self.clear_session_sync)
