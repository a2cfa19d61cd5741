"""PySpark and pyarrow are the optional ``pipeline`` extra: the server, the CLI and the client
must start without them, so none of their modules may import either at import time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_core_never_imports_the_pipeline_extra() -> None:
    code = (
        "import sys, app.bootstrap.server, app.bootstrap.commands, app.client, app.scheduler;"
        " print(sorted(m for m in ('pyspark', 'pyarrow') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
