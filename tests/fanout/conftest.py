"""The fan-out tests use the API tests' fixtures (the app over ASGI on this test's database)."""

from tests.api.conftest import admin, alpha, app, client, settings

__all__ = ["admin", "alpha", "app", "client", "settings"]
