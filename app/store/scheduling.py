"""Everything the scheduler (:mod:`app.scheduler`) does to the database, in one place: contending
for leadership (:mod:`app.store.leadership`) and, while leading, the maintenance passes
(:mod:`app.store.maintenance`). The composition root hands this module to the scheduler, which
sees it through its own port (``app.scheduler.runner.Maintenance``)."""

from __future__ import annotations

from app.store.leadership import fence_stalled_leader as fence_stalled_leader
from app.store.leadership import heartbeat as heartbeat
from app.store.leadership import try_lead as try_lead
from app.store.maintenance import analyze_if_stale as analyze_if_stale
from app.store.maintenance import archive_finished as archive_finished
from app.store.maintenance import prune_listeners as prune_listeners
from app.store.maintenance import tick as tick
from app.store.retention import forget_idle_token_rates as forget_idle_token_rates
from app.store.retention import prune_history as prune_history
