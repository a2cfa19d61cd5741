"""The REST API v1 (Litestar + msgspec): see docs/api.md (the contract) and ``/schema``."""

from app.api.app import create_app, create_app_from_env

__all__ = ["create_app", "create_app_from_env"]
