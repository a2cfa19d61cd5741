"""Moving a namespace from one pool to another (docs/adr/0015-namespaces-on-pools.md): what
arrives, what stays, and what a request sees while it happens."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import ConflictError, NamespaceMovingError, NotFoundError, ValidationError
from app.core.models import NewMessage, QueueConfig
from app.core.service import QueueService
from app.core.states import State
from app.database_url import psycopg_dsn
from app.store import maintenance
from app.store.moves import NamespaceMover
from tests.helpers import execute, fetch, scalar

COLUMNS = (
    "queue_id, id, seq, priority, state::text, payload, metadata, exclusive_value, filter_value,"
    " attempts, max_attempts, lease_seconds, lease_id, lease_expires_at, visible_at, expires_at,"
    " enqueued_at, updated_at, first_leased_at, leased_at, finished_at, last_error"
)
TIMEOUT = 30.0


@pytest.fixture
def mover(database_url: str, pool_b_url: str) -> NamespaceMover:
    return NamespaceMover({"default": database_url, "b": pool_b_url})


async def _rows(engine: AsyncEngine) -> list[dict]:
    return await fetch(engine, f"SELECT {COLUMNS} FROM messages ORDER BY queue_id, id")


async def _namespace_with_everything(service: QueueService) -> str:
    """Namespace ``ns`` on the default pool: a queue with messages in every state, an
    exclusive queue with a value running, and a token; returns the running lease of ``run``."""
    await service.create_namespace("ns", "to be moved", pool="default")
    await service.put_queue("ns", "q", QueueConfig(max_attempts=1))
    await service.put_queue("ns", "x", QueueConfig(kind="exclusive", exclusive_key="k"))
    await service.enqueue(
        "ns",
        "q",
        [
            NewMessage(id="run", priority=1, payload=b'{"n": 1}', metadata={"a": "b"}),
            NewMessage(id="done", priority=2),
            NewMessage(id="dead", priority=3),
            NewMessage(id="wait", priority=4),
            NewMessage(id="later", delay_seconds=3600),
        ],
    )
    [run] = await service.dequeue("ns", "q")
    [done] = await service.dequeue("ns", "q")
    await service.complete("ns", "q", "done", done.lease_id)
    [dead] = await service.dequeue("ns", "q")
    await service.fail("ns", "q", "dead", dead.lease_id, error="boom")
    await service.enqueue(
        "ns", "x", [NewMessage(id=f"x{i}", metadata={"k": "v"}) for i in range(2)]
    )
    await service.dequeue("ns", "x")
    return run.lease_id


async def test_a_move_carries_every_message_queue_and_token_as_they_were(
    pooled: QueueService, mover: NamespaceMover, engine: AsyncEngine, engine_b: AsyncEngine
) -> None:
    lease = await _namespace_with_everything(pooled)
    issued = await pooled.issue_token("ns")
    # What the SQS door keeps moves too: an access key (its secret sealed), a queue's SQS
    # attributes and tags, and its dead-letter queue.
    access_key = await pooled.issue_access_key("ns", "sqs")
    sqs = {"attributes": {"ReceiveMessageWaitTimeSeconds": "5"}, "tags": {"team": "a"}}
    config = QueueConfig(dead_letter_queue="q")
    assert await pooled.create_queue("ns", "with-sqs", config, sqs) is not None
    before = await _rows(engine)
    queues_before = await fetch(engine, "SELECT * FROM queues ORDER BY id")

    report = await mover.move("ns", "b")

    assert report is not None
    assert (report.source, report.target, report.copied) == ("default", "b", len(before))
    assert await _rows(engine_b) == before
    assert await fetch(engine_b, "SELECT * FROM queues ORDER BY id") == queues_before
    assert await _rows(engine) == []
    assert await scalar(engine, "SELECT count(*) FROM namespaces") == 0
    assert await scalar(engine, "SELECT pool FROM namespace_pools WHERE namespace = 'ns'") == "b"
    assert await scalar(engine, "SELECT count(*) FROM namespace_moves") == 0
    # Nothing of the move is left behind on the source: no log, no trigger.
    assert await scalar(engine, "SELECT count(*) FROM namespace_move_changes") == 0
    assert (
        await scalar(
            engine, "SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'messages_move_log%'"
        )
        == 0
    )
    # It serves from the target, leases, tokens and ids included.
    assert (await pooled.authenticate(issued.secret, "ns")) is not None
    assert access_key.token.access_key_id is not None
    found = await pooled.access_key_secret(access_key.token.access_key_id)
    assert found is not None
    assert found[1] == access_key.secret
    moved = await pooled.get_queue_or_404("ns", "with-sqs")
    assert (moved.sqs, moved.config.dead_letter_queue, moved.pool) == (sqs, "q", "b")
    [again] = await pooled.enqueue("ns", "q", [NewMessage(id="done")])
    assert not again.created  # the id still names the message that moved
    done = await pooled.complete("ns", "q", "run", lease)
    assert done.state is State.COMPLETED
    [waiting] = await pooled.dequeue("ns", "q")
    assert waiting.id == "wait"
    assert await pooled.dequeue("ns", "x") == []  # x0 still runs: x1 waits for its value
    # Messages numbered on the target sort after the ones it received at equal priority.
    await pooled.enqueue("ns", "q", [NewMessage(id="new", priority=4)])
    seqs = await fetch(engine_b, "SELECT id, seq FROM messages WHERE id IN ('wait', 'new')")
    assert {r["id"]: r["seq"] for r in seqs}["new"] > {r["id"]: r["seq"] for r in seqs}["wait"]
    assert (await pooled.queue_detail("ns", "q")).stats.counts[State.COMPLETED] == 2


async def test_changes_made_during_the_copy_arrive(
    pooled: QueueService, database_url: str, pool_b_url: str, engine_b: AsyncEngine
) -> None:
    """Every phase of the move lets the namespace change on its source until the freeze: the
    changes made at the start of the copy and before the freeze all reach the target."""
    await pooled.create_namespace("ns", pool="default")
    await pooled.put_queue("ns", "q", QueueConfig())
    await pooled.enqueue("ns", "q", [NewMessage(id="a"), NewMessage(id="b")])

    async def change(phase: str) -> None:
        if phase == "copying":
            await pooled.enqueue("ns", "q", [NewMessage(id="c")])
            [leased] = await pooled.dequeue("ns", "q")
            await pooled.complete("ns", "q", leased.id, leased.lease_id)
            await pooled.put_queue("ns", "new", QueueConfig(lease_seconds=77))
            await pooled.enqueue("ns", "new", [NewMessage(id="n")])

    mover = NamespaceMover({"default": database_url, "b": pool_b_url}, on_phase=change)
    report = await mover.move("ns", "b")
    assert report is not None
    states = await fetch(engine_b, "SELECT id, state::text FROM messages ORDER BY id")
    assert {r["id"]: r["state"] for r in states} == {
        "a": "completed",
        "b": "pending",
        "c": "pending",
        "n": "pending",
    }
    new = await pooled.get_queue_or_404("ns", "new")
    assert (new.pool, new.config.lease_seconds) == ("b", 77)


async def test_a_transaction_in_flight_at_the_freeze_is_waited_for_and_carried(
    pooled: QueueService, database_url: str, pool_b_url: str, engine_b: AsyncEngine
) -> None:
    """The freeze's guard. A change that passed every check before the freeze may commit after
    it: the mover waits for it (``draining``) before its last pass. Without that wait the
    change would commit on the source after the last pass (here: at the flip) and be lost with
    the copy left behind, and this test fails."""
    await pooled.create_namespace("ns", pool="default")
    queue, _ = await pooled.put_queue("ns", "q", QueueConfig())
    await pooled.enqueue("ns", "q", [NewMessage(id="early")])
    async with await psycopg.AsyncConnection.connect(psycopg_dsn(database_url)) as late:

        async def in_flight(phase: str) -> None:
            if phase == "frozen":  # the log's trigger exists; the freeze comes next
                # An enqueue's row, written (and logged) just before the freeze, not committed.
                await late.execute(
                    "INSERT INTO messages (queue_id, id, priority, state, visible_at)"
                    " VALUES (%s, 'late', 0, 'pending', now())",
                    [queue.id],
                )
            elif phase in {"draining", "flipped"} and late.info.transaction_status:
                await late.commit()

        mover = NamespaceMover({"default": database_url, "b": pool_b_url}, on_phase=in_flight)
        await mover.move("ns", "b")
    ids = [r["id"] for r in await fetch(engine_b, "SELECT id FROM messages ORDER BY id")]
    assert ids == ["early", "late"]


async def test_a_request_during_the_freeze_waits_and_lands_on_the_target(
    pooled: QueueService, database_url: str, pool_b_url: str, engine_b: AsyncEngine
) -> None:
    await pooled.create_namespace("ns", pool="default")
    await pooled.put_queue("ns", "q", QueueConfig())
    answered: list[asyncio.Task[object]] = []

    async def during(phase: str) -> None:
        if phase == "draining":  # the source is frozen
            answered.append(
                asyncio.create_task(pooled.enqueue("ns", "q", [NewMessage(id="during")]))
            )
            await asyncio.sleep(0)  # let it start: it finds the namespace frozen, and waits
        elif phase == "flipped":
            assert not answered[0].done(), "the request did not wait for the move"

    mover = NamespaceMover({"default": database_url, "b": pool_b_url}, on_phase=during)
    await mover.move("ns", "b")
    [outcome] = await asyncio.wait_for(answered[0], TIMEOUT)  # type: ignore[misc]
    assert outcome.created
    assert await scalar(engine_b, "SELECT id FROM messages") == "during"


async def test_a_move_is_refused_to_an_unknown_pool_and_for_an_unknown_namespace(
    pooled: QueueService, mover: NamespaceMover
) -> None:
    await pooled.create_namespace("ns", pool="default")
    with pytest.raises(ValidationError) as info:
        await mover.move("ns", "nowhere")
    assert info.value.field == "pool"
    with pytest.raises(NotFoundError):
        await mover.move("missing", "b")
    assert await mover.move("ns", "default") is None  # already there


class MoverDied(Exception):
    """The mover's process died (here: raised from its progress hook)."""


