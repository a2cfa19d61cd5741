"""Model-based test: random operation sequences on the real ``QueueService`` and a real database,
checked step by step against the in-memory model of docs/concepts.md in :mod:`tests.model.model`.

One module though over 400 lines: one Hypothesis state machine, whose rules and invariant share
its state and cannot be split without changing it.

The machine drives two queues of one namespace — ``jobs`` (simple) and ``builds`` (exclusive on
``project``, default delay and retry backoff) — with enqueue (batches, duplicate and
server-generated ids, delays, TTLs, priorities, max_attempts 1-3, sometimes an invalid message),
dequeue (count 1-5, lease overrides, metadata filters), complete / fail / extend / cancel (with the
current lease, a stale one, a random one, a malformed one, or force), requeue, delete, update,
get, pause switches, and the passage of time. After every step it compares every message (state,
attempts, max_attempts, priority, exclusive value, lease, timestamps, enqueue order), the
exclusivity rule, and, for each operation, its result or its error class.

**Time.** The model clock advances by whole minutes; the database agrees by moving every stored
timestamp of every message back by the same amount in one UPDATE (``now()`` stays real). Then the
scheduler's ``maintenance.tick`` runs, or not: dequeue must find due messages without it. All
durations are multiples of 60 s, so the few seconds of real time an example takes can never move a
comparison across a boundary (the model says "due" exactly when the data has been moved to or past
``now()``, and real time only adds to that).

**Database.** One database for the whole module (the ``harness`` fixture of
tests/model/conftest.py, cloned once from the migrated template); each example starts with
``TRUNCATE … RESTART IDENTITY CASCADE`` and recreates the namespace and queues. The service runs
on an event loop the harness owns (``asyncio.Runner``, in tests/model/harness.py) with its own
engine, because Hypothesis state machines are synchronous; the tests here are plain functions.
Regression tests for bugs the machine found are in tests/model/test_regressions.py.

**Runs.** By default a bounded, derandomized (deterministic) run for CI: 60 examples of 30 steps
(about 15 s here). A longer, randomized exploration::

    SUNDIAL_MODEL_EXAMPLES=1000 SUNDIAL_MODEL_STEPS=60 \\
        .venv/bin/pytest tests/model -q -p no:cacheprovider

(``SUNDIAL_MODEL_STEPS`` is optional.) A failure prints the shrunk step sequence and a
``@reproduce_failure`` blob.
"""

from __future__ import annotations

import os
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from app.core.errors import (
    InvalidStateError,
    LeaseMismatchError,
    NotFoundError,
    QueuePausedError,
    SundialError,
    ValidationError,
)
from app.core.models import LeasedMessage, Message, MessageChanges, NewMessage
from tests.model import model as M
from tests.model.harness import EXCLUSIVE, KEY, NS, QUEUE_NAMES, QUEUE_SPECS, Harness, T

ID_POOL = tuple(f"m{i}" for i in range(10))
NEVER_IDS = ("ghost", "not an id!")  # never enqueued; the second is not even well-formed
VALUES = ("a", "b", "c")
COLORS = ("red", "blue")
TOLERANCE = 30.0  # seconds between a model time and the database's; durations are 60 s multiples

_LONG = os.environ.get("SUNDIAL_MODEL_EXAMPLES")
SETTINGS = settings(
    max_examples=int(_LONG) if _LONG else 60,
    stateful_step_count=int(os.environ.get("SUNDIAL_MODEL_STEPS", "30")),
    deadline=None,  # each step is a few database round trips; their latency is not the subject
    derandomize=not _LONG,  # CI runs the same examples every time
    database=None,
    print_blob=True,
)

ERRORS: dict[str, type[SundialError]] = {
    M.NOT_FOUND: NotFoundError,
    M.LEASE_MISMATCH: LeaseMismatchError,
    M.INVALID_STATE: InvalidStateError,
    M.VALIDATION: ValidationError,
    M.PAUSED: QueuePausedError,
}


