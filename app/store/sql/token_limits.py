"""The per-token rate limits' statements (migration 0018): one per request of a limited token.

A token may carry ``read_rate`` and ``write_rate``: requests per second of each kind
(:mod:`app.web.token_limits` says which requests are which). The count is the generic cell rate
algorithm (GCRA) over ``token_rate_limits``, one row per token and kind, shared by every server
process on the database:

- ``step`` = 1 / rate: the time one request "costs";
- ``tat``, the theoretical arrival time: when the token's allowance would be whole again;
- a request at ``now`` is allowed when ``greatest(tat, now) + step - now <= burst``, where
  ``burst`` = ``greatest(1 second, step)``: at most one second's worth of requests at once (and
  always one), then one every ``step``; an allowed request moves ``tat`` on by ``step``, a
  refused one leaves it (refused requests cost nothing), and may retry after
  ``tat + step - burst - now``;
- a changed limit (another ``step``) starts afresh: a full allowance under the new limit, so a
  raised limit is not held back by what the old one counted.

One ``INSERT … ON CONFLICT DO UPDATE``: the row's lock orders concurrent requests of one token
in every process, each sees the ``tat`` the previous one left. The limit is read from ``tokens``
by this statement itself, so a change of it counts from the next request on whatever a process
remembers of the token; a token without a limit of this kind (or gone) inserts nothing.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import TextClause, text

# Count one request of kind :kind ('read' or 'write') of token :token_id. Returns one row while
# the token exists: ``allowed`` (true also when it has no limit of this kind) and, when refused,
# ``retry_after`` (seconds). In the DO UPDATE, ``r`` is the row as it was and EXCLUDED carries
# this request's ``step`` (1 / the token's current rate).
TOKEN_RATE_HIT: Final[TextClause] = text(
    """
    WITH token AS (
        SELECT t.id,
               make_interval(secs => 1.0 / CASE WHEN :kind = 'read'
                                                THEN t.read_rate ELSE t.write_rate END) AS step
        FROM tokens t
        WHERE t.id = CAST(:token_id AS uuid)
    ), hit AS (
        INSERT INTO token_rate_limits AS r (token_id, kind, tat, step, allowed)
        SELECT token.id, :kind, now() + token.step, token.step, true
        FROM token WHERE token.step IS NOT NULL
        ON CONFLICT (token_id, kind) DO UPDATE SET
            allowed = CASE WHEN r.step = EXCLUDED.step THEN greatest(r.tat, now()) ELSE now() END
                      + EXCLUDED.step - now() <= greatest(interval '1 second', EXCLUDED.step),
            tat = CASE
                WHEN r.step <> EXCLUDED.step THEN now() + EXCLUDED.step
                WHEN greatest(r.tat, now()) + EXCLUDED.step - now()
                     <= greatest(interval '1 second', EXCLUDED.step)
                THEN greatest(r.tat, now()) + EXCLUDED.step
                ELSE r.tat END,
            step = EXCLUDED.step
        RETURNING r.allowed, r.tat, r.step
    )
    SELECT coalesce(hit.allowed, true) AS allowed,
           extract(epoch FROM hit.tat + hit.step - greatest(interval '1 second', hit.step)
                              - now())::float8 AS retry_after
    FROM token LEFT JOIN hit ON true
    """
)

# The counts that mean nothing any more: their allowance is whole again (a missing row is the
# same), or their token is gone. Run by the scheduler's cleanup.
TOKEN_RATES_FORGET_IDLE: Final[TextClause] = text(
    "DELETE FROM token_rate_limits WHERE tat < now() - interval '1 minute'"
)
