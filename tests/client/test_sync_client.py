"""The blocking client is generated from the asyncio one: the committed file must be what
``scripts/generate_sync_client.py`` writes, so a change to one client reaches the other."""

from __future__ import annotations

import subprocess
import sys

from tests.processes import ROOT


def test_the_blocking_client_is_generated_from_the_asyncio_one() -> None:
    check = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "generate_sync_client.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