# --- the machine -------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What the model says an operation does: a result, or a refusal."""

    result: Any = None
    refusal: M.Refusal | None = None


def model_does(fn: Any, *args: Any, **kwargs: Any) -> Outcome:
    try:
        return Outcome(result=fn(*args, **kwargs))
    except M.Refusal as refusal:
        return Outcome(refusal=refusal)


def near(actual: float | None, expected: float | None) -> bool:
    if actual is None or expected is None:
        return actual is None and expected is None
    return abs(actual - expected) < TOLERANCE


class QueueMachine(RuleBasedStateMachine):
    """Drives QueueService and the model in lockstep."""

    harness: ClassVar[Harness]

    def __init__(self) -> None:
        super().__init__()
        self.h = type(self).harness
        self.h.run(self.h.reset())
        self.model = M.Model(QUEUE_SPECS)
        self.all_leases: list[str] = []

    # --- helpers -------------------------------------------------------------------------------

    def has_messages(self) -> bool:
        return any(q.messages for q in self.model.queues.values())

    def call(self, coro: Coroutine[Any, Any, T], expected: Outcome, what: str) -> T | None:
        """Run a service call and check that it refuses exactly when (and how) the model does."""
        error: SundialError | None = None
        try:
            result = self.h.run(coro)
        except SundialError as refused:
            error = refused
        if error is not None:
            assert expected.refusal is not None, (
                f"{what}: service refused with {type(error).__name__} ({error}); model accepts"
            )
            wanted = ERRORS[expected.refusal.kind]
            assert type(error) is wanted, (
                f"{what}: service refused with {type(error).__name__} ({error});"
                f" model refuses with {wanted.__name__} ({expected.refusal})"
            )
            event(f"{what} -> {wanted.__name__}")
            return None
        assert expected.refusal is None, (
            f"{what}: service accepted; model refuses with {expected.refusal}"
        )
        event(f"{what} -> ok")
        return result

    def check_message(self, what: str, got: Any, queue: str, message_id: str) -> None:
        m = self.model.get(queue, message_id)
        assert (str(got.state), got.attempts) == (m.state, m.attempts), (
            f"{what} {queue}/{message_id}: service says {got.state}/{got.attempts} attempts,"
            f" model {m.state}/{m.attempts}"
        )

    def draw_target(self, data: st.DataObject, queue: str, prefer: frozenset[str]) -> str:
        """A message id: mostly one the model knows (in a preferred state when there is one)."""
        messages = self.model.queues[queue].messages
        known = sorted(messages)
        preferred = [i for i in known if messages[i].state in prefer]
        pool: tuple[str, ...] | list[str]
        choice = data.draw(st.integers(0, 9), label="which pool")
        if choice < 6 and preferred:
            pool = preferred
        elif choice < 8 and known:
            pool = known
        else:
            pool = ID_POOL + NEVER_IDS
        return data.draw(st.sampled_from(pool), label="message id")

    def draw_lease(
        self, data: st.DataObject, queue: str, message_id: str, *, allow_none: bool = False
    ) -> tuple[str, str | None]:
        """A lease to present: the current one, a stale one, a random or a malformed one."""
        kinds = ["current", "current", "current", "stale", "random", "malformed"]
        if allow_none:
            kinds.append("none")
        kind = data.draw(st.sampled_from(kinds), label="lease kind")
        message = self.model.queues[queue].messages.get(message_id)
        if kind == "none":
            return kind, None
        if kind == "malformed":
            return kind, "not-a-lease"
        if kind == "current" and message is not None and message.lease_id is not None:
            return kind, message.lease_id
        current = message.lease_id if message is not None else None
        stale = [lease for lease in self.all_leases if lease != current]
        if kind == "stale" and stale:
            return kind, data.draw(st.sampled_from(stale), label="stale lease")
        return "random", str(data.draw(st.uuids(), label="random lease"))

    # --- producing -----------------------------------------------------------------------------

    @initialize(data=st.data())
    def seed(self, data: st.DataObject) -> None:
        """Start with a few messages in each queue, so that every rule has something to act on."""
        for queue in QUEUE_NAMES:
            self.enqueue(data, queue, data.draw(st.integers(2, 6), label="seed size"))

    @rule(data=st.data(), queue=st.sampled_from(QUEUE_NAMES), size=st.integers(1, 6))
    def enqueue(self, data: st.DataObject, queue: str, size: int) -> None:
        exclusive = queue == EXCLUSIVE
        news: list[NewMessage] = []
        for _ in range(size):
            if news and data.draw(st.integers(0, 4), label="repeat an id") == 0:
                message_id: str | None = data.draw(
                    st.sampled_from([n.id for n in news if n.id is not None] or list(ID_POOL))
                )
            else:
                message_id = data.draw(st.sampled_from((*ID_POOL, None)), label="id")
            if exclusive:
                metadata = {KEY: data.draw(st.sampled_from(VALUES), label="value")}
                if data.draw(st.integers(0, 24), label="forget the key") == 0:
                    metadata = {}
            else:
                metadata = {"color": data.draw(st.sampled_from(COLORS), label="color")}
            news.append(
                NewMessage(
                    id=message_id,
                    priority=data.draw(st.sampled_from((None, -2, -1, 0, 1, 2)), label="prio"),
                    metadata=metadata,
                    delay_seconds=data.draw(
                        st.sampled_from((None, 0, 0, 0, 60, 120)), label="delay"
                    ),
                    max_attempts=data.draw(st.sampled_from((None, 1, 2, 3)), label="attempts"),
                    lease_seconds=data.draw(st.sampled_from((None, 60, 180)), label="lease"),
                    ttl_seconds=data.draw(st.sampled_from((None, None, 60, 180)), label="ttl"),
                )
            )
        try:
            self.model.check_enqueue(queue, [n.metadata for n in news])
            expected = Outcome()
        except M.Refusal as refusal:
            expected = Outcome(refusal=refusal)
        before_ms = time.time() * 1000
        outcomes = self.call(self.h.service.enqueue(NS, queue, news), expected, "enqueue")
        after_ms = time.time() * 1000
        if outcomes is None:
            return
        assert len(outcomes) == len(news)
        submitted = []
        for new, outcome in zip(news, outcomes, strict=True):
            if new.id is None:
                assert outcome.created, "a server-generated id collided"
                assert outcome.id not in self.model.queues[queue].messages
            else:
                assert outcome.id == new.id
            submitted.append(
                M.Submitted(
                    id=outcome.id,
                    priority=new.priority,
                    metadata=new.metadata,
                    delay_seconds=new.delay_seconds,
                    max_attempts=new.max_attempts,
                    lease_seconds=new.lease_seconds,
                    ttl_seconds=new.ttl_seconds,
                )
            )
        expected_outcomes = self.model.enqueue(queue, submitted)
        actual = [(o.id, str(o.state), o.created) for o in outcomes]
        assert actual == expected_outcomes, f"enqueue: service {actual}, model {expected_outcomes}"
        # The default priority is the enqueue time in Unix ms: learn it, within the call.
        unresolved = [m for m in self.model.queues[queue].messages.values() if m.priority is None]
        if unresolved:
            stored = {(r["queue"], r["id"]): r["priority"] for r in self.h.run(self.h.rows())}
            for m in unresolved:
                priority = stored[(queue, m.id)]
                assert before_ms - 2000 <= priority <= after_ms + 2000, (
                    f"default priority {priority} of {m.id} is not the enqueue time in ms"
                    f" ({before_ms:.0f}..{after_ms:.0f})"
                )
                m.priority = priority

    # --- consuming -----------------------------------------------------------------------------

    def do_dequeue(
        self, queue: str, count: int, lease_seconds: int | None, wanted: dict[str, str]
    ) -> list[LeasedMessage]:
        """Dequeue on both sides; the service must lease exactly the model's choice."""
        choice = self.model.dequeue_choice(queue, count, wanted)
        leased = self.h.run(
            self.h.service.dequeue(
                NS, queue, count=count, lease_seconds=lease_seconds, metadata=wanted
            )
        )
        got = [lease.id for lease in leased]
        assert got == choice, (
            f"dequeue {queue} count={count} filter={wanted}: service leased {got},"
            f" model expects {choice}"
        )
        event(f"dequeue leased {len(got)}")
        for lease in leased:
            assert lease.lease_id not in self.all_leases, "a lease id was issued twice"
            self.all_leases.append(lease.lease_id)
            m = self.model.grant(queue, lease.id, lease.lease_id, lease_seconds)
            assert (lease.attempt, lease.priority) == (m.attempts, m.priority), (
                f"dequeue {queue}/{lease.id}: service attempt {lease.attempt} priority"
                f" {lease.priority}, model {m.attempts} {m.priority}"
            )
        return leased

    @rule(
        data=st.data(),
        queue=st.sampled_from(QUEUE_NAMES),
        count=st.integers(1, 5),
        lease_seconds=st.sampled_from((None, None, 60, 180)),
        filtered=st.integers(0, 4),
    )
    def dequeue(
        self,
        data: st.DataObject,
        queue: str,
        count: int,
        lease_seconds: int | None,
        filtered: int,
    ) -> None:
        wanted: dict[str, str] = {}
        if filtered == 0:
            if queue == EXCLUSIVE:
                wanted = {KEY: data.draw(st.sampled_from(VALUES), label="filter value")}
            else:
                wanted = {"color": data.draw(st.sampled_from(COLORS), label="filter color")}
        self.do_dequeue(queue, count, lease_seconds, wanted)

    @rule(data=st.data(), queue=st.sampled_from(QUEUE_NAMES), count=st.integers(1, 3))
    def consume(self, data: st.DataObject, queue: str, count: int) -> None:
        """A well-behaved worker: dequeue, then complete, fail or extend each lease (or not)."""
        for lease in self.do_dequeue(queue, count, None, {}):
            op = data.draw(st.sampled_from(("complete", "fail", "extend", "keep")), label="op")
            if op != "keep":
                self.settle_one(data, queue, lease.id, op, "current", lease.lease_id)

    def settle_one(
        self, data: st.DataObject, queue: str, message_id: str, op: str, kind: str, lease: str
    ) -> None:
        """complete, fail or extend ``message_id`` with ``lease`` on both sides."""
        service = self.h.service
        coro: Coroutine[Any, Any, Message]
        if op == "complete":
            expected = model_does(self.model.complete, queue, message_id, lease)
            coro = service.complete(NS, queue, message_id, lease)
        elif op == "fail":
            delay = data.draw(st.sampled_from((None, None, 0, 60)), label="retry delay")
            expected = model_does(self.model.fail, queue, message_id, lease, delay)
            coro = service.fail(
                NS, queue, message_id, lease, error="boom", retry_delay_seconds=delay
            )
        else:
            seconds = data.draw(st.sampled_from((60, 120)), label="extend by")
            expected = model_does(self.model.extend, queue, message_id, lease, seconds)
            coro = service.extend(NS, queue, message_id, lease, seconds)
        got = self.call(coro, expected, f"{op} with {kind} lease")
        if got is not None:
            self.check_message(op, got, queue, message_id)

    @precondition(lambda self: self.has_messages())
    @rule(
        data=st.data(),
        queue=st.sampled_from(QUEUE_NAMES),
        op=st.sampled_from(("complete", "fail", "extend")),
    )
    def settle(self, data: st.DataObject, queue: str, op: str) -> None:
        """complete, fail or extend some message with some lease."""
        message_id = self.draw_target(data, queue, frozenset({M.RUNNING, M.COMPLETED}))
        kind, lease = self.draw_lease(data, queue, message_id)
        assert lease is not None
        self.settle_one(data, queue, message_id, op, kind, lease)

    # --- managing ------------------------------------------------------------------------------

    @precondition(lambda self: self.has_messages())
    @rule(data=st.data(), queue=st.sampled_from(QUEUE_NAMES), force=st.booleans())
    def cancel(self, data: st.DataObject, queue: str, force: bool) -> None:
        message_id = self.draw_target(data, queue, M.LIVE)
        kind, lease = self.draw_lease(data, queue, message_id, allow_none=True)
        expected = model_does(self.model.cancel, queue, message_id, lease, force)
        got = self.call(
            self.h.service.cancel(NS, queue, message_id, lease_id=lease, force=force),
            expected,
            f"cancel with {kind} lease{' (force)' if force else ''}",
        )
        if got is not None:
            self.check_message("cancel", got, queue, message_id)

    @precondition(lambda self: self.has_messages())
    @rule(data=st.data(), queue=st.sampled_from(QUEUE_NAMES), delay=st.sampled_from((0, 60)))
    def requeue(self, data: st.DataObject, queue: str, delay: int) -> None:
        message_id = self.draw_target(data, queue, M.DEAD_LETTERS)
        expected = model_does(self.model.requeue, queue, message_id, delay)
        got = self.call(self.h.service.requeue(NS, queue, message_id, delay), expected, "requeue")
        if got is not None:
            self.check_message("requeue", got, queue, message_id)

    @precondition(lambda self: self.has_messages())
    @rule(data=st.data(), queue=st.sampled_from(QUEUE_NAMES))
    def delete(self, data: st.DataObject, queue: str) -> None:
        message_id = self.draw_target(data, queue, M.TERMINAL | {M.RUNNING})
        expected = model_does(self.model.delete, queue, message_id)
        self.call(self.h.service.delete_message(NS, queue, message_id), expected, "delete")

    @precondition(lambda self: self.has_messages())
    @rule(
        data=st.data(),
        queue=st.sampled_from(QUEUE_NAMES),
        priority=st.sampled_from((None, -3, 0, 3)),
        offset=st.sampled_from((None, -60, 60, 120)),
    )
    def update(
        self, data: st.DataObject, queue: str, priority: int | None, offset: int | None
    ) -> None:
        message_id = self.draw_target(data, queue, M.WAITING)
        visible_at = None if offset is None else self.model.now + offset
        expected = model_does(self.model.update, queue, message_id, priority, visible_at)
        real = None if offset is None else datetime.now(UTC) + timedelta(seconds=offset)
        changes = MessageChanges(priority=priority, visible_at=real)
        got = self.call(
            self.h.service.update_message(NS, queue, message_id, changes), expected, "update"
        )
        if got is not None:
            self.check_message("update", got, queue, message_id)

    @precondition(lambda self: self.has_messages())
    @rule(data=st.data(), queue=st.sampled_from(QUEUE_NAMES))
    def get_message(self, data: st.DataObject, queue: str) -> None:
        message_id = self.draw_target(data, queue, M.LIVE)
        expected = model_does(self.model.get, queue, message_id)
        got = self.call(self.h.service.get_message(NS, queue, message_id), expected, "get")
        if got is not None:
            self.check_message("get", got, queue, message_id)

    @rule(data=st.data(), queue=st.sampled_from(QUEUE_NAMES))
    def paused_enqueue(self, data: st.DataObject, queue: str) -> None:
        """Enqueue is refused while ``enqueue_paused`` (nothing is created)."""
        self.set_paused(queue, "enqueue_paused", on=True)
        self.enqueue(data, queue, data.draw(st.integers(1, 2), label="size"))
        self.set_paused(queue, "enqueue_paused", on=False)

    @rule(data=st.data(), queue=st.sampled_from(QUEUE_NAMES), count=st.integers(1, 5))
    def paused_dequeue(self, data: st.DataObject, queue: str, count: int) -> None:
        """Dequeue returns nothing while ``dequeue_paused`` (nothing is leased)."""
        self.set_paused(queue, "dequeue_paused", on=True)
        self.do_dequeue(queue, count, None, {})
        self.set_paused(queue, "dequeue_paused", on=False)

    def set_paused(self, queue: str, switch: str, *, on: bool) -> None:
        self.h.run(self.h.service.update_queue(NS, queue, {switch: on}))
        if switch == "enqueue_paused":
            self.model.set_paused(queue, enqueue=on, dequeue=None)
        else:
            self.model.set_paused(queue, enqueue=None, dequeue=on)

    # --- time ----------------------------------------------------------------------------------

    @rule(seconds=st.sampled_from((60, 120, 300)), then_tick=st.booleans())
    def advance(self, seconds: int, then_tick: bool) -> None:
        self.model.advance(seconds)
        self.h.run(self.h.shift(seconds))
        if then_tick:
            self.scheduler_tick()

    @rule()
    def scheduler_tick(self) -> None:
        expected = self.model.tick()
        got = self.h.run(self.h.tick())
        actual = M.TickCounts(got.promoted, got.released, got.expired)
        assert actual == expected, f"tick: scheduler {actual}, model {expected}"
        event(f"tick changed {got.total > 0}")

    # --- what must hold after every step -------------------------------------------------------

    @invariant()
    def database_agrees(self) -> None:
        rows = self.h.run(self.h.rows())
        now = self.model.now
        stored = {(r["queue"], r["id"]): r for r in rows}
        modeled = {
            (q.spec.name, m.id): m for q in self.model.queues.values() for m in q.messages.values()
        }
        assert set(stored) == set(modeled), (
            f"messages: only in the database {sorted(set(stored) - set(modeled))},"
            f" only in the model {sorted(set(modeled) - set(stored))}"
        )
        problems = []

        def rel(t: int | None) -> float | None:
            return None if t is None else float(t - now)

        for key, m in modeled.items():
            r = stored[key]
            exp = {
                "state": m.state,
                "attempts": m.attempts,
                "max_attempts": m.max_attempts,
                "priority": m.priority,
                "exclusive_value": m.exclusive_value,
            }
            act = {field: r[field] for field in exp}
            if m.state == M.RUNNING:
                exp["lease_id"], act["lease_id"] = m.lease_id, r["lease_id"]
            if act != exp:
                problems.append(f"{key}: database {act}, model {exp}")
            timing = [
                ("lease_expires_at", r["lease_in"], rel(m.lease_expires_at)),
                ("expires_at", r["expires_in"], rel(m.expires_at)),
            ]
            if m.state in M.WAITING:
                timing.append(("visible_at", r["visible_in"], rel(m.visible_at)))
            problems.extend(
                f"{key}: {name} is now{actual:+.0f}s in the database, now{expected:+.0f}s"
                " in the model"
                if actual is not None and expected is not None
                else f"{key}: {name} database {actual}, model {expected}"
                for name, actual, expected in timing
                if not near(actual, expected)
            )
            # A message canceled because expires_at passed says so (requeue keeps the old
            # last_error, so only this direction is checked).
            if m.expired and r["last_error"] != "expired":
                problems.append(f"{key}: expired, but last_error is {r['last_error']!r}")
        assert not problems, "\n".join(problems)
        # Enqueue order, the tie-breaker, is the model's order.
        for name in QUEUE_NAMES:
            db_order = [r["id"] for r in rows if r["queue"] == name]
            model_order = [
                m.id for m in sorted(self.model.queues[name].messages.values(), key=lambda m: m.seq)
            ]
            assert db_order == model_order, f"{name}: enqueue order {db_order} vs {model_order}"
        # Exclusivity: at most one running message per exclusive value.
        running = [
            r["exclusive_value"]
            for r in rows
            if r["queue"] == EXCLUSIVE and r["state"] == M.RUNNING
        ]
        assert len(running) == len(set(running)), f"two running messages share a value: {running}"


def test_service_matches_model(harness: Harness) -> None:
    QueueMachine.harness = harness
    run_state_machine_as_test(QueueMachine, settings=SETTINGS)
