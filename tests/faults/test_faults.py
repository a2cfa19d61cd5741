"""The CI-sized fault campaign: every fault type once, under traffic, against real processes.

Two ``sundial serve`` processes, each behind its fault proxy, one PostgreSQL cluster, producers and
consumers on a simple and an exclusive queue, and every fault of ``harness.FAULTS`` one after
another (see :mod:`tests.faults.harness`): about 60-90 s in all on a two-core machine. The
guarantees of docs/concepts.md must hold throughout: nothing acknowledged is lost, no stale lease
completes, no exclusive value ever runs twice, and the scheduler fails over within 5 s.

The second test cuts the leader alone off from the database without its connection closing: a
standby must fence it and take over, and a lease that expires meanwhile must still be released.

A longer campaign: ``python -m tests.faults --duration 300``; see docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.faults.harness import (
    FAULTS,
    NAMESPACE,
    SIMPLE,
    Campaign,
    CampaignConfig,
    Injector,
    run_campaign,
)


@pytest.mark.slow
def test_guarantees_hold_under_every_fault() -> None:
    report = run_campaign(CampaignConfig(duration=45.0, seed=1))
    print(report.format())  # shown with -s, and by pytest when the test fails
    figures = report.figures()

    # Every fault type was injected while traffic flowed.
    assert set(report.fault_counts()) == set(FAULTS), report.format()
    # The campaign exercised what it claims to check.
    assert figures["acknowledged"] > 300, report.format()
    assert figures["completes acknowledged"] > 200, report.format()
    assert figures["stale-complete attempts refused (409)"] > 0, report.format()
    assert figures["exclusivity: intervals checked"] > 50, report.format()
    assert figures["exclusivity: watcher samples"] > 100, report.format()

    # The guarantees.
    assert figures["lost"] == 0, report.format()
    assert figures["live after drain"] == 0, report.format()
    assert figures["stale completions accepted"] == 0, report.format()
    assert figures["exclusivity: overlaps"] == 0, report.format()
    assert figures["exclusivity: watcher hits"] == 0, report.format()
    assert report.ok, report.format()


async def _cut_off_the_leader() -> tuple[Any, float, str, float]:
    """Two servers; the leader alone loses its database (connections left open, nothing flows);
    a lease taken through the other server expires meanwhile.

    Returns (successor row or None, seconds waited for it, the message's state when the wait
    for its release ended, seconds after the lease's expiry that was)."""
    config = CampaignConfig()
    campaign = Campaign(config)
    try:
        await campaign.setup()
        token = await campaign.create_queues()
        injector = Injector(
            config,
            campaign.cluster,
            campaign.database,
            campaign.proxies,
            campaign.servers,
            None,
            campaign.history,
        )
        found = await injector.find_leader()
        assert found is not None, "no scheduler leads"
        leader, node = found
        follower = next(s for s in campaign.servers if s is not leader)
        async with httpx.AsyncClient(
            base_url=f"{follower.base}/v1/namespaces/{NAMESPACE}/queues/{SIMPLE}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        ) as http:
            answer = await http.post("/messages", json={"messages": [{"id": "held"}]})
            assert answer.status_code == 201, answer.text
            since = (await campaign.database.fetch("SELECT clock_timestamp()"))[0][0]
            proxy = campaign.proxies[leader.name]
            await asyncio.to_thread(proxy.stall)
            try:
                answer = await http.post("/dequeue", json={"lease_seconds": 1})
                (message,) = answer.json()["messages"]
                expires = datetime.fromisoformat(message["lease_expires_at"]).timestamp()

                async def released() -> str:
                    # Timeliness (guarantee 4): released within 1 s of expiry; allow the
                    # takeover (5 s) on top.
                    limit = expires + 1 + config.leader_takeover_limit
                    state = "running"
                    while time.time() < limit:
                        rows = await campaign.database.fetch(
                            "SELECT state::text FROM messages WHERE id = 'held'"
                        )
                        state = rows[0][0]
                        if state != "running":
                            break
                        await asyncio.sleep(0.1)
                    return state

                (successor, waited), state = await asyncio.gather(
                    injector.wait_for_successor(node, since), released()
                )
                late = time.time() - expires
            finally:
                await asyncio.to_thread(proxy.resume)
        return successor, waited, state, late
    finally:
        await campaign.teardown()
        shutil.rmtree(campaign.workdir, ignore_errors=True)


@pytest.mark.slow
def test_scheduler_fails_over_when_the_leader_is_cut_off_from_the_database() -> None:
    successor, waited, state, late = asyncio.run(_cut_off_the_leader())
    assert state != "running", f"expired lease still running {late:.1f} s after its expiry"
    assert successor is not None, f"no other scheduler led within {waited:.1f} s"
    assert waited <= CampaignConfig().leader_takeover_limit
