"""Temporary: the names of :mod:`app.store.sql` that two importers outside this change still
take from here, :mod:`app.store.notifications` and :mod:`app.scheduler.runner` (both being
rewired in issue #16). Delete this module once they import :mod:`app.store.sql.listeners` and
:mod:`app.store.sql.leadership`; nothing else may import it."""

from __future__ import annotations

from app.store.sql.leadership import LEADER_FENCE, LEADER_TRY_LOCK, SCHEDULER_NODE_HEARTBEAT
from app.store.sql.listeners import LISTENER_REGISTER, LISTENER_UNREGISTER, NOTIFY_CHANNEL

__all__ = [
    "LEADER_FENCE",
    "LEADER_TRY_LOCK",
    "LISTENER_REGISTER",
    "LISTENER_UNREGISTER",
    "NOTIFY_CHANNEL",
    "SCHEDULER_NODE_HEARTBEAT",
]
