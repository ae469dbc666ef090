"""The typed stubs: a .pyi class for every message and enum of palimpsest.v1, and (with Debian's
mypy) a small program type-checks against them while a wrong one is rejected."""
from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import palimpsest.v1

V1 = Path(palimpsest.v1.__file__).parent
MODULES = ["content_pb2", "event_pb2", "session_pb2", "service_pb2"]
MYPY_INI = "[mypy]\nignore_missing_imports = True\ndisable_error_code = import\n"
# grpc and protobuf ship no stubs in Debian, so their types are Any; our .pyi are what is checked.


def test_every_message_and_enum_has_a_typed_stub() -> None:
    for name in MODULES:
        module = importlib.import_module(f"palimpsest.v1.{name}")
        pyi = (V1 / f"{name}.pyi").read_text()
        declared = set(re.findall(r"^class (\w+)\(", pyi, re.M))
        wanted = set(module.DESCRIPTOR.message_types_by_name) | set(module.DESCRIPTOR.enum_types_by_name)
        assert wanted and wanted <= declared, f"{name}.pyi lacks {sorted(wanted - declared)}"
    grpc_pyi = (V1 / "service_pb2_grpc.pyi").read_text()
    service = importlib.import_module("palimpsest.v1.service_pb2").DESCRIPTOR.services_by_name["SessionService"]
    for method in service.methods:
        assert re.search(rf"^    {method.name}: grpc\.", grpc_pyi, re.M), method.name


def mypy_env() -> "dict[str, str]":
    """An installed package is found by mypy through its py.typed marker; a source tree needs MYPYPATH."""
    root = V1.parent.parent
    if root.name in ("site-packages", "dist-packages"):
        return dict(os.environ)
    return dict(os.environ, MYPYPATH=str(root))


def have_mypy() -> bool:
    return subprocess.run([sys.executable, "-c", "import mypy"], capture_output=True).returncode == 0


def mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    (tmp_path / "mypy.ini").write_text(MYPY_INI)
    (tmp_path / "prog.py").write_text(textwrap.dedent(source))
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--no-incremental", "--disallow-untyped-defs", "prog.py"],
                          cwd=tmp_path, env=mypy_env(), capture_output=True, text=True)


needs_mypy = pytest.mark.skipif(not have_mypy() and os.environ.get("CI") != "true",
                                reason="mypy is not installed (apt-get install mypy)")


@needs_mypy
def test_a_program_type_checks_against_the_stubs(tmp_path: Path) -> None:
    good = mypy(tmp_path, """
        from typing import List, Optional
        from palimpsest import events as ev
        from palimpsest.client import Client, PalimpsestError, SurfaceDelta
        from palimpsest.v1 import event_pb2, service_pb2

        def turn(c: Client, sid: str) -> List[int]:
            batch: List[event_pb2.EventInput] = [ev.turn_start(1), ev.user_message("hi"), ev.turn_end(1)]
            return c.append(sid, batch, expected_last_seq=c.head(sid))

        def watch(c: Client, sid: str) -> Optional[int]:
            for d in c.subscribe_surface(sid):
                seq: Optional[int] = d.seq
                return seq
            return None

        req = service_pb2.AppendEventsRequest(session_id="s", events=[ev.user_message("hi")], expected_last_seq=3)
        head: int = req.expected_last_seq
        kind: str = req.events[0].type

        def reason(e: PalimpsestError) -> str:
            return e.reason + e.code + e.metadata.get("index", "")
    """)
    assert good.returncode == 0, good.stdout + good.stderr


@needs_mypy
def test_a_wrong_program_is_rejected(tmp_path: Path) -> None:
    bad = mypy(tmp_path, """
        from palimpsest.client import Client
        from palimpsest.v1 import service_pb2

        req = service_pb2.AppendEventsRequest(session_id=3)
        name: str = req.expected_last_seq
        seqs: str = Client("127.0.0.1:1").append("s", [])
    """)
    assert bad.returncode == 1, bad.stdout
    assert 'Argument "session_id" to "AppendEventsRequest" has incompatible type "int"; expected "str"' in bad.stdout
    assert 'expression has type "int", variable has type "str"' in bad.stdout
    assert 'expression has type "List[int]", variable has type "str"' in bad.stdout


@needs_mypy
def test_the_package_itself_type_checks(tmp_path: Path) -> None:
    (tmp_path / "mypy.ini").write_text(MYPY_INI)
    r = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini"), "--no-incremental",
                        "--disallow-untyped-defs", "-p", "palimpsest"], cwd=tmp_path,
                       env=mypy_env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
