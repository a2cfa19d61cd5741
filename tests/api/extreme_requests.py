"""The write requests the representable-values property of tests/api/test_representable.py
sends, as Hypothesis strategies of :class:`Op` (API requests: producing, consuming,
administering) and :class:`Form` (dashboard forms), with the namespace and queues they target."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from app.core import validation as v
from tests.api.extreme_values import (
    EDGE_TEXT,
    attempts,
    body_of,
    delays,
    leases,
    metadata,
    optional,
    payloads,
    priorities,
    ranged,
    retentions,
    texts,
    timestamps,
)

_RATES = st.one_of(ranged(0, 1_000_000), st.floats(allow_nan=False, allow_infinity=False))
"""A token's rate limits: requests per second, or anything."""

NS = "alpha"
BASE = f"/v1/namespaces/{NS}/queues"
QUEUES = {
    "q": {},
    "x": {"kind": "exclusive", "exclusive_key": "k"},
    "patched": {},
    "scratch": {},
}
LEASE = "\x01lease\x01"
"""Stands for the current lease of the message an operation works on."""


@dataclass(frozen=True)
class Raw:
    """JSON text spliced as is into a body (payloads: numbers and escapes as the client wrote
    them)."""

    text: str


@dataclass(frozen=True)
class Op:
    """One write request. ``needs`` is what the targeted message must be before it runs:
    ``pending``, ``running`` (its lease replaces :data:`LEASE` in the body) or ``dead``."""

    method: str
    path: str
    body: Any = None
    needs: str | None = None
    queue: str = "q"


def encode(body: Any) -> str:
    """JSON with ASCII escapes (lone surrogates survive), :class:`Raw` parts spliced in."""
    raws: list[str] = []

    def swap(value: Any) -> Any:
        if isinstance(value, Raw):
            raws.append(value.text)
            return f"\x02{len(raws) - 1}\x02"
        if isinstance(value, dict):
            return {k: swap(item) for k, item in value.items()}
        if isinstance(value, list):
            return [swap(item) for item in value]
        return value

    text = json.dumps(swap(body))
    for index, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x02{index}\x02"), raw)
    return text


# A queue's mutable settings, as PUT and PATCH take them.
_QUEUE_SETTINGS: dict[str, st.SearchStrategy[Any]] = {
    "lease_seconds": leases,
    "delay_seconds": delays,
    "max_attempts": attempts,
    "retry_delay_seconds": delays,
    "retry_delay_max_seconds": delays,
    "retention_seconds": retentions,
}


def _message_fields() -> st.SearchStrategy[dict[str, Any]]:
    return body_of(
        id=st.sampled_from(["a", "x" * 200, "x" * 201, "", "é", "m:1"]),
        priority=priorities,
        payload=payloads.map(Raw),
        metadata=metadata,
        delay_seconds=delays,
        visible_at=timestamps,
        max_attempts=attempts,
        lease_seconds=leases,
        ttl_seconds=ranged(1, v.MAX_RETENTION_SECONDS),
        expires_at=timestamps,
    )


def _enqueue(queue: str, messages: list[dict[str, Any]]) -> Op:
    if queue == "x":  # an exclusive queue: each message needs its key, unless drawn otherwise
        messages = [{"metadata": {"k": "v"}, **m} for m in messages]
    return Op("POST", f"{BASE}/{queue}/messages", {"messages": messages}, queue=queue)


