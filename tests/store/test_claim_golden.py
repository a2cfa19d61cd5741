"""Every claim the store can run, as the driver path runs it, against checked-in copies.

The claim is the hottest statement and the subtlest: a change to it must show in review as a
diff of ``tests/store/golden/claim_*.sql``, one file per variant (simple or exclusive; ordering
``priority`` or ``due``; without a filter, on the queue's filter key with one value or a list,
with other pairs of one value or with lists, or both; on the queue's second filter key, which
changes only the column and index the key's match reads) and count (1 and ``MAX_BATCH_DEQUEUE``:
the count is a literal of the text, and sizes the exclusive claim's window).

After an intended change, regenerate the files and review their diff::

    SUNDIAL_UPDATE_GOLDEN=1 .venv/bin/pytest tests/store/test_claim_golden.py
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from app.core.validation import MAX_BATCH_DEQUEUE
from app.store.dequeue import claim_sql
from app.store.sql.claim import Match

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("SUNDIAL_UPDATE_GOLDEN") == "1"

COUNTS = (1, MAX_BATCH_DEQUEUE)
FILTERS: dict[str, tuple[Match, Match, bool]] = {  # name -> (keyed, filtered, second_key)
    "unfiltered": (False, False, False),
    "keyed": (True, False, False),
    "filtered": (False, True, False),
    "keyed_filtered": (True, True, False),
    "keyed_any": ("any", False, False),
    "filtered_any": (False, "any", False),
    "keyed_any_filtered": ("any", True, False),
    "keyed_filtered_any": (True, "any", False),
    "keyed_any_filtered_any": ("any", "any", False),
    "second_keyed": (True, False, True),
    "second_keyed_any": ("any", False, True),
}
ORDERINGS = {"": False, "due_": True}  # a file name's part -> due
VARIANTS = [
    (f"claim_{kind}_{order}{name}_{count}.sql", kind == "exclusive", *match, due, count)
    for kind, (order, due), (name, match), count in itertools.product(
        ("simple", "exclusive"), ORDERINGS.items(), FILTERS.items(), COUNTS
    )
]


@pytest.mark.parametrize(
    ("file", "exclusive", "keyed", "filtered", "second_key", "due", "count"),
    VARIANTS,
    ids=[v[0] for v in VARIANTS],
)
def test_the_compiled_claim_is_the_golden_one(
    file: str,
    exclusive: bool,
    keyed: Match,
    filtered: Match,
    second_key: bool,
    due: bool,
    count: int,
) -> None:
    compiled = claim_sql(
        count,
        exclusive=exclusive,
        keyed=keyed,
        filtered=filtered,
        due=due,
        second_key=second_key,
    )
    golden = GOLDEN / file
    if UPDATE:
        golden.write_text(compiled)
    assert golden.exists(), f"no {golden}: regenerate (see this module's docstring)"
    assert compiled == golden.read_text(), (
        f"the compiled claim differs from {golden}: if intended, regenerate (see this module's "
        "docstring) and review the diff"
    )


def test_every_golden_file_is_a_variant() -> None:
    expected = {file for file, *_ in VARIANTS}
    stale = {path.name for path in GOLDEN.glob("claim_*.sql")} - expected
    if UPDATE:
        for name in stale:
            (GOLDEN / name).unlink()
        stale = set()
    assert not stale, f"golden files of no variant (regenerate to remove them): {sorted(stale)}"
