"""Every Python and shell example in the user documentation, run as written against a real
server (:mod:`tests.client.server`) on this test's database.

Per document, its ```python blocks run in order as one script, then its ```sh blocks as one
bash script (``set -euo pipefail``), in a scratch directory holding ``.sundial/admin-token`` as
``./dev serve`` leaves it, with ``SUNDIAL_URL`` pointing at the server, ``SUNDIAL_TOKEN``
holding a token of namespace ``shop`` — what the documents tell the reader to set up — and
``SUNDIAL_DATABASE_URL`` for the administration commands, which work on the database. A block
right after ``<!-- not run: reason -->`` is skipped, and must say why. A python line
``print(...)  # text`` promises its output: the script's output must hold those lines in order
(a line may add an explanation after the value: ``# ['a', 'b'] (why)``). Of the README, the quick
start is run here and the API tour by tests/test_readme.py; its other sections hold command
references, not examples. Budget: about 30 s, most of it starting `sundial` processes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.client import Client
from tests.client.server import running_server
from tests.conftest import ADMIN_TOKEN

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [
    "README.md",
    "docs/concepts.md",
    "docs/client.md",
    "docs/migrating.md",
    "docs/operations.md",
]
BLOCK = re.compile(
    r"(?:<!-- not run: (?P<why>[^>]*?) -->\n)?```(?P<lang>python|sh)\n(?P<code>.*?)```", re.S
)

PROMISED = re.compile(r"^\s*print\(.*\)\s+# (?P<output>.+)$", re.M)


def examples(document: str) -> tuple[str, str, list[str]]:
    """The document's python script, shell script and the reasons of the skipped blocks."""
    text = (ROOT / document).read_text()
    if document == "README.md":
        text = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    python, shell, skipped = [], [], []
    for block in BLOCK.finditer(text):
        if block["why"] is not None:
            skipped.append(block["why"].strip())
        elif block["lang"] == "python":
            python.append(block["code"])
        else:
            shell.append(block["code"])
    return "\n".join(python), "set -euo pipefail\n" + "\n".join(shell), skipped


def promised_outputs(python: str) -> list[str]:
    """What the script's ``print(...)  # output`` lines say they print, in order."""
    return [match["output"].strip() for match in PROMISED.finditer(python)]


def assert_printed_in_order(promised: list[str], output: str) -> None:
    lines = iter(line.strip() for line in output.splitlines())
    for claim in promised:
        # A promise is the printed line, optionally followed by " (an explanation)".
        found = any(claim == line or claim.startswith(line + " (") for line in lines if line)
        assert found, f"the example promises {claim!r}; it printed:\n{output}"


def run(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.mark.parametrize("document", DOCUMENTS)
def test_document_examples_run_as_written(document: str, database_url: str, tmp_path: Path) -> None:
    python, shell, skipped = examples(document)
    assert python.strip() or shell.count("\n") > 1, f"{document} lost its examples"
    assert all(skipped), f"{document}: a skipped example must say why"
    (tmp_path / ".sundial").mkdir()
    (tmp_path / ".sundial" / "admin-token").write_text(ADMIN_TOKEN + "\n")
    with running_server(database_url) as url, Client(url, ADMIN_TOKEN) as admin:
        admin.create_namespace("shop")
        env = {key: value for key, value in os.environ.items() if not key.startswith("SUNDIAL_")}
        env.update(
            SUNDIAL_URL=url,
            SUNDIAL_DATABASE_URL=database_url,  # for the administration commands
            SUNDIAL_TOKEN=admin.issue_token("shop", "docs").token,
            PYTHONPATH=str(ROOT),
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        )
        if python.strip():
            printed = run([sys.executable, "-c", python], tmp_path, env)
            assert_printed_in_order(promised_outputs(python), printed)
        if shell.count("\n") > 1:
            run(["bash", "-c", shell], tmp_path, env)


def test_promised_outputs_are_checked_in_order() -> None:
    script = 'print(1 + 1)  # 2\nx = 1  # not a print\nprint("a", "b")  # a b (two words)\n'
    assert promised_outputs(script) == ["2", "a b (two words)"]
    assert_printed_in_order(["2", "a b (two words)"], "noise\n2\nmore\na b\n")
    with pytest.raises(AssertionError):
        assert_printed_in_order(["a b", "2"], "2\na b\n")  # out of order
    with pytest.raises(AssertionError):
        assert_printed_in_order(["9"], "7\n")


def test_examples_are_found_and_skips_need_a_reason() -> None:
    sample = "<!-- not run: serves forever -->\n```sh\nx\n```\n```python\nprint(1)\n```\n"
    found = [(b["why"], b["lang"]) for b in BLOCK.finditer(sample)]
    assert found == [("serves forever", "sh"), (None, "python")]
