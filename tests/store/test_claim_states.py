"""The claim reads the states the state machine names, and the indexes it needs cover them.

The claim cannot bind its states (PostgreSQL uses a partial index only for a condition written in
the statement), so they are rendered into its text from ``CLAIM`` (app/core/states.py). These
tests hold every claim variant to ``CLAIM`` (each source reads its state, the lease writes its
target, and no other state appears), and the partial indexes the migrations made to ``CLAIM``:
a change of the claim's states in states.py that the indexes do not follow fails here, and shows
in the golden files (test_claim_golden.py)."""

from __future__ import annotations

import itertools
import re

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.states import CLAIM, TRANSITIONS, Event, State
from app.store.dequeue import claim_sql
from app.store.sql.claim import Match

MATCHES: list[Match] = [False, True, "any"]
VARIANTS = list(itertools.product([False, True], MATCHES, MATCHES, [False, True], [1, 100]))
STATE_LITERAL = re.compile(r"state = '(\w+)'")


def _source(sql: str, name: str) -> str:
    """The text of the claim's source subquery ``name`` (``ready`` or ``due``)."""
    [found] = re.findall(r"SELECT \* FROM \((.*?)\) AS " + name + r"\b", sql, re.S)
    return found


@pytest.mark.parametrize(("exclusive", "keyed", "filtered", "due", "count"), VARIANTS)
def test_the_claim_reads_and_writes_the_states_of_its_transition(
    exclusive: bool, keyed: Match, filtered: Match, due: bool, count: int
) -> None:
    sql = claim_sql(count, exclusive=exclusive, keyed=keyed, filtered=filtered, due=due)
    ready, due = _source(sql, "ready"), _source(sql, "due")
    assert f"AND state = '{CLAIM.ready}'" in ready
    assert f"WHERE state = '{CLAIM.due}' AND visible_at <= now()" in due
    assert f"SET state = '{CLAIM.leased}'," in sql
    # The table's transition: from ready and due to leased, and no state beyond these.
    assert set(TRANSITIONS[Event.DEQUEUE]) == {CLAIM.ready, CLAIM.due}
    assert set(TRANSITIONS[Event.DEQUEUE][CLAIM.due]) == {CLAIM.leased}
    assert set(STATE_LITERAL.findall(sql)) == {CLAIM.ready, CLAIM.due, CLAIM.leased}
    if exclusive:
        # A value is taken while one of its messages is leased: the unique index's predicate.
        assert f"r.state = '{CLAIM.leased}'" in ready
        assert f"r.state = '{CLAIM.leased}'" in due


async def _predicate(engine: AsyncEngine, index: str) -> str:
    async with engine.connect() as conn:
        result = await conn.execute(
            sa.text(
                "SELECT pg_get_expr(i.indpred, i.indrelid) FROM pg_index i"
                " JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = :index"
            ),
            {"index": index},
        )
        predicate = result.scalar_one()
    assert isinstance(predicate, str)
    return predicate


@pytest.mark.parametrize(
    ("index", "state"),
    [
        ("messages_pending_idx", CLAIM.ready),  # the ready source's walk
        ("messages_filter_pending_idx", CLAIM.ready),  # the keyed ready source's walk
        ("messages_filter_2_pending_idx", CLAIM.ready),  # the same on the second key
        ("messages_pending_visible_idx", CLAIM.ready),  # a due-ordered queue's walk
        ("messages_invisible_idx", CLAIM.due),  # the due source
        ("messages_running_exclusive_uidx", CLAIM.leased),  # one leased message per value
    ],
)
async def test_the_partial_indexes_cover_the_states_the_claim_reads(
    engine: AsyncEngine, index: str, state: State
) -> None:
    predicate = await _predicate(engine, index)
    assert re.findall(r"state = '(\w+)'::message_state", predicate) == [state], predicate
