"""OR filters: a dequeue filter's value may be a list, any of whose values matches (pairs still
all match). On the queue's filter_key the claim walks messages_filter_pending_idx once per value
and merges the walks in the queue's order; other keys are tested with ``metadata @> ANY``. Both
hold for simple and exclusive queues and for due messages the scheduler has not promoted yet."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import ValidationError
from app.core.models import NewMessage, NextLease
from app.core.service import QueueService
from app.core.validation import MAX_FILTER_VALUES, dequeue_filter
from tests.helpers import execute, leased_ids, make_queue, tagged

NS = "ns"


BACKLOG = [
    tagged("a-30", 30, tenant="a", region="eu"),
    tagged("b-5", 5, tenant="b", region="us"),
    tagged("c-10", 10, tenant="c", region="eu"),
    tagged("a-20", 20, tenant="a", region="us"),
    tagged("keyless-1", 1, region="eu"),
    tagged("b-25", 25, tenant="b", region="eu"),
    tagged("c-15", 15, tenant="c", region="us"),
]


@pytest.mark.parametrize(
    "filter_keys",
    [("tenant",), ("region", "tenant"), ()],
    ids=["on-filter-key", "on-second-filter-key", "general"],
)
async def test_a_list_matches_any_of_its_values_in_priority_order(
    service: QueueService, filter_keys: tuple[str, ...]
) -> None:
    await make_queue(service, NS, "q", filter_keys=filter_keys)
    await service.enqueue(NS, "q", BACKLOG)

    # The best two of a's and c's messages, merged across the values.
    assert await leased_ids(service, NS, "q", 2, tenant=["a", "c"]) == ["c-10", "c-15"]
    assert await leased_ids(service, NS, "q", 10, tenant=("c", "a", "zzz")) == ["a-20", "a-30"]
    assert await leased_ids(service, NS, "q", 10, tenant=["a", "c"]) == []
    # A list pair and a plain pair: both must match.
    assert await leased_ids(service, NS, "q", 10, tenant=["b", "x"], region="eu") == ["b-25"]
    # Lists on two keys: any combination of their values.
    assert await leased_ids(service, NS, "q", 10, tenant=["b", "y"], region=["us", "eu"]) == ["b-5"]
    assert await leased_ids(service, NS, "q", 10, region=["eu", "asia"]) == ["keyless-1"]


async def test_a_list_on_the_key_with_lists_on_other_keys(service: QueueService) -> None:
    await make_queue(service, NS, "q", filter_keys=("tenant",))
    await service.enqueue(
        NS,
        "q",
        [
            tagged("a-eu-web", 1, tenant="a", region="eu", tier="web"),
            tagged("a-us-web", 2, tenant="a", region="us", tier="web"),
            tagged("b-us-db", 3, tenant="b", region="us", tier="db"),
            tagged("b-eu-db", 4, tenant="b", region="eu", tier="db"),
            tagged("c-eu-db", 5, tenant="c", region="eu", tier="db"),
        ],
    )

    assert await leased_ids(service, NS, "q", 10, tenant="b", region=["us", "asia"]) == ["b-us-db"]
    assert await leased_ids(
        service, NS, "q", 10, tenant=["a", "b", "c"], region=["eu"], tier=["db", "batch"]
    ) == ["b-eu-db", "c-eu-db"]
    assert await leased_ids(service, NS, "q", 10, tenant=["a", "c"], tier="web") == [
        "a-eu-web",
        "a-us-web",
    ]


async def test_a_list_of_one_value_is_that_value(service: QueueService) -> None:
    await make_queue(service, NS, "q", filter_keys=("tenant",))
    await service.enqueue(NS, "q", BACKLOG)

    assert await leased_ids(service, NS, "q", 10, tenant=["a"]) == ["a-20", "a-30"]
    assert dequeue_filter("metadata", {"tenant": ["a", "a"], "r": "x"}) == {"tenant": "a", "r": "x"}


@pytest.mark.parametrize(
    "filter_keys",
    [("tenant",), ("region", "tenant"), ()],
    ids=["on-filter-key", "on-second-filter-key", "general"],
)
async def test_an_exclusive_queue_takes_one_message_per_value_of_the_listed_ones(
    service: QueueService, filter_keys: tuple[str, ...]
) -> None:
    config: dict[str, Any] = {"kind": "exclusive", "exclusive_key": "project"}
    config["filter_keys"] = filter_keys
    await make_queue(service, NS, "x", **config)
    await service.enqueue(
        NS,
        "x",
        [
            tagged("p1-a", 1, project="p1", tenant="a"),
            tagged("p1-b", 2, project="p1", tenant="b"),
            tagged("p2-b", 3, project="p2", tenant="b"),
            tagged("p3-c", 4, project="p3", tenant="c"),
            tagged("p4-a", 5, project="p4", tenant="a"),
        ],
    )

    assert await leased_ids(service, NS, "x", 10, tenant=["a", "b"]) == ["p1-a", "p2-b", "p4-a"]
    assert await leased_ids(service, NS, "x", 10, tenant=["a", "b"]) == []  # p1 is running
    assert await leased_ids(service, NS, "x", 10, tenant=["c", "b"]) == ["p3-c"]


async def test_an_exclusive_claim_over_listed_values_claims_again_past_its_window(
    service: QueueService,
) -> None:
    """Many messages of few projects ahead in the window: the claim's rounds go past them."""
    await make_queue(
        service, NS, "x", kind="exclusive", exclusive_key="project", filter_keys=("tenant",)
    )
    crowd = [tagged(f"p0-{i}", i, project="p0", tenant=["a", "b"][i % 2]) for i in range(20)]
    tail = [tagged(f"p{i}-z", 100 + i, project=f"p{i}", tenant="b") for i in range(1, 4)]
    await service.enqueue(NS, "x", [*crowd, *tail])

    leased = await leased_ids(service, NS, "x", 4, tenant=["a", "b"])
    assert leased == ["p0-0", "p1-z", "p2-z", "p3-z"]


