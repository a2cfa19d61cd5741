"""The admin dashboard: web pages under ``/dashboard`` for people, over the queue core."""

from app.dashboard.plugin import DashboardPlugin

__all__ = ["DashboardPlugin"]
