"""The token and queue lookup cache (app/store/lookups.py), through the store and the service.

Time is the cache's injected timer, moved by hand; the database is real.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import NotFoundError
from app.core.models import NewMessage, QueueConfig, Token
from app.core.service import QueueService, hash_secret
from app.core.validation import Limits
from app.store.lookups import LookupCache
from app.store.postgres import PostgresStore
from tests.helpers import execute


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def cached_service(engine: AsyncEngine, clock: Clock, ttl: float = 1.0) -> QueueService:
    store = PostgresStore(engine)
    store.lookups = LookupCache(ttl, timer=clock)
    return QueueService(store, limits=Limits())


async def test_a_token_revoked_through_this_process_stops_working_at_once(engine):
    service = cached_service(engine, Clock())
    await service.create_namespace("ns")
    issued = await service.issue_token("ns")
    assert await service.authenticate(issued.secret) is not None  # now cached
    await service.revoke_token("ns", issued.token.id)
    assert await service.authenticate(issued.secret) is None


async def test_another_process_sees_a_revocation_when_its_entry_expires(engine):
    clock = Clock()
    here, elsewhere = cached_service(engine, clock), cached_service(engine, clock)
    await here.create_namespace("ns")
    issued = await here.issue_token("ns")
    assert await elsewhere.authenticate(issued.secret) is not None
    await here.revoke_token("ns", issued.token.id)
    clock.now += 0.5
    assert await elsewhere.authenticate(issued.secret) is not None  # within the 1 s ttl
    clock.now += 0.6
    assert await elsewhere.authenticate(issued.secret) is None


async def test_a_cached_token_saves_the_lookup(engine):
    service = cached_service(engine, Clock())
    await service.create_namespace("ns")
    issued = await service.issue_token("ns")
    assert await service.authenticate(issued.secret) is not None
    # Behind the cache's back (as another process would): the cached entry still answers.
    await execute(engine, "DELETE FROM tokens WHERE secret_hash = :h", h=hash_secret(issued.secret))
    assert await service.authenticate(issued.secret) is not None


async def test_unknown_tokens_and_queues_are_never_cached(engine):
    clock = Clock()
    here, elsewhere = cached_service(engine, clock), cached_service(engine, clock)
    await here.create_namespace("ns")
    assert await elsewhere.authenticate("sdl_" + "x" * 43) is None
    assert await elsewhere.store.get_queue("ns", "q") is None
    await here.put_queue("ns", "q", QueueConfig())
    # Created elsewhere a moment ago: usable at once.
    assert await elsewhere.store.get_queue("ns", "q") is not None


async def test_a_queue_paused_through_this_process_refuses_at_once(engine):
    clock = Clock()
    service = cached_service(engine, clock)
    await service.create_namespace("ns")
    await service.put_queue("ns", "q", QueueConfig())
    assert not (await service.get_queue_or_404("ns", "q")).config.enqueue_paused
    await service.update_queue("ns", "q", {"enqueue_paused": True})
    assert (await service.get_queue_or_404("ns", "q")).config.enqueue_paused


async def test_a_queue_deleted_elsewhere_gives_not_found_not_an_error(engine):
    clock = Clock()
    here, elsewhere = cached_service(engine, clock), cached_service(engine, clock)
    await here.create_namespace("ns")
    await here.put_queue("ns", "q", QueueConfig())
    await elsewhere.get_queue_or_404("ns", "q")  # cached there
    await here.delete_queue("ns", "q")
    with pytest.raises(NotFoundError):
        await elsewhere.enqueue("ns", "q", [NewMessage(id="m")])


def test_a_token_expiring_within_the_ttl_is_not_kept():
    cache = LookupCache(5.0, timer=Clock())
    soon = Token("t", "ns", "", datetime.now(UTC), datetime.now(UTC) + timedelta(seconds=2))
    later = Token("u", "ns", "", datetime.now(UTC), datetime.now(UTC) + timedelta(hours=1))
    cache.remember_token(b"soon", soon)
    cache.remember_token(b"later", later)
    assert cache.token(b"soon") is None
    assert cache.token(b"later") == later


def test_a_zero_ttl_turns_the_cache_off():
    cache = LookupCache(0.0)
    cache.remember_token(b"h", Token("t", "ns", "", datetime.now(UTC), None))
    assert cache.token(b"h") is None
