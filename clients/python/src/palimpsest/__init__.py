"""Python client for Palimpsest, the session-log service for AI agents.

- ``palimpsest.client``: :class:`~palimpsest.client.Client` and
  :class:`~palimpsest.client.PalimpsestError`.
- ``palimpsest.events``: builders for the events the engine accepts.
- ``palimpsest.search``: ``snippet_parts`` and the typed ``SearchHit`` of ``Client.search``.
- ``palimpsest.agents``: an OpenAI Agents SDK ``Session`` backed by a Palimpsest session.
- ``palimpsest.v1``: the generated protobuf and gRPC stubs (with ``.pyi`` types).
"""

__version__ = "0.1.0"
