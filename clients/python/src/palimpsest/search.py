"""SearchEvents (issue #40, docs/search.md) for :meth:`palimpsest.client.Client.search`: the
request built from keyword arguments named like the proto's fields, and :func:`snippet_parts`,
which cuts a hit's snippet at its matches.

The matches are offsets in Unicode code points, which is how Python indexes ``str``, so they
apply to ``hit.snippet`` as they are.
"""
from __future__ import annotations

from datetime import datetime
from typing import List, Mapping, Optional, Sequence, Tuple, Union

from palimpsest.v1 import service_pb2

__all__ = ["SearchHit", "search_request", "snippet_parts"]

#: One hit: ``session_id``, ``seq``, ``type``, ``time`` (Unix epoch ms), ``snippet``, ``matches``
#: (``start``/``end`` code-point ranges of ``snippet``) and ``score``.
SearchHit = service_pb2.SearchHit

_ORDERS = {
    "newest": service_pb2.SEARCH_ORDER_NEWEST,
    "score": service_pb2.SEARCH_ORDER_SCORE,
}

Time = Union[int, datetime]


def _millis(t: Optional[Time]) -> Optional[int]:
    if t is None:
        return None
    if isinstance(t, datetime):
        return int(t.timestamp() * 1000)
    return int(t)


def search_request(query: str, *, labels: Optional[Mapping[str, str]] = None, session_ids: Sequence[str] = (),
                   event_types: Sequence[str] = (), start_time: Optional[Time] = None, end_time: Optional[Time] = None,
                   tool_name: str = "", surface_only: bool = False, include_shadowed: bool = False,
                   order: Optional[str] = None, page_size: int = 0, page_token: str = "") -> service_pb2.SearchEventsRequest:
    """The SearchEventsRequest of a query and its filters (see :meth:`Client.search`)."""
    for name, value in (("session_ids", session_ids), ("event_types", event_types)):
        if isinstance(value, str):
            raise TypeError(f"{name} is a sequence of strings, not a string")
    if order is not None and order not in _ORDERS:
        raise ValueError(f"unknown order {order!r}; use 'newest' or 'score'")
    req = service_pb2.SearchEventsRequest(
        query=query, page_size=page_size, page_token=page_token, label_selector=dict(labels or {}),
        session_ids=list(session_ids), event_types=list(event_types), tool_name=tool_name,
        surface_only=surface_only, include_shadowed=include_shadowed,
        order=_ORDERS[order] if order is not None else service_pb2.SEARCH_ORDER_UNSPECIFIED)
    start, end = _millis(start_time), _millis(end_time)
    if start is not None:
        req.start_time = start
    if end is not None:
        req.end_time = end
    return req


def snippet_parts(hit: SearchHit) -> List[Tuple[str, bool]]:
    """The hit's snippet cut at its matches: ``(text, matched)`` pairs, in order, that join back
    to the snippet (ranges out of order, overlapping or past the end are clamped)."""
    text = hit.snippet
    out: List[Tuple[str, bool]] = []
    at = 0
    for m in sorted(hit.matches, key=lambda r: r.start):
        start = max(at, min(m.start, len(text)))
        end = max(start, min(m.end, len(text)))
        if start > at:
            out.append((text[at:start], False))
        if end > start:
            out.append((text[start:end], True))
        at = end
    if at < len(text):
        out.append((text[at:], False))
    return out
