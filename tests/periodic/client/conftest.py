"""The client tests' fixtures (tests/client/conftest.py): a real server over a real socket."""

from tests.client.conftest import aclient, admin, client, namespace, q, server, sundial, token

__all__ = ["aclient", "admin", "client", "namespace", "q", "server", "sundial", "token"]
