"""Fixtures of the observability tests: the app on this test's database and its callers, as the
API tests have them (tests/api/conftest.py), for the tests that scrape ``GET /metrics`` of a
running app after real traffic."""

from tests.api.conftest import admin, alpha, anonymous, app, client, queue, settings

__all__ = ["admin", "alpha", "anonymous", "app", "client", "queue", "settings"]
