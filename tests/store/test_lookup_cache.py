"""The token and queue lookup cache (app/store/lookups.py) and the catalogue guard that keeps
what it serves true (app/core/catalogue.py), through the store and the service.

Two services on one database stand for two server processes. A request is a task with its own
view of the catalogue, as the HTTP API opens one; the database is real.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core import catalogue
from app.core.errors import CatalogueChangedError, NotFoundError, QueuePausedError
from app.core.models import NewMessage, Queue, QueueConfig, Token
from app.core.service import QueueService
from app.core.service.tokens import hash_secret
from app.core.validation import Limits
from app.store.lookups import LookupCache
from app.store.postgres import PostgresStore
from tests.helpers import execute

T = TypeVar("T")


class Revoked(Exception):
    """The caller's token no longer authenticates (the API answers 401)."""


def cached_service(engine: AsyncEngine, ttl: float = 60.0) -> QueueService:
    return QueueService(PostgresStore(engine, ttl), limits=Limits())


async def as_request(
    service: QueueService, secret: str, operation: Callable[[], Awaitable[T]]
) -> T:
    """Run ``operation`` as the HTTP API runs a request: in a task of its own, with a view of
    the catalogue whose renewal authenticates ``secret`` again."""

    async def authorize() -> None:
        if await service.authenticate(secret) is None:
            raise Revoked

    async def request() -> T:
        catalogue.open_view(renew=authorize)
        await authorize()
        return await operation()

    return await asyncio.create_task(request())


def counting_statements(engine: AsyncEngine) -> Callable[[], int]:
    """How many statements SQLAlchemy has run on the engine since this call (the lookups run
    there; the hot path's statements run on the driver connection itself)."""
    count = 0

    def before(*_: object) -> None:
        nonlocal count
        count += 1

    event.listen(engine.sync_engine, "before_cursor_execute", before)
    return lambda: count


async def setup(service: QueueService) -> str:
    await service.create_namespace("ns")
    await service.put_queue("ns", "q", QueueConfig())
    return (await service.issue_token("ns")).secret


async def test_a_token_revoked_in_another_process_fails_its_next_request(engine):
    here, elsewhere = cached_service(engine), cached_service(engine)
    secret = await setup(here)
    enqueue = lambda: elsewhere.enqueue("ns", "q", [NewMessage()])  # noqa: E731
    await as_request(elsewhere, secret, enqueue)  # token and queue now cached there
    assert elsewhere.store.lookups.token(hash_secret(secret)) is not None
    await here.revoke_token("ns", (await here.list_tokens("ns"))[0].id)
    with pytest.raises(Revoked):
        await as_request(elsewhere, secret, enqueue)
    assert (await here.queue_detail("ns", "q")).stats.counts.get("pending") == 1  # nothing added


async def test_a_cached_token_and_queue_save_their_lookups(engine):
    service = cached_service(engine)
    secret = await setup(service)
    await as_request(service, secret, lambda: service.enqueue("ns", "q", [NewMessage()]))
    # Behind the cache's back, without a catalogue change (as no real change can be made): the
    # cached entries still answer, and the enqueue runs its one statement only.
    await execute(engine, "ALTER TABLE tokens DISABLE TRIGGER USER")
    await execute(engine, "DELETE FROM tokens WHERE secret_hash = :h", h=hash_secret(secret))
    await execute(engine, "ALTER TABLE tokens ENABLE TRIGGER USER")
    statements = counting_statements(service.store.engine)  # type: ignore[attr-defined]
    await as_request(service, secret, lambda: service.enqueue("ns", "q", [NewMessage()]))
    assert statements() == 0  # no lookup


async def test_a_cached_dequeue_runs_its_claim_only(engine):
    """The plan of a dequeue is made from cached lookups and confirmed by the guarded claim
    that runs it: no statement of its own to check them first."""
    service = cached_service(engine)
    secret = await setup(service)
    await as_request(service, secret, lambda: service.enqueue("ns", "q", [NewMessage()] * 2))
    statements = counting_statements(service.store.engine)  # type: ignore[attr-defined]
    leased = await as_request(service, secret, lambda: service.dequeue("ns", "q"))
    assert len(leased) == 1
    assert statements() == 0  # no lookup, no catalogue check: the claim ran on the driver


async def test_a_dequeue_planned_before_a_pause_elsewhere_leases_nothing(engine):
    here, elsewhere = cached_service(engine), cached_service(engine)
    secret = await setup(here)
    await as_request(here, secret, lambda: here.enqueue("ns", "q", [NewMessage()]))

    async def plan_then_dequeue() -> int:
        plan = await elsewhere.plan_dequeue("ns", "q")  # from lookups, unconfirmed
        await here.update_queue("ns", "q", {"dequeue_paused": True})
        return len(await elsewhere.dequeue_planned(plan))

    assert await as_request(elsewhere, secret, plan_then_dequeue) == 0
    assert (await here.queue_detail("ns", "q")).stats.counts.get("pending") == 1


