"""The service over two pools: each namespace's rows live on its pool, every operation reaches
them there, and the catalogue's map says which pool holds which namespace."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.database import build_service
from app.config import Settings
from app.core import catalogue
from app.core.errors import ConflictError, NotFoundError, ValidationError
from app.core.models import NewMessage, QueueConfig
from app.core.service import QueueService
from app.core.states import State
from app.store.sql.pools import QUEUE_IDS_PER_POOL
from tests.conftest import ADMIN_TOKEN
from tests.helpers import scalar


async def _namespaces(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as conn:
        rows = await conn.execute(sa.text("SELECT name FROM namespaces ORDER BY name"))
        return [row.name for row in rows]


async def test_a_namespace_lives_on_the_pool_it_was_made_on(
    pooled: QueueService, engine: AsyncEngine, engine_b: AsyncEngine
) -> None:
    made = await pooled.create_namespace("far", pool="b")
    near = await pooled.create_namespace("near", pool="default")
    assert (made.pool, near.pool) == ("b", "default")
    assert await _namespaces(engine_b) == ["far"]
    assert await _namespaces(engine) == ["near"]
    # The map is the catalogue's: pool b's own map holds nothing.
    assert await scalar(engine, "SELECT pool FROM namespace_pools WHERE namespace = 'far'") == "b"
    assert await scalar(engine_b, "SELECT count(*) FROM namespace_pools") == 0
    listed = await pooled.list_namespaces()
    assert [(n.name, n.pool) for n in listed] == [("far", "b"), ("near", "default")]


async def test_every_message_operation_acts_on_the_namespaces_pool(
    pooled: QueueService, engine: AsyncEngine, engine_b: AsyncEngine
) -> None:
    await pooled.create_namespace("far", pool="b")
    queue, _ = await pooled.put_queue("far", "q", QueueConfig())
    assert queue.pool == "b"
    await pooled.enqueue("far", "q", [NewMessage(id="m1", payload=b'"x"')])
    [leased] = await pooled.dequeue("far", "q", count=1)
    assert await scalar(engine_b, "SELECT state::text FROM messages WHERE id = 'm1'") == "running"
    assert await scalar(engine, "SELECT count(*) FROM messages") == 0
    await pooled.complete("far", "q", "m1", leased.lease_id)
    detail = await pooled.queue_detail("far", "q")
    assert detail.stats.counts == {State.COMPLETED: 1}
    assert (await pooled.get_message("far", "q", "m1")).state is State.COMPLETED
    assert await pooled.purge_queue("far", "q", ["completed"]) == 1


async def test_queue_ids_are_unique_across_pools(pooled: QueueService) -> None:
    await pooled.create_namespace("near", pool="default")
    await pooled.create_namespace("far", pool="b")
    near, _ = await pooled.put_queue("near", "q", QueueConfig())
    far, _ = await pooled.put_queue("far", "q", QueueConfig())
    assert near.id < QUEUE_IDS_PER_POOL <= far.id < 2 * QUEUE_IDS_PER_POOL


async def test_an_unnamed_namespace_goes_to_the_pool_with_fewest_waiting_messages(
    pooled: QueueService,
) -> None:
    # Both empty: ties go by name, and "b" sorts before "default".
    assert (await pooled.create_namespace("first")).pool == "b"
    await pooled.put_queue("first", "q", QueueConfig())
    await pooled.enqueue("first", "q", [NewMessage(payload=b"1"), NewMessage(payload=b"2")])
    assert (await pooled.create_namespace("second")).pool == "default"
    await pooled.put_queue("second", "q", QueueConfig())
    await pooled.enqueue("second", "q", [NewMessage(payload=b"1")] * 3)
    assert (await pooled.create_namespace("third")).pool == "b"


async def test_an_unknown_pool_is_a_validation_error_naming_the_field(
    pooled: QueueService, engine: AsyncEngine
) -> None:
    with pytest.raises(ValidationError) as info:
        await pooled.create_namespace("ns", pool="nowhere")
    assert info.value.field == "pool"
    assert "b, default" in info.value.message
    assert await scalar(engine, "SELECT count(*) FROM namespace_pools") == 0


async def test_a_name_is_one_namespace_across_pools(pooled: QueueService) -> None:
    await pooled.create_namespace("ns", pool="b")
    with pytest.raises(ConflictError):
        await pooled.create_namespace("ns", pool="default")
    with pytest.raises(ConflictError):
        await pooled.create_namespace("ns", pool="b")


async def test_a_creation_cut_short_leaves_the_name_free(
    pooled: QueueService, engine: AsyncEngine, engine_b: AsyncEngine
) -> None:
    # The name was taken in the catalogue, and the process died before the pool had it.
    async with engine.begin() as conn:
        await conn.execute(sa.text("INSERT INTO namespace_pools VALUES ('ns', 'b', now())"))
    assert await pooled.list_namespaces() == []
    made = await pooled.create_namespace("ns", pool="default")
    assert made.pool == "default"
    assert await _namespaces(engine_b) == []
    assert await scalar(engine, "SELECT pool FROM namespace_pools WHERE namespace = 'ns'") == (
        "default"
    )


async def test_a_namespace_made_again_elsewhere_is_found_by_a_process_that_knew_the_old_pool(
    settings: Settings, pooled: QueueService, engine: AsyncEngine, engine_b: AsyncEngine
) -> None:
    other = build_service({"default": engine, "b": engine_b}, settings)  # another process
    await pooled.create_namespace("ns", pool="b")
    await pooled.put_queue("ns", "q", QueueConfig())
    await other.enqueue("ns", "q", [NewMessage(id="before")])  # `other` now maps ns to b
    await pooled.delete_namespace("ns")
    await pooled.create_namespace("ns", pool="default")
    await pooled.put_queue("ns", "q", QueueConfig())
    await other.enqueue("ns", "q", [NewMessage(id="after")])
    assert await scalar(engine, "SELECT id FROM messages") == "after"
    assert await scalar(engine_b, "SELECT count(*) FROM messages") == 0


async def test_a_token_works_for_its_namespace_on_its_pool_only(pooled: QueueService) -> None:
    await pooled.create_namespace("far", pool="b")
    await pooled.create_namespace("near", pool="default")
    issued = await pooled.issue_token("far")
    found = await pooled.authenticate(issued.secret, "far")
    assert found is not None
    assert found.namespace == "far"
    # Without a namespace (the dashboard's sign-in), every pool is asked.
    assert (await pooled.authenticate(issued.secret)) == found
    # Asked about another namespace, the token is still the far one's: authorization refuses it.
    other = await pooled.authenticate(issued.secret, "near")
    assert other is None or not other.may_access("near")
    await pooled.revoke_token("far", issued.token.id)
    assert await pooled.authenticate(issued.secret, "far") is None
    assert (await pooled.authenticate(ADMIN_TOKEN)) is not None


async def test_a_request_acts_on_one_pool_and_its_lookups_are_confirmed_there(
    settings: Settings, pooled: QueueService, engine: AsyncEngine, engine_b: AsyncEngine
) -> None:
    """A request that answers from its cached lookups alone (a dequeue from a paused queue)
    confirms them on the pool they came from: a token of pool b revoked by another process
    stops this process's next request at once."""
    await pooled.create_namespace("far", pool="b")
    await pooled.put_queue("far", "q", QueueConfig(dequeue_paused=True))
    issued = await pooled.issue_token("far")

    async def authorize() -> None:
        if await pooled.authenticate(issued.secret, "far") is None:
            raise NotFoundError("unknown token")

    async def request() -> None:
        catalogue.open_view(renew=authorize)
        await authorize()
        assert await pooled.dequeue("far", "q") == []

    await request()
    await request()  # from the lookups this process keeps
    other = build_service({"default": engine, "b": engine_b}, settings)
    await other.revoke_token("far", issued.token.id)
    with pytest.raises(NotFoundError, match="unknown token"):
        await request()


async def test_deleting_a_namespace_frees_its_name_in_the_catalogue(
    pooled: QueueService, engine: AsyncEngine
) -> None:
    await pooled.create_namespace("ns", pool="b")
    await pooled.delete_namespace("ns")
    assert await scalar(engine, "SELECT count(*) FROM namespace_pools") == 0
    with pytest.raises(NotFoundError):
        await pooled.delete_namespace("ns")
    assert (await pooled.create_namespace("ns", pool="default")).pool == "default"
