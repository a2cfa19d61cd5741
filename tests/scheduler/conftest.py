"""The API's fixtures (tests/api/conftest.py), for the scheduler tests that watch what a client
sees: a long poll woken by expiry, a complete repeated after the archive."""

from tests.api.conftest import admin, alpha, app, client, settings

__all__ = ["admin", "alpha", "app", "client", "settings"]
