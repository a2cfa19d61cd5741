"""Every claim the store can run, as the driver path runs it, against checked-in copies.

The claim is the hottest statement and the subtlest: a change to it must show in review as a
diff of ``tests/store/golden/claim_*.sql``, one file per variant (simple or exclusive; ordering
``priority`` or ``due``; without a filter, on the queue's filter key with one value or a list,
with other pairs of one value or with lists, or both) and count (1 and ``MAX_BATCH_DEQUEUE``: the
count is a literal of the text, and sizes the exclusive claim's window).

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
FILTERS: dict[str, tuple[Match, Match]] = {  # name -> (keyed, filtered)
    "unfiltered": (False, False),
    "keyed": (True, False),
    "filtered": (False, True),
    "keyed_filtered": (True, True),
    "keyed_any": ("any", False),
    "filtered_any": (False, "any"),
    "keyed_any_filtered": ("any", True),
    "keyed_filtered_any": (True, "any"),
    "keyed_any_filtered_any": ("any", "any"),
}
ORDERINGS = {"": False, "due_": True}  # a file name's part -> due
VARIANTS = [
    (f"claim_{kind}_{order}{name}_{count}.sql", kind == "exclusive", keyed, filtered, due, count)
    for kind, (order, due), (name, (keyed, filtered)), count in itertools.product(
        ("simple", "exclusive"), ORDERINGS.items(), FILTERS.items(), COUNTS
    )
]


@pytest.mark.parametrize(
    ("file", "exclusive", "keyed", "filtered", "due", "count"),
    VARIANTS,
    ids=[v[0] for v in VARIANTS],
)
def test_the_compiled_claim_is_the_golden_one(
    file: str, exclusive: bool, keyed: Match, filtered: Match, due: bool, count: int
) -> None:
    compiled = claim_sql(count, exclusive=exclusive, keyed=keyed, filtered=filtered, due=due)
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
