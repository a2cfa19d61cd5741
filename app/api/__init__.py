"""The REST API v1 (Litestar + msgspec): see docs/api.md (the contract) and ``/schema``.

The routes live in :mod:`app.api.routes`; :mod:`app.bootstrap.server` mounts them on the server.
"""
