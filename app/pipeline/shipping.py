"""Sundial's own code for the executors of a cluster: the installed ``app`` package as a zip.

Executors import Sundial's code when a job runs Python on them (bulk enqueue checks every row
with :mod:`app.pipeline.rows`, which imports :mod:`app.core`). On a local master they run the
driver's interpreter, which has Sundial installed; on a cluster a node need not have it: the
session adds this zip to the job (``SparkContext.addPyFile``), and executors import ``app`` from
it. Only the package's Python sources are in it (no templates, no static files, no bytecode).

What a node still needs is a Python of the driver's minor version with the third-party packages
the shipped code imports on executors: pyarrow (which PySpark's Arrow exchange needs anyway) and
msgspec (the core's JSON checks, a compiled extension that cannot be imported from a zip).

The zip is built once per content: its name carries Sundial's version and a digest of the
sources, so an upgrade or an edited checkout makes a new one and an unchanged install reuses it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import os
import tempfile
import zipfile
from pathlib import Path

import app

EXECUTOR_REQUIREMENTS = ("pyarrow", "msgspec")
"""Third-party packages the shipped code imports on executors (documented in docs/pipeline.md)."""

_FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # the zip's entries carry no build time: same sources, same zip


def package_root() -> Path:
    """The directory of the installed ``app`` package."""
    return Path(app.__file__).resolve().parent


def package_sources(root: Path | None = None) -> list[Path]:
    """The package's Python sources, in a stable order."""
    root = root or package_root()
    return sorted(
        path
        for path in root.rglob("*.py")
        if "__pycache__" not in path.relative_to(root).parts and path.is_file()
    )


def _version() -> str:
    try:
        return importlib.metadata.version("sundial")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/sundial/pipeline`` (``~/.cache/sundial/pipeline``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sundial" / "pipeline"


def _writable(directory: Path) -> Path:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=directory, prefix=".probe-")  # noqa: SIM115
        probe.close()
    except OSError:
        # A home without a writable cache (a service account): the temp dir, one per user.
        directory = Path(tempfile.gettempdir()) / f"sundial-pipeline-{os.getuid()}"
        directory.mkdir(mode=0o700, exist_ok=True)
    return directory


def package_zip(cache_dir: Path | None = None) -> Path:
    """The zip of the installed ``app`` package, built unless an identical one is cached."""
    root = package_root()
    sources = package_sources(root)
    digest = hashlib.sha256()
    contents = []
    for path in sources:
        name = f"app/{path.relative_to(root).as_posix()}"
        data = path.read_bytes()
        digest.update(name.encode() + b"\0" + len(data).to_bytes(8, "big") + data)
        contents.append((name, data))
    directory = _writable(cache_dir or default_cache_dir())
    target = directory / f"sundial-{_version()}-{digest.hexdigest()[:16]}.zip"
    if target.is_file():
        return target
    # Written aside, then renamed: a concurrent job sees either no zip or a whole one.
    handle, scratch = tempfile.mkstemp(dir=directory, prefix=".sundial-", suffix=".zip")
    try:
        with os.fdopen(handle, "wb") as out, zipfile.ZipFile(out, "w") as archive:
            for name, data in contents:
                entry = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
                entry.compress_type = zipfile.ZIP_DEFLATED
                entry.external_attr = 0o644 << 16
                archive.writestr(entry, data)
        os.replace(scratch, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(scratch)
    return target
