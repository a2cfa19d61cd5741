"""Running an operation again when the catalogue changed under it (:mod:`app.core.catalogue`).

A token or queue an operation looked up may change before its statement runs; that statement
then applies nothing and raises :class:`CatalogueChangedError`, so running the operation again,
after the caller is authenticated again, is safe.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from app.core import catalogue
from app.core.errors import CatalogueChangedError
from app.core.service.base import ServiceBase

S = TypeVar("S", bound=ServiceBase)
P = ParamSpec("P")
R = TypeVar("R")


def again_if_catalogue_changed(
    operation: Callable[Concatenate[S, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """Run an operation again when a token or queue it looked up changed before its statement
    ran (:class:`CatalogueChangedError`: that statement applied nothing, so running it again is
    safe), after the caller is authenticated again (:func:`catalogue.renew`); at most
    ``catalogue.ATTEMPTS`` times. An operation that answered from its lookups alone has them
    confirmed current before it answers."""
    return _again(operation, confirm=True)


def replanned_if_catalogue_changed(
    operation: Callable[Concatenate[S, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """As :func:`again_if_catalogue_changed`, for an operation that makes a plan out of its
    lookups and answers nothing by itself: whatever runs the plan confirms them (its guarded
    statement, or a check of its own), so the plan does not spend a statement on it."""
    return _again(operation, confirm=False)


def _again(
    operation: Callable[Concatenate[S, P], Coroutine[Any, Any, R]], *, confirm: bool
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    async def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        for attempt in range(1, catalogue.ATTEMPTS + 1):
            try:
                result = await operation(self, *args, **kwargs)
                if confirm:
                    await self.store.confirm_lookups()
                return result
            except CatalogueChangedError:
                if attempt == catalogue.ATTEMPTS:
                    raise
                await catalogue.renew()
        raise AssertionError("unreachable")

    functools.update_wrapper(run, operation)
    return run
