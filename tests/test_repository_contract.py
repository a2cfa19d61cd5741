"""The contract lives in the repository: the API contract (docs/api.md) and the product concepts
(docs/concepts.md) are the project's own documents, linked from the README, and no file of the
project refers to a document outside it (such as a specification on the machine where the
project was first written). Links between the documents resolve, anchors included.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Written in pieces, so that this file does not match itself.
OUTSIDE = [
    "PRODUCT" + ".md",
    "API" + ".md",
    "shared" + "/spec",
    "/work" + "/shared",
    "../" + "shared",
    "../" + "seeds",
]
"""What a reference to a file outside the repository looked like."""

SKIPPED_DIRS = {".git", ".venv", ".sundial", "node_modules", "__pycache__", ".mypy_cache"}
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def project_files() -> list[Path]:
    """The repository's files: tracked or new, not ignored (every file, from a copy without
    git, outside the usual generated directories)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return [
            path
            for path in ROOT.rglob("*")
            if path.is_file() and not SKIPPED_DIRS & set(path.relative_to(ROOT).parts)
        ]
    return [ROOT / name for name in listed.decode().split("\0") if name and (ROOT / name).is_file()]


def text_of(path: Path) -> str | None:
    """The file's text, or None for a binary file."""
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def test_no_file_refers_outside_the_repository() -> None:
    found = []
    for path in project_files():
        text = text_of(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if any(pattern in line for pattern in OUTSIDE):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == [], "refer to docs/api.md or docs/concepts.md instead:\n" + "\n".join(found)


def test_the_readme_links_the_contract_documents() -> None:
    readme = (ROOT / "README.md").read_text()
    documentation = readme.split("## Documentation", 1)[1]
    for document in ("docs/api.md", "docs/concepts.md"):
        assert (ROOT / document).is_file(), document
        assert f"]({document})" in documentation, document
    tour = readme.split("## API tour", 1)[1].split("\n## ", 1)[0]
    assert "](docs/api.md)" in tour


def anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of a document."""
    found = set()
    for heading in re.findall(r"^#+\s+(.+?)\s*$", markdown, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found.add(slug)
    return found


def test_links_between_documents_resolve() -> None:
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = []
    for document in documents:
        text = re.sub(r"```.*?```", "", document.read_text(), flags=re.S)  # not code blocks
        for match in LINK.finditer(text):
            target = match["target"]
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            path, _, anchor = target.partition("#")
            linked = (document.parent / path).resolve() if path else document
            where = f"{document.relative_to(ROOT)}: {target}"
            if not linked.exists():
                broken.append(where)
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked.read_text()):
                broken.append(where + " (no such heading)")
    assert broken == []
