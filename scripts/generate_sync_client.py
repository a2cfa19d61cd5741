"""Write ``app/client/sync_client.py`` from ``app/client/async_client.py``.

The blocking client is the asyncio client with ``async``/``await`` removed and a few names
swapped (unasync), formatted with the project's ruff settings. Edit the asyncio client, then run

    .venv/bin/python scripts/generate_sync_client.py

``--check`` writes nothing and exits 1 when the committed file differs from what would be
generated (tests/client/test_sync_client.py runs it).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import unasync

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "app" / "client" / "async_client.py"
TARGET = ROOT / "app" / "client" / "sync_client.py"

# Beyond unasync's own (__aenter__ -> __enter__, AsyncIterator -> Iterator, ...).
REPLACEMENTS = {
    "AsyncClient": "Client",  # ours, and httpx's
    "AsyncBaseTransport": "BaseTransport",
    "AsyncFailoverTransport": "FailoverTransport",
    "aclose": "close",
    "asynchronous": "sync",  # RetryPolicy.asynchronous -> RetryPolicy.sync
}

HEADER = "# Generated from async_client.py by scripts/generate_sync_client.py: do not edit.\n"


def generate() -> str:
    """The blocking client's source, as it should be committed."""
    with tempfile.TemporaryDirectory() as tmp:
        source, target = Path(tmp, "asynchronous"), Path(tmp, "blocking")
        source.mkdir()
        shutil.copy(SOURCE, source / "client.py")
        rule = unasync.Rule(str(source), str(target), additional_replacements=REPLACEMENTS)
        unasync.unasync_files([str(source / "client.py")], [rule])
        text = HEADER + (target / "client.py").read_text()
    # What removing async leaves for the linter: imports to re-sort (AsyncIterator became
    # Iterator), a loop to write as ``yield from`` (not allowed in an async generator), the
    # asyncio-only noqa. Then the formatter, with the project's settings.
    text = _ruff(text, "check", "--select", "I001,UP028,RUF100", "--fix", "--unsafe-fixes")
    return _ruff(text, "format")


def _ruff(text: str, *command: str) -> str:
    ruff = Path(sys.executable).with_name("ruff")
    done = subprocess.run(
        [str(ruff), *command, "--quiet", "--stdin-filename", str(TARGET), "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0 and not done.stdout:
        raise RuntimeError(f"ruff {' '.join(command)} failed: {done.stderr}")
    return done.stdout


def main() -> int:
    generated = generate()
    if "--check" in sys.argv[1:]:
        if TARGET.read_text() != generated:
            print(f"{TARGET.relative_to(ROOT)} is out of date: run {Path(__file__).name}")
            return 1
        return 0
    TARGET.write_text(generated)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
