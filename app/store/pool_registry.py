"""Registering a database as a pool (docs/scaling.md), at start and at ``sundial db upgrade``.

The catalogue numbers each pool once, and the pool keeps its name and number in its own
``pool_identity`` row and takes its range of queue ids (:data:`QUEUE_IDS_PER_POOL`). Registering
again checks that nothing has moved: a database registered as one pool refuses to serve as
another (two names configured with one URL would both act on the same rows), and a pool the
catalogue numbered differently, or whose queues lie outside its range, is refused with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
import sqlalchemy.pool

from app.store.sql import pools as sql
from app.store.sql.pools import QUEUE_IDS_PER_POOL


class PoolMisconfigured(RuntimeError):
    """A pool's database is not the pool the configuration says (the message says why)."""


@dataclass(frozen=True, slots=True)
class RegisteredPool:
    """A pool as the catalogue numbered it."""

    name: str
    number: int

    @property
    def queue_ids(self) -> tuple[int, int]:
        """The lowest and highest queue id of the pool's range."""
        low = self.number * QUEUE_IDS_PER_POOL
        return max(low, 1), low + QUEUE_IDS_PER_POOL - 1


def register(catalogue_url: str, name: str, url: str) -> RegisteredPool:
    """Register the database at ``url`` (migrated) as pool ``name`` of the catalogue at
    ``catalogue_url`` (the pool ``default`` is the catalogue itself), or check an earlier
    registration.

    Raises:
        PoolMisconfigured: the database is registered as another pool, the catalogue numbered
            the pool otherwise, or its queues lie outside the pool's range of ids.
    """
    catalogue = sa.create_engine(catalogue_url, poolclass=sa.pool.NullPool)
    database = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with catalogue.begin() as conn:
            conn.execute(sql.POOLS_LOCK)
            conn.execute(sql.POOL_NUMBER_ASSIGN, {"name": name})
            number: int = conn.execute(sql.POOL_NUMBER, {"name": name}).scalar_one()
        pool = RegisteredPool(name, number)
        with database.begin() as conn:
            identity = conn.execute(sql.POOL_IDENTITY).first()
            if identity is None:
                _take_queue_ids(conn, pool)
                conn.execute(sql.POOL_IDENTITY_INSERT, {"name": name, "number": number})
            elif (identity.name, identity.number) != (name, number):
                raise PoolMisconfigured(
                    f"pool {name!r}: its database is registered as pool {identity.name!r}"
                    f" (number {identity.number}); the catalogue numbers {name!r} {number}."
                    " Each pool needs a database of its own (docs/scaling.md)"
                )
        return pool
    finally:
        catalogue.dispose()
        database.dispose()


def _take_queue_ids(conn: sa.Connection, pool: RegisteredPool) -> None:
    """Number the pool's queues from its range from now on; refuse a database whose existing
    queues lie outside it (it served as another pool's database, or alone)."""
    low, high = pool.queue_ids
    params = {"low": low, "high": high}
    if conn.execute(sql.QUEUE_IDS_OUTSIDE, params).scalar_one():
        raise PoolMisconfigured(
            f"pool {pool.name!r}: its database already holds queues numbered outside the"
            f" pool's range ({low}-{high}); a new pool needs a database without namespaces"
        )
    start = max(low, conn.execute(sql.QUEUE_ID_MAX).scalar_one() + 1)
    # DDL takes no parameters: the values are integers computed here.
    conn.execute(
        sa.text(
            f"ALTER TABLE queues ALTER COLUMN id SET START WITH {int(low)}"
            f" SET MINVALUE {int(low)} SET MAXVALUE {int(high)} RESTART WITH {int(start)}"
        )
    )


def registered(catalogue_url: str) -> list[RegisteredPool]:
    """Every pool the catalogue has numbered, by number."""
    engine = sa.create_engine(catalogue_url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            return [RegisteredPool(r.name, r.number) for r in conn.execute(sql.POOLS_REGISTERED)]
    finally:
        engine.dispose()