async def test_a_queue_paused_in_another_process_refuses_the_next_enqueue(engine):
    here, elsewhere = cached_service(engine), cached_service(engine)
    secret = await setup(here)
    enqueue = lambda: elsewhere.enqueue("ns", "q", [NewMessage()])  # noqa: E731
    await as_request(elsewhere, secret, enqueue)
    await here.update_queue("ns", "q", {"enqueue_paused": True})
    with pytest.raises(QueuePausedError):
        await as_request(elsewhere, secret, enqueue)


async def test_a_queue_recreated_in_another_process_receives_the_next_enqueue(engine):
    here, elsewhere = cached_service(engine), cached_service(engine)
    secret = await setup(here)
    old = await here.get_queue_or_404("ns", "q")
    await as_request(elsewhere, secret, lambda: elsewhere.enqueue("ns", "q", [NewMessage()]))
    await here.delete_queue("ns", "q")
    await here.put_queue("ns", "q", QueueConfig(max_attempts=7))
    [outcome] = await as_request(
        elsewhere, secret, lambda: elsewhere.enqueue("ns", "q", [NewMessage(id="m")])
    )
    assert outcome.created
    new = await here.get_queue_or_404("ns", "q")
    assert new.id != old.id
    assert (await here.get_message("ns", "q", "m")).max_attempts == 7


async def test_a_queue_deleted_in_another_process_is_not_found(engine):
    here, elsewhere = cached_service(engine), cached_service(engine)
    secret = await setup(here)
    enqueue = lambda: elsewhere.enqueue("ns", "q", [NewMessage(id="m")])  # noqa: E731
    await as_request(elsewhere, secret, enqueue)
    await here.delete_queue("ns", "q")
    with pytest.raises(NotFoundError):
        await as_request(elsewhere, secret, enqueue)


async def test_a_cached_token_that_expired_by_the_database_clock_is_refused(engine):
    service = cached_service(engine)
    await setup(service)
    issued = await service.issue_token("ns", expires_at=datetime.now(UTC) + timedelta(hours=1))
    lease = lambda: service.dequeue("ns", "q")  # noqa: E731
    await as_request(service, issued.secret, lease)  # cached, valid for an hour
    # Expire it in the database only (no catalogue change, so the cache is not told).
    await execute(engine, "ALTER TABLE tokens DISABLE TRIGGER USER")
    await execute(engine, "UPDATE tokens SET expires_at = now() - interval '1 second'")
    await execute(engine, "ALTER TABLE tokens ENABLE TRIGGER USER")
    cached = service.store.lookups.token(hash_secret(issued.secret))  # type: ignore[attr-defined]
    assert cached is not None
    # The cache still holds the old expiry; the statement checks it against the database's clock.
    object.__setattr__(cached, "expires_at", datetime.now(UTC) - timedelta(seconds=1))
    with pytest.raises(Revoked):
        await as_request(service, issued.secret, lease)


class ChangingStore(PostgresStore):
    """Another process changes the catalogue between this request's token and queue lookups."""

    async def get_queue(self, namespace: str, name: str) -> Queue | None:
        await execute(self.engine, "UPDATE catalogue_version SET version = version + 1")
        return await super().get_queue(namespace, name)


async def test_a_request_whose_catalogue_keeps_changing_gives_up_with_nothing_applied(engine):
    service = cached_service(engine)
    secret = await setup(service)
    changing = QueueService(ChangingStore(engine, 60.0), limits=Limits())
    with pytest.raises(CatalogueChangedError):
        await as_request(changing, secret, lambda: changing.enqueue("ns", "q", [NewMessage()]))
    assert (await service.queue_detail("ns", "q")).stats.counts == {}


async def test_outside_a_request_view_nothing_is_served_from_memory(engine):
    service = cached_service(engine)
    secret = await setup(service)
    assert await service.authenticate(secret) is not None
    assert service.store.lookups.token(hash_secret(secret)) is None  # type: ignore[attr-defined]
    await service.revoke_token("ns", (await service.list_tokens("ns"))[0].id)
    assert await service.authenticate(secret) is None


async def test_unknown_tokens_and_queues_are_never_cached(engine):
    here, elsewhere = cached_service(engine), cached_service(engine)
    secret = await setup(here)
    assert await as_request(elsewhere, secret, lambda: elsewhere.store.get_queue("ns", "p")) is None
    await here.put_queue("ns", "p", QueueConfig())
    # Created elsewhere a moment ago: usable at once.
    found = await as_request(elsewhere, secret, lambda: elsewhere.store.get_queue("ns", "p"))
    assert found is not None


def token(name: str) -> Token:
    return Token(name, "ns", "", datetime.now(UTC), None)


def test_a_newer_version_empties_the_cache_and_an_older_one_is_not_kept():
    cache = LookupCache(60.0)
    cache.remember_token(b"a", token("a"), 5)
    cache.remember_token(b"b", token("b"), 6)
    assert cache.token(b"a") is None
    assert cache.token(b"b") is not None
    cache.remember_token(b"c", token("c"), 5)
    assert cache.token(b"c") is None
    assert cache.version == 6


def test_a_zero_ttl_turns_the_cache_off():
    cache = LookupCache(0.0)
    cache.remember_token(b"h", token("t"), 1)
    assert cache.token(b"h") is None
    assert not cache.enabled
