"""The README's API tour, run as written (curl and python3) against a real `sundial serve`."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.processes import ROOT, free_port
from tests.test_serve import serve


def tour_script() -> str:
    readme = (ROOT / "README.md").read_text()
    tour = readme.split("<!-- tour:start -->", 1)[1].split("<!-- tour:end -->", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", tour, re.S)
    assert len(blocks) >= 5, "the tour lost its examples"
    return "set -euo pipefail\n" + "\n".join(blocks)


@pytest.mark.slow
def test_readme_api_tour_runs_as_written(tmp_path: Path) -> None:
    port = free_port()
    # The tour reads the admin token from ./.sundial, as a user in the checkout would.
    with serve(tmp_path / ".sundial", port):
        script = tour_script().replace("127.0.0.1:8080", f"127.0.0.1:{port}")
        result = subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert result.returncode == 0, result.stdout + result.stderr
    printed = [line for line in result.stdout.splitlines() if not line.startswith('{"')]
    # What the tour's comments promise, in order.
    expected = ["urgent-7", "completed", "invisible", "2", "web-2", "invisible", "2"]
    values = [line for line in printed if not re.match(r"^\d{4}-\d\d-\d\dT", line)]
    assert values[: len(expected)] == expected, result.stdout
    counts = values[-1]
    assert "'invisible': 2" in counts, counts
    assert "'completed': 1" in counts, counts