async def _mover_dies_while_frozen(pooled: QueueService, urls: dict[str, str]) -> None:
    """Namespace ``ns`` with message ``m``, and a move of it to ``b`` whose mover dies once
    the namespace is frozen on its source."""
    await pooled.create_namespace("ns", pool="default")
    await pooled.put_queue("ns", "q", QueueConfig())
    await pooled.enqueue("ns", "q", [NewMessage(id="m")])

    async def die(phase: str) -> None:
        if phase == "draining":
            raise MoverDied

    with pytest.raises(MoverDied):
        await NamespaceMover(urls, on_phase=die).move("ns", "b")


async def test_an_aborted_move_leaves_the_namespace_where_it_was(
    pooled: QueueService,
    database_url: str,
    pool_b_url: str,
    engine: AsyncEngine,
    engine_b: AsyncEngine,
) -> None:
    await _mover_dies_while_frozen(pooled, {"default": database_url, "b": pool_b_url})
    mover = NamespaceMover({"default": database_url, "b": pool_b_url})
    [under_way] = await mover.under_way()
    assert (under_way.namespace, under_way.phase) == ("ns", "frozen")
    with pytest.raises(ConflictError):
        await mover.move("ns", "default")  # another target while one is under way
    undone = await mover.abort("ns")
    assert undone is not None
    assert await mover.under_way() == []
    assert await scalar(engine_b, "SELECT count(*) FROM namespaces") == 0
    assert await scalar(engine, "SELECT state FROM namespaces WHERE name = 'ns'") == "active"
    [leased] = await pooled.dequeue("ns", "q")
    assert leased.id == "m"


