"""The fault campaign's checkers fire when the system is broken for real, in a throwaway database:
with the partial unique index ``messages_running_exclusive_uidx`` dropped, two consumers claim
from an exclusive queue through the unguarded simple claim (``messages_claim``) and the
exclusivity checker and the live watcher both fire — while the same consumers with the index in
place are refused and nothing fires. A row deleted behind the server's back is reported lost, and
a complete forced through with an expired lease is reported as a stale completion.

(Their synthetic histories, broken and sound, are in ``test_checks_detect_breakage.py``.)
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.database import create_engine
from app.core.errors import LeaseMismatchError
from app.core.models import NewMessage, QueueConfig
from app.core.service import QueueService
from app.core.validation import Limits
from app.embedded import LocalCluster
from app.store import migrate
from app.store.postgres import PostgresStore
from app.store.sql.claim import messages_claim
from tests.faults.checks import (
    check_exclusivity,
    check_fencing,
    check_lost,
)
from tests.faults.config import EXCLUSIVE_KEY, NAMESPACE, SIMPLE
from tests.faults.database import Database, ExclusivityWatcher
from tests.faults.history import AckAttempt, Delivery, EnqueueAck, History

T0 = 1_800_000_000.0
LEASE = 2


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    """A throwaway migrated cluster (its own directory, stopped and removed afterwards)."""
    workdir = Path(tempfile.mkdtemp(prefix="sundial-faults-break-"))
    workdir.chmod(0o755)
    cluster = LocalCluster(workdir / "cluster")
    try:
        cluster.start()
        migrate.upgrade(cluster.sqlalchemy_url)
        yield cluster
    finally:
        cluster.stop("immediate")
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
async def engine(cluster: LocalCluster) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(cluster.sqlalchemy_url, pool_size=4)
    yield engine
    await engine.dispose()


async def unguarded_consumer(
    engine: AsyncEngine,
    service: QueueService,
    queue_name: str,
    queue_id: int,
    deliveries: list[Delivery],
    refusals: list[str],
) -> None:
    """Claims with the *simple* claim statement (no exclusivity probe, no advisory lock): only
    the unique index stands between it and two running messages of one value."""
    params = {
        "queue_id": queue_id,
        "lease_override": 5,
        "queue_lease": 5,
        "catalogue_version": None,  # unchecked (no request's lookups)
        "valid_until": None,
    }
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        requested = time.time()
        try:
            async with engine.begin() as conn:
                rows = (await conn.execute(messages_claim(count=1), params)).all()
        except sa_exc.IntegrityError as error:
            refusals.append(str(error.orig))
            await asyncio.sleep(0.02)
            continue
        received = time.time()
        if not rows:
            return
        row = rows[0]
        d = Delivery(
            queue=queue_name,
            id=row.id,
            lease_id=row.lease_id,
            attempt=row.attempts,
            server="unguarded",
            requested=requested,
            received=received,
            lease_expires_at=row.lease_expires_at.timestamp(),
            lease_seconds=5,
            exclusive_value=row.metadata[EXCLUSIVE_KEY],
        )
        deliveries.append(d)
        await asyncio.sleep(0.25)  # the work
        sent = time.time()
        await service.complete(NAMESPACE, queue_name, row.id, row.lease_id)
        d.acks.append(AckAttempt("complete", sent, time.time(), 200, server="unguarded"))


async def claim_race(
    engine: AsyncEngine, service: QueueService, database: Database, queue_name: str
) -> tuple[list[Delivery], list[str], History]:
    """Two unguarded consumers drain 8 messages of one exclusive value, watched live."""
    queue, _ = await service.put_queue(
        NAMESPACE, queue_name, QueueConfig(kind="exclusive", exclusive_key=EXCLUSIVE_KEY)
    )
    messages = [NewMessage(id=f"{queue_name}-{n}", metadata={EXCLUSIVE_KEY: "v"}) for n in range(8)]
    await service.enqueue(NAMESPACE, queue_name, messages)
    history = History()
    stop = asyncio.Event()
    watcher = asyncio.create_task(
        ExclusivityWatcher(database, history, interval=0.02).run(stop, time.monotonic() + 60)
    )
    deliveries: list[Delivery] = []
    refusals: list[str] = []
    await asyncio.gather(
        *(
            unguarded_consumer(engine, service, queue_name, queue.id, deliveries, refusals)
            for _ in range(2)
        )
    )
    stop.set()
    await watcher
    assert len({d.id for d in deliveries}) == 8
    assert history.watcher_samples > 10
    return deliveries, refusals, history


@pytest.mark.slow
async def test_exclusivity_checker_fires_when_the_unique_index_is_dropped(
    cluster: LocalCluster, engine: AsyncEngine
) -> None:
    service = QueueService(PostgresStore(engine), limits=Limits(), admin_token=None)
    database = Database(cluster)
    await service.create_namespace(NAMESPACE)

    # Control: with the index, the second claim of the value is refused; nothing fires.
    deliveries, refusals, history = await claim_race(engine, service, database, "guarded")
    assert refusals, "the unique index never had to refuse a claim: the race did not happen"
    assert all("messages_running_exclusive_uidx" in r for r in refusals)
    result = check_exclusivity(deliveries, history.watcher_hits)
    assert result.ok, result.violations
    assert result.counts["intervals"] == 8

    # Broken: without the index the same consumers run two messages of "v" at once.
    async with engine.begin() as conn:
        await conn.execute(text("DROP INDEX messages_running_exclusive_uidx"))
    deliveries, refusals, history = await claim_race(engine, service, database, "broken")
    assert not refusals
    result = check_exclusivity(deliveries, history.watcher_hits)
    assert not result.ok
    assert result.counts["overlaps"] >= 1, result.violations
    assert result.counts["watcher_hits"] >= 1, "the live watcher missed the violation"


@pytest.mark.slow
async def test_lost_and_stale_checkers_fire_on_a_real_database(
    cluster: LocalCluster, engine: AsyncEngine
) -> None:
    service = QueueService(PostgresStore(engine), limits=Limits(), admin_token=None)
    database = Database(cluster)
    await service.create_namespace(NAMESPACE)
    await service.put_queue(NAMESPACE, SIMPLE, QueueConfig(lease_seconds=1))
    outcomes = await service.enqueue(NAMESPACE, SIMPLE, [NewMessage(id=f"m{n}") for n in range(3)])
    enqueues = [EnqueueAck(SIMPLE, o.id, o.created, str(o.state), "direct", T0) for o in outcomes]

    (leased,) = await service.dequeue(NAMESPACE, SIMPLE, count=1, lease_seconds=1)
    d = Delivery(
        queue=SIMPLE,
        id=leased.id,
        lease_id=leased.lease_id,
        attempt=leased.attempt,
        server="direct",
        requested=time.time(),
        received=time.time(),
        lease_expires_at=leased.lease_expires_at.timestamp(),
        lease_seconds=1,
    )
    await asyncio.sleep(max(0.0, d.lease_expires_at - time.time()) + 0.3)

    # Fenced: the server refuses the stale lease, and the checker agrees.
    sent = time.time()
    with pytest.raises(LeaseMismatchError):
        await service.complete(NAMESPACE, SIMPLE, d.id, d.lease_id)
    d.acks.append(AckAttempt("complete", sent, time.time(), 409, "lease_mismatch"))
    db, twice = await database.final_state()
    assert check_lost(enqueues, db, twice).ok
    fencing = check_fencing([d], db)
    assert fencing.ok, fencing.violations
    assert fencing.counts["stale_refused"] == 1

    # Broken: a complete that ignores the lease (what a fencing bug would do) is caught.
    sent = time.time()
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE messages SET state = 'completed', finished_at = now() "
                "WHERE id = :id AND queue_id = (SELECT id FROM queues WHERE name = :queue)"
            ),
            {"id": d.id, "queue": SIMPLE},
        )
    d.acks.append(AckAttempt("complete", sent, time.time(), 200, server="unfenced"))
    db, _ = await database.final_state()
    fencing = check_fencing([d], db)
    assert fencing.counts["stale_accepted"] == 1, fencing.violations

    # Broken: an acknowledged message vanishes from the database.
    async with engine.begin() as conn:
        await conn.execute(text("DELETE FROM messages WHERE id = 'm2'"))
    db, twice = await database.final_state()
    lost = check_lost(enqueues, db, twice)
    assert lost.violations == ["acknowledged enqueue simple/m2 is in no table: lost"]
