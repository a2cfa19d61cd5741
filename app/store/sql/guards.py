"""The guards statements carry beside their own conditions: the catalogue guard, true while the
lookups a request relies on are current, and the state guard's ``:from_states``."""

from __future__ import annotations

import functools
from typing import Final

from sqlalchemy import TextClause, text

from app.core.states import Event, allowed_from

# The guard of every statement that a request runs on the tokens and queues it looked up
# (app/core/catalogue.py): true while the catalogue is still at :catalogue_version and the
# caller's token is valid (:valid_until, by the database's clock); otherwise it raises SQLSTATE
# SD001, so the statement applies nothing and the server looks up again. It reads no row of the
# statement, so PostgreSQL evaluates it once, as a one-time filter, before the statement's first
# row. NULL arguments skip their check (statements run outside a request).
CATALOGUE_IS_CURRENT = (
    "sundial_catalogue_is(CAST(:catalogue_version AS bigint), CAST(:valid_until AS timestamptz))"
)

# The same check on its own, for statements that do not carry it (the non-hot ones).
CATALOGUE_CHECK: Final[TextClause] = text(f"SELECT {CATALOGUE_IS_CURRENT}")


@functools.cache
def from_states(event: Event) -> str:
    """The ``:from_states`` of a statement guarded by ``state = ANY(CAST(:from_states AS
    message_state[]))``: the states ``event`` may happen from (:func:`allowed_from`, the one
    table of the state machine) as an array literal such as ``{running}``. One string is what
    psycopg dumps cheapest; a list it would inspect and dump element by element on every
    statement (5% of a worker's CPU under dequeue + complete)."""
    return "{" + ",".join(allowed_from(event)) + "}"
