"""The dashboard tests' fixtures (tests/dashboard/conftest.py)."""

from tests.dashboard.conftest import app, browser, client, settings, signed_in

__all__ = ["app", "browser", "client", "settings", "signed_in"]
