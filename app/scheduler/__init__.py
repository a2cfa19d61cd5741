"""The background scheduler: timing and leadership only; the work on the database is the
store's, handed in by the composition root (:class:`app.scheduler.runner.Maintenance`)."""

from app.scheduler.runner import Scheduler

__all__ = ["Scheduler"]
