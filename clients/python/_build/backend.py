"""A PEP 517 / PEP 660 build backend for this one pure-Python package, with no requirements.

It writes the wheel (and the sdist) itself: the files under src/, a METADATA built from
pyproject.toml's [project] table, and a RECORD with hashes. Only the few [project] keys the
package uses are read (name, version, description, requires-python, license, dependencies), with
tomllib where there is one and a line reader for this file's simple layout otherwise (Python < 3.11).
"""
from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
TAG = "py3-none-any"


def _project() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        raw = f.read()
    try:
        import tomllib  # Python >= 3.11
        return tomllib.loads(raw.decode())["project"]
    except ImportError:
        pass
    project: dict = {}
    section = None
    for line in raw.decode().splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line.strip("[]")
            continue
        if section != "project" or "=" not in line or line.startswith("#"):
            continue
        key, value = (p.strip() for p in line.split("=", 1))
        if value.startswith('"'):
            project[key] = value.strip('"')
        elif value.startswith("["):
            project[key] = re.findall(r'"([^"]*)"', value)
        elif value.startswith("{"):
            m = re.search(r'text\s*=\s*"([^"]*)"', value)
            project[key] = {"text": m.group(1) if m else ""}
    return project


def _names(p: dict) -> tuple[str, str]:
    return re.sub(r"[-_.]+", "_", p["name"]), p["version"]


def _metadata(p: dict) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}"]
    if "description" in p:
        lines.append(f"Summary: {p['description']}")
    if "requires-python" in p:
        lines.append(f"Requires-Python: {p['requires-python']}")
    if "license" in p:
        lines.append(f"License: {p['license'].get('text', '')}")
    lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    return "\n".join(lines) + "\n"


def _sources() -> list[tuple[str, str]]:
    """(archive name, path) of every file of the package, sorted, without caches."""
    out = []
    for dirpath, dirnames, filenames in os.walk(SRC):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.endswith(".egg-info"))
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(dirpath, name)
            out.append((os.path.relpath(path, SRC).replace(os.sep, "/"), path))
    return out


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _write_wheel(directory: str, files: list[tuple[str, bytes]]) -> str:
    p = _project()
    dist, version = _names(p)
    info = f"{dist}-{version}.dist-info"
    wheel_name = f"{dist}-{version}-{TAG}.whl"
    files = files + [
        (f"{info}/METADATA", _metadata(p).encode()),
        (f"{info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: palimpsest-backend\nRoot-Is-Purelib: true\nTag: {TAG}\n".encode()),
        (f"{info}/top_level.txt", b"palimpsest\n"),
    ]
    record = [_record_line(n, d) for n, d in files] + [f"{info}/RECORD,,"]
    with zipfile.ZipFile(os.path.join(directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)
        z.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=(2020, 1, 1, 0, 0, 0)), "\n".join(record) + "\n")
    return wheel_name


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# ---------------------------------------------------------------- PEP 517


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(n, _read(p)) for n, p in _sources()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """PEP 660: a wheel holding one .pth file that puts src/ on sys.path."""
    dist, _ = _names(_project())
    return _write_wheel(wheel_directory, [(f"__editable__.{dist}.pth", (SRC + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    dist, version = _names(p)
    base = f"{dist}-{version}"
    name = f"{base}.tar.gz"
    members = [("pyproject.toml", os.path.join(ROOT, "pyproject.toml")),
               ("_build/backend.py", os.path.abspath(__file__))]
    members += [(f"src/{n}", path) for n, path in _sources()]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for arc, path in members:
            t.add(path, arcname=f"{base}/{arc}", recursive=False)
        pkg_info = _metadata(p).encode()
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(pkg_info)
        t.addfile(ti, io.BytesIO(pkg_info))
    return name
