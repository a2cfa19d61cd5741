"""The rule of a failed attempt, written once for every statement that applies it (a client's
fail, one or many, and the scheduler's release of an expired lease): the SQL of
:func:`app.core.states.retry_target` and, through ``sundial_retry_delay`` (migration 0001),
:func:`app.core.states.backoff_seconds`. tests/store/test_retry_rule.py runs those statements
across attempts, limits and delays and holds their outcome to those two functions."""

from __future__ import annotations

from app.core.states import State


def retry_or_dead_letter(*, attempts_left: str, retry_delay: str, error: str) -> str:
    """The SET clause of a failed attempt (fail, batch fail, lease expiry): the rule of
    ``states.retry_target``: errored when attempts are used up, else invisible for the retry
    delay, or pending when the delay is zero.

    Args:
        attempts_left: SQL that is true while the message may get another lease.
        retry_delay: SQL for the delay in seconds before the retry.
        error: SQL for the new ``last_error``.
    """
    return f"""
    SET state = CASE WHEN NOT ({attempts_left}) THEN '{State.ERRORED}'
                     WHEN {retry_delay} > 0 THEN '{State.INVISIBLE}'
                     ELSE '{State.PENDING}' END::message_state,
        visible_at = CASE WHEN {attempts_left}
                          THEN now() + make_interval(secs => {retry_delay})
                          ELSE m.visible_at END,
        finished_at = CASE WHEN {attempts_left} THEN NULL ELSE now() END,
        lease_expires_at = NULL,
        last_error = {error},
        updated_at = now()
    """


# A client's fail: the request's retry_delay_seconds, else the queue's exponential backoff
# (sundial_retry_delay), with the per-message max_attempts override.
CLIENT_FAIL = {
    "attempts_left": (
        "m.attempts < coalesce(m.max_attempts, CAST(:queue_max_attempts AS integer))"
    ),
    "retry_delay": """coalesce(CAST(:retry_delay AS double precision),
             sundial_retry_delay(m.attempts, CAST(:queue_retry_delay AS integer),
                                 CAST(:queue_retry_delay_max AS integer)))""",
}

# The scheduler's release of an expired lease: the same rule, from the configuration of the
# message's queue (``q``, joined by the statement), never a request's delay.
LEASE_EXPIRY = {
    "attempts_left": "m.attempts < coalesce(m.max_attempts, q.max_attempts)",
    "retry_delay": (
        "sundial_retry_delay(m.attempts, q.retry_delay_seconds, q.retry_delay_max_seconds)"
    ),
}
