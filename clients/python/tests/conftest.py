"""Fixtures: a real server's address (PALIMPSEST_ADDR, set by test/e2e/python-client.test.ts),
a client, fresh session ids, a TCP proxy that can refuse or drop connections, and a server
process of the repository's own (``node bin/palimpsest.mjs serve``) that can be restarted."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import uuid
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

from palimpsest.client import Client


@pytest.fixture(scope="session")
def address() -> str:
    addr = os.environ.get("PALIMPSEST_ADDR")
    if not addr:
        pytest.fail("PALIMPSEST_ADDR is not set: these tests run against a real server (npx vitest run test/e2e/python-client.test.ts)")
    return addr


@pytest.fixture
def client(address: str) -> Iterator[Client]:
    with Client(address) as c:
        yield c


@pytest.fixture
def session_id() -> str:
    return f"py-{uuid.uuid4()}"


class Proxy:
    """Forwards TCP connections to ``target``; ``refuse`` = how many of the next connections to
    close at once; ``drop()`` closes every open connection (what a network cut or a server
    restart looks like to the client)."""

    def __init__(self, target: str):
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.refuse = 0
        self.accepted = 0
        self._lock = threading.Lock()
        self._open: List[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self.accepted += 1
                if self.refuse > 0:
                    self.refuse -= 1
                    conn.close()
                    continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                conn.close()
                continue
            with self._lock:
                self._open += [conn, upstream]
            threading.Thread(target=self._pump, args=(conn, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, conn), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def drop(self) -> int:
        """Closes every open connection; returns how many client connections were cut."""
        with self._lock:
            socks, self._open = self._open, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        return len(socks) // 2

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        self.drop()


@pytest.fixture
def proxy(address: str) -> Iterator[Proxy]:
    p = Proxy(address)
    yield p
    p.close()


ROOT = Path(__file__).resolve().parents[3]


class ServerProcess:
    """``palimpsest serve`` of this repository (its built ``dist/``) on a SQLite file, as a child
    process: ``restart()`` stops it with SIGTERM (open streams end with UNAVAILABLE /
    SERVER_SHUTDOWN) and starts it again on the same port and database."""

    def __init__(self, db: Path):
        self.db = db
        self.proc: Optional[subprocess.Popen] = None  # type: ignore[type-arg]
        self.address = self._start("127.0.0.1:0")

    def _start(self, listen: str) -> str:
        node = os.environ.get("PALIMPSEST_NODE", "node")
        self.proc = subprocess.Popen([node, str(ROOT / "bin" / "palimpsest.mjs"), "serve", "--listen", listen, "--db", str(self.db),
                                      "--log-level", "silent"], cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self.proc.stdout is not None
        seen = []
        for line in self.proc.stdout:
            seen.append(line)
            if line.startswith("palimpsest listening on "):
                threading.Thread(target=self.proc.stdout.read, daemon=True).start()  # keep the pipe drained
                return line.split()[-1]
        raise RuntimeError(f"the server did not start: {''.join(seen)}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)

    def restart(self) -> None:
        self.stop()
        self._start(self.address)


@pytest.fixture
def server_process(tmp_path: Path) -> Iterator[ServerProcess]:
    s = ServerProcess(tmp_path / "palimpsest.db")
    yield s
    s.stop()
