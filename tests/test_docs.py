"""Documentation that is generated from code stays in sync with it."""

from __future__ import annotations

import re
from pathlib import Path

from app.config import reference_table

ROOT = Path(__file__).resolve().parents[1]


def test_operations_guide_has_the_current_settings_reference() -> None:
    text = (ROOT / "docs" / "operations.md").read_text()
    match = re.search(r"<!-- settings:start -->\n(.*?)<!-- settings:end -->", text, re.S)
    assert match, "docs/operations.md lost its settings markers"
    assert match.group(1) == reference_table(), "run scripts/update_docs.py"


def test_readme_links_resolve() -> None:
    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(((?:docs|bench)/[^)#]+)\)", readme):
        assert (ROOT / target).exists(), target
