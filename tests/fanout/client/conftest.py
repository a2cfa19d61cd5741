"""The client tests' fixtures: one real server over a real socket, a namespace and its token."""

from tests.client.conftest import aclient, admin, client, namespace, server, sundial, token

__all__ = ["aclient", "admin", "client", "namespace", "server", "sundial", "token"]