enqueues = st.builds(
    _enqueue, st.sampled_from(["q", "x"]), st.lists(_message_fields(), min_size=1, max_size=2)
)
patches = st.builds(
    lambda body: Op("PATCH", "{message}", body, needs="pending"),
    body_of(
        priority=priorities, payload=payloads.map(Raw), metadata=metadata, visible_at=timestamps
    ),
)
dequeues = st.builds(
    lambda body: Op("POST", f"{BASE}/q/dequeue", body),
    body_of(
        count=ranged(1, v.MAX_BATCH_DEQUEUE),
        lease_seconds=leases,
        wait_seconds=st.sampled_from([0, -1, v.MAX_WAIT_SECONDS + 1, 2**63]),
        metadata=metadata
        | st.dictionaries(
            texts, texts | st.lists(texts, max_size=v.MAX_FILTER_VALUES + 1), max_size=3
        ),
    ),
)
lease_operations = st.one_of(
    st.builds(lambda: Op("POST", "{message}/complete", {"lease_id": LEASE}, needs="running")),
    st.builds(
        lambda body: Op("POST", "{message}/fail", {"lease_id": LEASE, **body}, needs="running"),
        body_of(error=texts, retry_delay_seconds=delays),
    ),
    st.builds(
        lambda seconds: Op(
            "POST",
            "{message}/extend",
            {"lease_id": LEASE, "lease_seconds": seconds},
            needs="running",
        ),
        leases,
    ),
    st.builds(
        lambda body: Op("POST", "{message}/cancel", {"lease_id": LEASE, **body}, needs="running"),
        body_of(force=st.booleans(), reason=texts),
    ),
    st.builds(
        lambda body: Op("POST", "{message}/cancel", body, needs="pending"),
        body_of(force=st.booleans(), reason=texts),
    ),
    st.builds(
        lambda body: Op("POST", "{message}/requeue", body, needs="dead"),
        body_of(
            delay_seconds=delays,
            ttl_seconds=ranged(1, v.MAX_RETENTION_SECONDS),
            expires_at=timestamps,
        ),
    ),
    st.builds(
        lambda completes, fails: Op(
            "POST", f"{BASE}/q/ack", {"complete": completes, "fail": fails}, needs="running"
        ),
        st.lists(
            st.fixed_dictionaries(
                {"id": st.just("{id}") | texts, "lease_id": st.just(LEASE) | texts}
            ),
            max_size=2,
        ),
        st.lists(
            st.fixed_dictionaries(
                {"id": st.just("{id}") | texts, "lease_id": st.just(LEASE) | texts},
                optional={"error": optional(texts)},
            ),
            max_size=2,
        ),
    ),
    st.builds(
        lambda body: Op("POST", f"{BASE}/q/requeue", body, needs="dead"),
        body_of(
            states=st.lists(
                st.sampled_from(["errored", "canceled", "pending", ""]) | texts, max_size=3
            ),
            ids=st.lists(st.just("{id}") | texts, max_size=3),
            limit=ranged(1, 100_000),
            delay_seconds=delays,
            ttl_seconds=ranged(1, v.MAX_RETENTION_SECONDS),
            expires_at=timestamps,
        ),
    ),
    st.builds(
        lambda body: Op("POST", f"{BASE}/q/dead-letters/delete", body, needs="dead"),
        body_of(
            states=st.lists(
                st.sampled_from(["errored", "canceled", "pending", ""]) | texts, max_size=3
            ),
            ids=st.lists(st.just("{id}") | texts, max_size=3),
            limit=ranged(1, 100_000),
        ),
    ),
)
admin_operations = st.one_of(
    st.builds(
        lambda body: Op("POST", "/v1/namespaces", body),
        body_of(name=st.sampled_from(["n1", "x" * 64, "x" * 65, "", "-n", "é"]), description=texts),
    ),
    st.builds(
        lambda body: Op("POST", f"/v1/namespaces/{NS}/tokens", body),
        body_of(label=texts, expires_at=timestamps, read_rate=_RATES, write_rate=_RATES),
    ),
    st.builds(
        lambda name, body: Op("PUT", f"{BASE}/{name}", body),
        st.sampled_from(["q2", "y" * 64, "y" * 65, "patched"]),
        body_of(
            kind=st.sampled_from(["simple", "exclusive", "fifo"]),
            exclusive_key=texts,
            filter_key=texts,
            filter_keys=st.lists(texts, max_size=3) | texts,
            ordering=st.sampled_from(["priority", "due", "fifo"]) | texts,
            **_QUEUE_SETTINGS,
        ),
    ),
    st.builds(
        lambda body: Op("PATCH", f"{BASE}/patched", body),
        body_of(**_QUEUE_SETTINGS, exclusive_key=texts),
    ),
    st.builds(
        lambda body: Op("POST", f"{BASE}/scratch/purge", body),
        body_of(states=st.lists(st.sampled_from(["errored", "bogus", ""]) | texts, max_size=3)),
    ),
)


@dataclass(frozen=True)
class Form:
    """A dashboard form: posted with the CSRF token of ``page``."""

    page: str
    action: str
    fields: list[tuple[str, str]]
    needs: str | None = None


_form_text = st.one_of(st.sampled_from(EDGE_TEXT), st.text(max_size=40)).map(
    lambda s: s.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
)


def _mostly(values: list[str]) -> st.SearchStrategy[str]:
    """One of ``values`` two times in three, else odd text."""
    return st.one_of(st.sampled_from(values), st.sampled_from(values), _form_text)


dashboard_forms = st.one_of(
    st.builds(
        lambda switch, paused: Form(
            "/dashboard/queues/alpha/patched",
            "/dashboard/queues/alpha/patched/switches",
            [("switch", switch), ("paused", paused)],
        ),
        _mostly(["enqueue_paused", "dequeue_paused"]),
        _mostly(["true", "false"]),
    ),
    st.builds(
        lambda action, ids, every, states: Form(
            "/dashboard/queues/alpha/q/dead-letters",
            "/dashboard/queues/alpha/q/dead-letters/apply",
            [
                ("action", action),
                *(("ids", i) for i in ids),
                ("every", every),
                *(("states", s) for s in states),
            ],
            needs="dead",
        ),
        _mostly(["requeue", "delete"]),
        st.lists(_mostly(["{id}"]), min_size=1, max_size=2),
        st.sampled_from(["", "1"]),
        st.lists(_mostly(["errored", "canceled"]), max_size=1),
    ),
)