async def test_a_move_whose_mover_died_is_finished_by_running_it_again(
    pooled: QueueService, database_url: str, pool_b_url: str, engine_b: AsyncEngine
) -> None:
    await _mover_dies_while_frozen(pooled, {"default": database_url, "b": pool_b_url})
    report = await NamespaceMover({"default": database_url, "b": pool_b_url}).move("ns", "b")
    assert report is not None
    assert await scalar(engine_b, "SELECT id FROM messages") == "m"
    [leased] = await pooled.dequeue("ns", "q")
    assert leased.id == "m"


async def test_history_stays_on_the_source_and_the_schedulers_leave_the_copies_alone(
    pooled: QueueService, mover: NamespaceMover, engine: AsyncEngine, engine_b: AsyncEngine
) -> None:
    await pooled.create_namespace("ns", pool="default")
    await pooled.put_queue("ns", "q", QueueConfig(retention_seconds=0))
    await pooled.enqueue("ns", "q", [NewMessage(id="old")])
    [leased] = await pooled.dequeue("ns", "q")
    await pooled.complete("ns", "q", "old", leased.lease_id)
    async with engine.connect() as conn:
        assert await maintenance.archive_finished(conn) == 1
    await mover.move("ns", "b")
    assert await scalar(engine, "SELECT id FROM message_history") == "old"
    assert await scalar(engine_b, "SELECT count(*) FROM message_history") == 0


