"""The REST API v1 (Litestar + msgspec): see /work/shared/spec/API.md and ``/schema``."""

from app.api.app import create_app, create_app_from_env

__all__ = ["create_app", "create_app_from_env"]
