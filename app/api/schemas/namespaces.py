"""The bodies of the namespace endpoints (admin plane): create, list."""

from __future__ import annotations

from datetime import datetime

from app.api.schemas.common import In, Out
from app.core.models import Namespace


class NamespaceCreate(In):
    """``POST /v1/namespaces``."""

    name: str
    description: str = ""


class NamespaceOut(Out):
    """A namespace."""

    name: str
    description: str
    created_at: datetime

    @classmethod
    def of(cls, namespace: Namespace) -> NamespaceOut:
        """From the core model."""
        return cls(namespace.name, namespace.description, namespace.created_at)


class NamespaceList(Out):
    """``GET /v1/namespaces``."""

    namespaces: list[NamespaceOut]