@pytest.mark.parametrize(
    "filter_keys",
    [("tenant",), ("region", "tenant"), ()],
    ids=["on-filter-key", "on-second-filter-key", "general"],
)
@pytest.mark.parametrize("kind", ["simple", "exclusive"])
async def test_due_messages_not_promoted_yet_match_a_list(
    service: QueueService, engine: AsyncEngine, filter_keys: tuple[str, ...], kind: str
) -> None:
    config: dict[str, Any] = {"filter_keys": filter_keys}
    if kind == "exclusive":
        config.update(kind="exclusive", exclusive_key="project")
    queue = await make_queue(service, NS, "q", **config)
    delayed = [
        NewMessage(
            id=f"d-{t}", priority=p, metadata={"tenant": t, "project": f"p-{t}"}, delay_seconds=3600
        )
        for t, p in (("a", 3), ("b", 1), ("c", 2))
    ]
    await service.enqueue(NS, "q", delayed)
    # Due now, but no scheduler has promoted them: the claim's due source finds them.
    await execute(
        engine,
        "UPDATE messages SET visible_at = now() - interval '1 second' WHERE queue_id = :q",
        q=queue.id,
    )
    await service.enqueue(NS, "q", [tagged("ready-a", 2, tenant="a", project="p-x")])

    assert await leased_ids(service, NS, "q", 10, tenant=["a", "c"]) == ["d-c", "ready-a", "d-a"]
    assert await leased_ids(service, NS, "q", 10, tenant=["b", "zzz"]) == ["d-b"]


@pytest.mark.parametrize(
    ("wanted", "field", "message"),
    [
        ({"tag": ["A", "B", "C", "x\x00"]}, "metadata.tag[3]", "NUL"),
        ({"tag": []}, "metadata.tag", "1 to 32 values"),
        ({"tag": [f"v{i}" for i in range(MAX_FILTER_VALUES + 1)]}, "metadata.tag", "1 to 32"),
        ({"tag": ["A", "x" * 257]}, "metadata.tag[1]", "at most 256"),
        (
            {"a": ["1", "2", "3", "4", "5", "6"], "b": ["1", "2", "3", "4", "5", "6"]},
            "metadata",
            "combinations",
        ),
    ],
)
async def test_a_bad_list_is_refused_naming_the_value(
    service: QueueService, wanted: dict[str, Any], field: str, message: str
) -> None:
    await make_queue(service, NS, "q", filter_keys=("tag",))
    await service.enqueue(NS, "q", [tagged("m", 1, tag="A")])

    with pytest.raises(ValidationError) as refused:
        await service.dequeue(NS, "q", metadata=wanted)
    assert refused.value.field == field
    assert message in str(refused.value)
    with pytest.raises(ValidationError) as refused:
        await service.ack_and_dequeue(NS, "q", [], [], NextLease(metadata=wanted))
    assert refused.value.field == f"dequeue.{field}"
    # Nothing was leased by either.
    assert await leased_ids(service, NS, "q", 1) == ["m"]


async def test_ack_and_dequeue_takes_a_list(service: QueueService) -> None:
    await make_queue(service, NS, "q", filter_keys=("tenant",))
    await service.enqueue(NS, "q", BACKLOG)

    _, leased = await service.ack_and_dequeue(
        NS, "q", [], [], NextLease(count=3, metadata={"tenant": ["b", "c"]})
    )
    assert [m.id for m in leased] == ["b-5", "c-10", "c-15"]
