"""Every stored row of the tables clients write to, as PostgreSQL itself renders it: the before
and after of a request that must have changed nothing. Rendered by the database, a value Python
could not read back still shows up as a difference."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

TABLES = ("namespaces", "tokens", "queues", "messages")

_ROWS = {
    table: sa.text(f"SELECT to_jsonb(t)::text AS row FROM {table} t ORDER BY 1") for table in TABLES
}


async def snapshot(engine: AsyncEngine) -> dict[str, list[str]]:
    """Every row of :data:`TABLES`, each as the text of its ``jsonb``, in a stable order."""
    async with engine.connect() as conn:
        return {
            table: list((await conn.execute(query)).scalars()) for table, query in _ROWS.items()
        }
