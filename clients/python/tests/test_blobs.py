"""Blobs (docs/blobs.md): events read with ``blob_refs`` carry references, ``get_blob`` reads
the bytes (from an offset; a stream cut short resumes from the bytes it has), and an image sent
once is referenced by digest afterwards (an unknown digest is BLOB_NOT_FOUND, nothing stored);
``blob_refs`` on messages, rendered messages, the export and surface subscriptions returns references."""
from __future__ import annotations

import json
import os

import pytest

from palimpsest import events as ev
from palimpsest.client import Client, PalimpsestError


def _png(n: int, seed: int) -> bytes:
    return bytes(((i * 7919 + seed) & 0xFF) for i in range(n))


def _image_of(e) -> object:  # type: ignore[no-untyped-def]
    return json.loads(e.data.json)["content"][0]["attachment"]["data"]


def test_blob_refs_and_get_blob(client: Client, session_id: str) -> None:
    png = _png(300 * 1024, 1)
    digest = ev.blob_digest(png)
    client.create_session(session_id)
    client.append(session_id, [ev.user_message([ev.image(png)])])
    [full] = client.events(session_id)
    assert _image_of(full) == ev.image(png)["attachment"]["data"]
    [ref] = client.events(session_id, blob_refs=True)
    assert _image_of(ref) == {"$blob": digest, "bytes": len(png), "mediaType": "image/png", "encoding": "base64"}
    assert client.get_blob(digest) == png
    assert client.get_blob(digest, offset=len(png) - 1000) == png[-1000:]
    assert client.get_blob(digest, offset=len(png)) == b""
    with pytest.raises(PalimpsestError) as missing:
        client.get_blob("sha256:" + "0" * 64)
    assert missing.value.reason == "BLOB_NOT_FOUND"
    with pytest.raises(PalimpsestError) as past:
        client.get_blob(digest, offset=len(png) + 1)
    assert past.value.reason == "BLOB_OFFSET_OUT_OF_RANGE"


def test_blob_refs_on_messages_export_and_subscriptions(client: Client, session_id: str) -> None:
    png = _png(120 * 1024, 3)
    ref = {"$blob": ev.blob_digest(png), "bytes": len(png), "mediaType": "image/png", "encoding": "base64"}
    ref_text = json.dumps(ref, separators=(",", ":"))
    b64 = ev.image(png)["attachment"]["data"]
    client.create_session(session_id)
    client.append(session_id, [ev.user_message([ev.image(png)])])
    assert b64 in json.dumps(client.messages(session_id))
    [plain] = client.messages(session_id)
    [with_ref] = client.messages(session_id, blob_refs=True)
    assert with_ref["content"][0]["attachment"]["data"] == ref
    assert with_ref["content"][0]["attachment"] | {"data": b64} == plain["content"][0]["attachment"]
    rendered = json.dumps(client.messages(session_id, format="anthropic", blob_refs=True), separators=(",", ":"))
    assert ref_text in rendered and b64 not in rendered
    assert b64.encode() in b"".join(client.export_session(session_id))
    light = b"".join(client.export_session(session_id, blob_refs=True)).decode()
    assert ref_text in light and b64 not in light

    def first_append(blob_refs: bool):  # type: ignore[no-untyped-def]
        stream = client.subscribe_surface(session_id, include_messages=True, blob_refs=blob_refs)
        try:
            return next(d for d in stream if d.op == "append")
        finally:
            stream.close()

    live = first_append(True)
    assert _image_of(live.event) == ref
    assert live.message["content"][0]["attachment"]["data"] == ref
    assert _image_of(first_append(False).event) == b64


def test_an_image_sent_once_is_referenced_by_digest(client: Client, session_id: str) -> None:
    png = _png(200 * 1024, 2)
    client.create_session(session_id)
    client.append(session_id, [ev.user_message([ev.image(png)])])
    client.append(session_id, [ev.user_message([ev.text("again"), ev.image_ref(ev.blob_digest(png))])])
    events = list(client.events(session_id))
    assert json.loads(events[1].data.json)["content"][1] == ev.image(png)
    # An image the tenant never sent: refused, nothing stored.
    with pytest.raises(PalimpsestError) as unknown:
        client.append(session_id, [ev.user_message([ev.image_ref(ev.blob_digest(b"never sent"))])])
    assert unknown.value.reason == "BLOB_NOT_FOUND"
    assert len(list(client.events(session_id))) == 2


def test_get_blob_resumes_from_the_bytes_it_has_after_a_dropped_connection(proxy, session_id: str) -> None:  # type: ignore[no-untyped-def]
    png = os.urandom(2 * 1024 * 1024 + 5)
    digest = ev.blob_digest(png)
    # Without BDP probing the stream window stays at 64 KiB, so the rest of the blob is still on
    # the server when the connection drops (with it, gRPC may have read all 2 MiB ahead).
    with Client(proxy.address, options=[("grpc.http2.bdp_probe", 0)]) as c:
        c.create_session(session_id)
        c.append(session_id, [ev.user_message([ev.image(png)])])
        chunks = c.blob_chunks(digest)
        got = [next(chunks)]
        assert proxy.drop() >= 1
        got += list(chunks)
    assert b"".join(got) == png
    # The read went on over a new connection, from the offset it had reached.
    assert proxy.accepted >= 2
