"""The background scheduler: timing and leadership only; the work is in app.store.maintenance."""

from app.scheduler.runner import Scheduler

__all__ = ["Scheduler"]
