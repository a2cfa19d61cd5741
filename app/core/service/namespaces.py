"""Namespaces, the tenants that hold queues: creating, listing and deleting them."""

from __future__ import annotations

from app.core import validation
from app.core.errors import NotFoundError
from app.core.models import Namespace
from app.core.service.base import ServiceBase
from app.core.service.identifiers import could_exist


class Namespaces(ServiceBase):
    """The operations on namespaces (the admin plane)."""

    async def create_namespace(
        self, name: str, description: str = "", pool: str | None = None
    ) -> Namespace:
        """Create a namespace on ``pool``, or on the least loaded pool (ConflictError when it
        exists; ValidationError naming ``pool`` when no such pool is configured)."""
        validation.name("name", name)
        validation.text("description", description)
        if pool is not None:
            validation.name("pool", pool)
        return await self.store.create_namespace(name, description, pool)

    async def list_namespaces(self) -> list[Namespace]:
        """Every namespace."""
        return await self.store.list_namespaces()

    async def delete_namespace(self, name: str) -> None:
        """Delete a namespace with everything in it."""
        if not could_exist(validation.NAME_PATTERN, name) or not await self.store.delete_namespace(
            name
        ):
            raise NotFoundError(f"namespace {name!r} does not exist", namespace=name)
