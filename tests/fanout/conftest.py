"""The fan-out tests use the API tests' fixtures (the app over ASGI on this test's database),
and the dashboard tests' visitor, signed in or not (tests/dashboard/conftest.py)."""

from tests.api.conftest import admin, alpha, app, client, settings
from tests.dashboard.conftest import browser, signed_in

__all__ = ["admin", "alpha", "app", "browser", "client", "settings", "signed_in"]