async def test_a_bulk_enqueue_into_a_frozen_namespace_is_refused_as_moving(
    pooled: QueueService, database_url: str, pool_b_url: str
) -> None:
    pa = pytest.importorskip("pyarrow")
    from app.pipeline import loading
    from app.pipeline.database import connect
    from app.pipeline.enqueue import find_queue

    await pooled.create_namespace("ns", pool="default")
    await pooled.put_queue("ns", "q", QueueConfig())
    target = find_queue(database_url, "ns", "q")
    row = {"ord": [0], "seq": [1], "id": ["m"], "priority": [0], "payload": ["1"],
           "metadata": ["{}"], "exclusive_value": [None]}  # fmt: skip
    refused: list[type[Exception]] = []

    def insert() -> None:
        with connect(database_url) as conn:
            loading.insert_batch(conn, target, pa.table(row))

    async def while_frozen(phase: str) -> None:
        if phase != "draining":
            return
        for attempt in (lambda: find_queue(database_url, "ns", "q"), insert):
            with pytest.raises(NamespaceMovingError) as info:
                attempt()
            refused.append(type(info.value))

    await NamespaceMover({"default": database_url, "b": pool_b_url}, on_phase=while_frozen).move(
        "ns", "b"
    )
    assert refused == [NamespaceMovingError, NamespaceMovingError]
    assert find_queue(pool_b_url, "ns", "q").id == target.id  # where it is now


async def test_the_scheduler_leaves_a_namespace_it_does_not_serve_alone(
    pooled: QueueService, engine: AsyncEngine
) -> None:
    """A copy coming in (or left behind) is not the pool's to promote, release or archive:
    the pool that serves the namespace does that work, and the copy follows it."""
    await pooled.create_namespace("ns", pool="default")
    await pooled.put_queue("ns", "q", QueueConfig(retention_seconds=0))
    await pooled.enqueue("ns", "q", [NewMessage(id="due", delay_seconds=60), NewMessage(id="f")])
    [leased] = await pooled.dequeue("ns", "q")
    await pooled.complete("ns", "q", leased.id, leased.lease_id)
    await execute(
        engine, "UPDATE messages SET visible_at = now() - interval '1 s' WHERE id = 'due'"
    )

    async def a_tick() -> tuple[int, int]:
        async with engine.connect() as conn:
            ticked = await maintenance.tick(conn)
            return ticked.promoted, await maintenance.archive_finished(conn)

    for state in ("incoming", "frozen", "moved"):
        await execute(engine, f"UPDATE namespaces SET state = '{state}'")
        assert await a_tick() == (0, 0), state
    await execute(engine, "UPDATE namespaces SET state = 'active'")
    assert await a_tick() == (1, 1)
