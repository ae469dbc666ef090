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
export. ``pop_item`` is guarded by ``expected_last_seq`` so two concurrent pops never remove the
same item (a HEAD_MISMATCH is retried on fresh state). The SDK itself is not required: the class
implements the protocol structurally (the SDK's ``Session`` is a ``typing.Protocol``).
"""
from __future__ import annotations

import asyncio
import json
from typing import Any, Dict, List, Optional

from palimpsest import events as ev
from palimpsest.client import Client, PalimpsestError, event_json

ITEMS = "openai-agents/items"
POP = "openai-agents/pop"
CLEAR = "openai-agents/clear"
TYPES = (ITEMS, POP, CLEAR)

TResponseInputItem = Dict[str, Any]


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
        """The current items and the head seq they reflect (-1 for an empty log)."""
        self._ensure()
        items: List[TResponseInputItem] = []
        head = self.client.head(self.session_id)
        for e in self.client.events(self.session_id, types=TYPES):
            if e.seq > head:  # appended after the head was read: the next fold sees it
                break
            data = event_json(e)
            if e.type == ITEMS:
                items.extend(data["items"])
            elif e.type == POP and items:
                items.pop()
            elif e.type == CLEAR:
                items.clear()
        return items, head

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
        self.client.append(self.session_id, [ev.event(ITEMS, {"items": json.loads(json.dumps(list(items)))})])

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
