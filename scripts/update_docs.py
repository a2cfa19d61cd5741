"""Regenerate the docs that come from code: .venv/bin/python scripts/update_docs.py"""

from __future__ import annotations

import re
from pathlib import Path

from app.config import reference_table

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    path = ROOT / "docs" / "operations.md"
    text = path.read_text()
    text = re.sub(
        r"(<!-- settings:start -->\n).*?(<!-- settings:end -->)",
        lambda m: m.group(1) + reference_table() + m.group(2),
        text,
        flags=re.S,
    )
    path.write_text(text)


if __name__ == "__main__":
    main()
