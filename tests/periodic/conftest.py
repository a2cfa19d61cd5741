"""The API's fixtures (tests/api/conftest.py), for the periodic jobs' REST tests."""

from tests.api.conftest import admin, alpha, app, client, queue, settings

__all__ = ["admin", "alpha", "app", "client", "queue", "settings"]
