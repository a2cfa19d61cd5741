"""``EXPLAIN (ANALYZE, BUFFERS)`` of Sundial's own claim statement over a prepared backlog, for
the backlog, filter and exclusive workloads."""

from __future__ import annotations

import re
from typing import Any

from bench.harness import Environment


def explain_claim(
    env: Environment,
    queue_id: int,
    count: int,
    *,
    exclusive: bool = False,
    filt: str = "{}",
    filter_value: str | None = None,
    filter_values: list[str] | None = None,
    second_key: bool = False,
) -> dict[str, Any]:
    """EXPLAIN (ANALYZE, BUFFERS) of Sundial's own claim statement, rolled back (the keyed form
    when ``filter_value`` is given, as the store runs it for a filter on the queue's
    filter_key; with ``filter_values``, the form for a list of that key's values;
    ``second_key``: the key is the queue's second filter key)."""
    from app.store.sql.claim import Match, messages_claim

    keyed: Match = "any" if filter_values else filter_value is not None
    filtered = filt != "{}" and not keyed  # a filter of the key alone is the keyed form
    sql = messages_claim(
        count=count, exclusive=exclusive, keyed=keyed, filtered=filtered, second_key=second_key
    ).text
    values = ",".join(f'"{v}"' for v in filter_values or [])
    binds = {
        "queue_id": str(queue_id),
        "filter": f"'{filt}'",
        "filter_value": f"'{filter_value}'" if filter_value is not None else "NULL",
        "filter_values": f"'{{{values}}}'",
        "lease_override": "NULL",
        "queue_lease": "30",
        "catalogue_version": "NULL",
        "valid_until": "NULL",
    }
    sql = re.sub(r"(?<!:):(\w+)", lambda m: binds[m.group(1)], sql)
    with env.connect(autocommit=False) as conn:
        rows = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}").fetchall()
        conn.rollback()
    plan = "\n".join(r[0] for r in rows)
    ms = re.search(r"Execution Time: ([\d.]+) ms", plan)
    return {"execution_ms": float(ms.group(1)) if ms else None, "plan": plan}
