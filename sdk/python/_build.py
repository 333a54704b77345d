"""A PEP 517 build backend in the standard library: a pure-Python wheel of the `tern` package.

Why not setuptools: `pip install ./sdk/python` builds in an isolated environment and would fetch
setuptools from an index; this needs nothing, so the SDK installs offline too. Name and version
come from pyproject.toml.
"""

import base64
import hashlib
import io
import os
import re
import zipfile

ROOT = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "tern"


def _project():
    text = open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()
    project = text[text.index("[project]") :]

    def field(key):
        return re.search(rf'^{key}\s*=\s*"([^"]*)"', project, re.M).group(1)

    return field("name"), field("version"), field("description"), field("requires-python")


def _metadata():
    name, version, summary, python = _project()
    return name, version, (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: {summary}\n"
        f"License: Apache-2.0\nRequires-Python: {python}\n"
    )


def _files():
    """The package's files (sources and py.typed), as (archive name, bytes), in a stable order."""
    base = os.path.join(ROOT, PACKAGE)
    for folder, dirs, names in sorted(os.walk(base)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for n in sorted(names):
            if n.endswith(".py") or n == "py.typed":
                path = os.path.join(folder, n)
                yield os.path.relpath(path, ROOT).replace(os.sep, "/"), open(path, "rb").read()


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _stem():
    """`tern_gpu-0.1.0`: the distribution name as wheel and sdist file names spell it (PEP 427, PEP 625)."""
    name, version = _project()[:2]
    return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}"


def _wheel(wheel_directory, entries):
    _, _, metadata = _metadata()
    dist_info = f"{_stem()}.dist-info"
    entries = list(entries) + [
        (f"{dist_info}/METADATA", metadata.encode()),
        (f"{dist_info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: tern _build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    record = "\n".join([_record_line(n, d) for n, d in entries] + [f"{dist_info}/RECORD,,", ""])
    filename = f"{_stem()}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as whl:
        for n, d in entries + [(f"{dist_info}/RECORD", record.encode())]:
            whl.writestr(zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0)), d)
    return filename


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, _files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """`pip install -e`: a .pth line pointing at this folder, so edits show at once."""
    return _wheel(wheel_directory, [(f"_{PACKAGE}_editable.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    import tarfile

    _, _, metadata = _metadata()
    filename = f"{_stem()}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz") as tar:
        own = [(n, open(os.path.join(ROOT, n), "rb").read()) for n in ("pyproject.toml", "_build.py", "README.md")]
        for n, d in own + list(_files()) + [("PKG-INFO", metadata.encode())]:
            info = tarfile.TarInfo(f"{_stem()}/{n}")
            info.size = len(d)
            tar.addfile(info, io.BytesIO(d))
    return filename
