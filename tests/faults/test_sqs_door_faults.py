"""The fault guarantees hold through the SQS door: programs written against SQS alone (boto3),
with FIFO groups under concurrency, redrive to a dead-letter queue, and ``kill -9`` of the
servers in the middle of their traffic.

The system is the campaign's (:class:`tests.faults.campaign.Campaign`, without proxies): one
PostgreSQL cluster and two ``sundial serve`` processes. Half of the clients talk to each server,
as an SQS program talks to its one endpoint, with botocore's standard retry mode (3 attempts)
and short timeouts. The traffic, all through ``/sqs``:

- a standard queue: producers send unique bodies (single sends and batches; a send that failed
  is not retried: it may or may not have landed); consumers receive 10 at a time, delete (alone
  or in batches), "crash" now and then (never delete) and stall past the visibility timeout now
  and then (their late delete answers 200 and must change nothing: the message comes back);
- a FIFO queue (ContentBasedDeduplication; a FIFO dead-letter queue, maxReceiveCount 3): each
  group has one producer, which sends the group's messages in order (batches of 1-3) and resends
  a batch until it is answered 200, with explicit deduplication ids for half of the groups and
  content-based ones for the rest (SQS's exactly-once sending, which holds even for a resend
  that comes after the message was redriven); consumers crash now and then, a "poison" message
  of each group is never deleted (it must be redriven after 3 receives), even one whose send
  failed and was resent, and a stalled consumer's late delete (one message of each group,
  others at random) must be refused (ReceiptHandleIsInvalid);
- a consumer of the dead-letter queue deletes what it receives, once it has sent each message
  again to the FIFO queue, with its group and deduplication id, as its producer would whose
  answer was lost: within the deduplication window, so it must be deduplicated (the redrive left
  a tombstone in the FIFO queue that keeps its id) and never delivered again.

The servers are killed (-9) while traffic flows and restarted: a, then b while a restarts,
then a again once it is back (:func:`_kill_servers`). Then the producers stop, the consumers
drain every queue (no more crashes or stalls) and the checks run on what the clients saw
(:func:`check_sqs_history`, every message judged) and on the database.

What a consumer can know of a lease (a receive's visibility timeout): it was granted after the
receive was *sent* and before its answer *arrived*, so it certainly lasted from the answer's
arrival until the request's sending plus the visibility timeout, or until a delete that may
have ended it was sent; and it certainly ended by the answer's arrival plus the visibility
timeout. The checks use only these bounds, so what they report is a real violation.
``test_the_sqs_checks_catch_planted_violations`` proves each one fires.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import random
import shutil
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from tests.faults.campaign import Campaign
from tests.faults.checks import CLOCK_EPSILON, CheckResult, check_duplicates, check_exclusivity
from tests.faults.config import ADMIN_TOKEN, CampaignConfig
from tests.faults.database import ExclusivityWatcher
from tests.faults.history import AckAttempt, Delivery, History, WatcherHit
from tests.faults.servers import ServerProcess

NAMESPACE = "sqs-faults"
REGION = "eu-west-1"
STANDARD, FIFO, DLQ = "orders", "orders.fifo", "orders-dlq.fifo"
VISIBILITY = 2
"""Every queue's VisibilityTimeout (seconds)."""
MAX_RECEIVES = 3
"""The FIFO queue's RedrivePolicy maxReceiveCount."""
GROUPS = 6
POISON_INDEX = 10
"""The message of each FIFO group at this index is never deleted from the source queue."""
STALL_INDEX = 5
"""The first receive of the message of each FIFO group at this index is deleted too late."""
KILLS = 3
TRAFFIC_AFTER_LAST_RESTART = 1.5
DRAIN_TIMEOUT = 40.0

_counter = itertools.count()


# --- what the clients saw ---------------------------------------------------------------------


@dataclass
class Send:
    """One message a producer sent (or tried to), and what came back."""

    queue: str
    body: str
    first_attempt: float
    group: str | None = None
    index: int | None = None
    """The message's place in its group's order (FIFO)."""
    acked_at: float | None = None
    """When the first 200 for it arrived; None: never acknowledged (it may have landed)."""
    message_ids: set[str] = field(default_factory=set)
    failed_calls: int = 0
    answered_calls: list[float] = field(default_factory=list)
    """When each call answered 200 for it was made (before botocore's retries of it): the
    producer's, and (FIFO) a late resend after the message was dead-lettered."""
    deduplication_id: str | None = None
    """The explicit MessageDeduplicationId (FIFO); None: content-based."""


@dataclass
class DeleteAttempt:
    """One DeleteMessage (or one entry of a DeleteMessageBatch) and its answer."""

    sent: float
    answered: float | None
    ok: bool | None
    """True: answered success; False: refused (``code``); None: no answer."""
    code: str | None = None


@dataclass
class Receive:
    """One message as one ReceiveMessage delivered it (one lease), and the deletes of it."""

    queue: str
    body: str
    message_id: str
    receipt: str
    server: str
    requested: float
    received: float
    receive_count: int
    group: str | None
    intent: str
    """delete | crash (never deletes) | stall (deletes after the visibility timeout)."""
    deletes: list[DeleteAttempt] = field(default_factory=list)

    def certainly_deleted(self) -> bool:
        """A delete of this lease certainly deleted the message: on a FIFO queue an answered
        success (a stale handle is refused); on a standard queue (where a stale handle answers
        success and changes nothing) a success answered before the lease can have expired."""
        return any(
            d.ok
            and d.answered is not None
            and (self.queue != STANDARD or d.answered < self.requested + VISIBILITY)
            for d in self.deletes
        )

    def as_delivery(self) -> Delivery:
        """The lease in the campaign checkers' terms: it expires at the earliest it can
        (sent + visibility); its attempt is ApproximateReceiveCount; a delete whose effect is not
        certain counts as a complete whose answer was lost."""
        acks = []
        for d in self.deletes:
            status: int | None
            if d.ok is None or (d.ok and not self.certainly_deleted()):
                status = None
            else:
                status = 200 if d.ok else 400
            acks.append(AckAttempt("complete", d.sent, d.answered, status, d.code))
        return Delivery(
            queue=self.queue,
            id=self.message_id,
            lease_id=self.receipt,
            attempt=self.receive_count,
            server=self.server,
            requested=self.requested,
            received=self.received,
            lease_expires_at=self.requested + VISIBILITY,
            lease_seconds=VISIBILITY,
            exclusive_value=self.group,
            intent="die" if self.intent == "crash" else self.intent,
            acks=acks,
        )


@dataclass
class SqsHistory:
    """Everything the SQS programs saw."""

    sends: dict[str, Send] = field(default_factory=dict)
    receives: list[Receive] = field(default_factory=list)
    kills: list[tuple[str, float, float]] = field(default_factory=list)
    """(server, killed at, ready again at)."""
    errors: Counter[str] = field(default_factory=Counter)
    """Calls that failed after botocore's retries, by operation and error."""
    attempts: Counter[str] = field(default_factory=Counter)
    """Every HTTP attempt botocore made, by answer (status or exception), retries included."""
    watcher: History = field(default_factory=History)
    program_failures: list[str] = field(default_factory=list)
    """Programs that ended on an exception: the harness's bugs, not the server's."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count_error(self, operation: str, error: Exception) -> None:
        code = error.response["Error"]["Code"] if isinstance(error, ClientError) else None
        with self.lock:
            self.errors[f"{operation}: {code or type(error).__name__}"] += 1


# --- the checks -------------------------------------------------------------------------------


def check_sqs_history(history: SqsHistory) -> list[CheckResult]:
    """Every check over what the SQS programs saw (pure: no process, no database)."""
    deliveries = [r.as_delivery() for r in history.receives]
    fifo = [d for d in deliveries if d.queue != STANDARD]
    return [
        check_nothing_lost(history),
        check_exclusivity(fifo, history.watcher.watcher_hits),
        check_duplicates(deliveries),
        check_deleted_stays_deleted(history),
        check_group_order(history),
        check_stale_deletes(history),
        check_redrive(history),
    ]


def check_nothing_lost(history: SqsHistory) -> CheckResult:
    """Every acknowledged send was received (from its queue or the dead-letter queue); nothing
    was received that was never sent; a FIFO message is one message, however often it was sent,
    even sent again after it went to the dead-letter queue.

    Counted: the FIFO sends answered 200 by a call made after a receive of the message had
    arrived (so that call was certainly deduplicated), and among them those made after it had
    been received from the dead-letter queue (deduplicated by the tombstone a redrive leaves)."""
    result = CheckResult("lost")
    received: dict[str, set[str]] = defaultdict(set)
    for r in history.receives:
        received[r.body].add(r.message_id)
    acked = [s for s in history.sends.values() if s.acked_at is not None]
    lost = [s.body for s in acked if s.body not in received]
    result.violations += [f"acknowledged send {body!r} was never received: lost" for body in lost]
    result.violations += [
        f"received {body!r}, which no producer sent"
        for body in received
        if body not in history.sends
    ]
    for s in acked:
        if s.queue == FIFO and len(s.message_ids | received.get(s.body, set())) > 1:
            result.violations.append(f"FIFO {s.body!r} became several messages: not deduplicated")
    unacked = [s for s in history.sends.values() if s.acked_at is None]
    seen: dict[str, float] = {}  # body: when a receive of it first arrived, from any queue
    seen_dead: dict[str, float] = {}  # the same, from the dead-letter queue
    for r in history.receives:
        for first in (seen, seen_dead) if r.queue == DLQ else (seen,):
            first[r.body] = min(first.get(r.body, r.received), r.received)
    deduplicated = [
        (s.body, call)
        for s in acked
        if s.queue == FIFO
        for call in s.answered_calls
        if seen.get(s.body, math.inf) < call
    ]
    result.counts = {
        "acknowledged": len(acked),
        "FIFO sends resent after a failed call": sum(
            s.queue == FIFO and s.failed_calls > 0 for s in acked
        ),
        "FIFO resends deduplicated": len(deduplicated),
        "FIFO resends deduplicated after redrive": sum(
            seen_dead.get(body, math.inf) < call for body, call in deduplicated
        ),
        "lost": len(lost),
        "unacknowledged sends": len(unacked),
        "unacknowledged sends received": sum(s.body in received for s in unacked),
        "standard bodies received as 2+ messages": sum(
            len(ids) > 1 for body, ids in received.items() if body.startswith("std:")
        ),
    }
    return result


def check_deleted_stays_deleted(history: SqsHistory) -> CheckResult:
    """A message certainly deleted is never received again, from any queue: not even a FIFO
    message sent again after it was dead-lettered and deleted from the dead-letter queue."""
    result = CheckResult("deleted")
    by_id: dict[str, list[Receive]] = defaultdict(list)
    for r in history.receives:
        by_id[r.message_id].append(r)
    deleted_messages = 0
    for message_id, items in by_id.items():
        deleted = [
            d.answered
            for r in items
            if r.certainly_deleted()
            for d in r.deletes
            if d.ok and d.answered is not None
        ]
        if not deleted:
            continue
        deleted_messages += 1
        gone = min(deleted)
        result.violations += [
            f"{r.queue}/{message_id} ({r.body!r}) received {r.requested - gone:.3f} s after a "
            f"delete of it was answered"
            for r in items
            if r.requested > gone + CLOCK_EPSILON
        ]
    result.counts = {"messages deleted": deleted_messages}
    return result


def check_group_order(history: SqsHistory) -> CheckResult:
    """Within a FIFO group, every receive of a message comes before every receive of the
    messages sent after it (so messages are first received in send order, and a message that
    comes back comes back before the next one): nothing of a later message was granted before
    a lease of an earlier one was asked for."""
    result = CheckResult("order")
    leases: dict[str, list[Receive]] = defaultdict(list)
    for r in history.receives:
        if r.queue == FIFO:
            leases[r.body].append(r)
    groups: dict[str, list[Send]] = defaultdict(list)
    for s in history.sends.values():
        if s.queue == FIFO and s.acked_at is not None:
            groups[s.group or ""].append(s)
    pairs = 0
    for group, sends in groups.items():
        sends.sort(key=lambda s: s.index or 0)
        latest: tuple[float, Send] | None = None  # the latest ask for an earlier message
        for s in sends:
            mine = leases.get(s.body, [])
            if latest is not None and mine:
                pairs += 1
                first = min(mine, key=lambda r: r.received)
                if first.received < latest[0] - CLOCK_EPSILON:
                    result.violations.append(
                        f"group {group}: {s.body!r} received {latest[0] - first.received:.3f} s "
                        f"before a receive of the earlier {latest[1].body!r} was even asked for"
                    )
            for r in mine:
                if latest is None or r.requested > latest[0]:
                    latest = (r.requested, s)
    result.counts = {"groups": len(groups), "ordered pairs checked": pairs}
    return result


def check_stale_deletes(history: SqsHistory) -> CheckResult:
    """A delete sent after its lease had certainly expired (its receive's answer plus the
    visibility timeout) is refused with ReceiptHandleIsInvalid on a FIFO queue (unless it repeats
    one sent in time whose answer was lost), and changes nothing on a standard queue: the message
    is received again."""
    result = CheckResult("stale deletes")
    later: dict[str, list[Receive]] = defaultdict(list)
    for r in history.receives:
        later[r.message_id].append(r)
    refused = changed_nothing = 0
    for r in history.receives:
        expired = r.received + VISIBILITY + CLOCK_EPSILON
        for d in r.deletes:
            if d.sent <= expired:
                continue
            if r.queue == STANDARD:
                if d.ok:
                    again = [o for o in later[r.message_id] if o.receive_count > r.receive_count]
                    if again:
                        changed_nothing += 1
                    else:
                        result.violations.append(
                            f"{r.queue}/{r.message_id}: a delete with an expired receipt "
                            "answered success and the message never came back"
                        )
                continue
            if d.ok is False and d.code == "ReceiptHandleIsInvalid":
                refused += 1
            elif d.ok:
                retry = any(o.sent <= expired and o.ok is not False for o in r.deletes if o != d)
                if not retry:
                    result.violations.append(
                        f"{r.queue}/{r.message_id}: a delete sent {d.sent - expired:.3f} s after "
                        "its lease expired was accepted"
                    )
            elif d.ok is False:
                result.violations.append(
                    f"{r.queue}/{r.message_id}: a late delete was refused with {d.code}, "
                    "expected ReceiptHandleIsInvalid"
                )
    result.counts = {"refused": refused, "standard: changed nothing": changed_nothing}
    return result


def check_redrive(history: SqsHistory) -> CheckResult:
    """The FIFO queue's RedrivePolicy: a message is received at most maxReceiveCount times from
    it; one received that often and never deleted (not even tried) reaches the dead-letter queue;
    only FIFO messages reach it, with their group."""
    result = CheckResult("redrive")
    source: dict[str, list[Receive]] = defaultdict(list)
    dead: dict[str, list[Receive]] = defaultdict(list)
    for r in history.receives:
        if r.queue == FIFO:
            source[r.message_id].append(r)
        elif r.queue == DLQ:
            dead[r.message_id].append(r)
    for message_id, items in source.items():
        counts = [r.receive_count for r in items]
        if max(counts) > MAX_RECEIVES or len(items) > MAX_RECEIVES:
            result.violations.append(
                f"{FIFO}/{message_id} received {len(items)} times (receive counts {counts}), "
                f"more than maxReceiveCount {MAX_RECEIVES}"
            )
        never_deleted = not any(r.deletes for r in items)
        if len(items) == MAX_RECEIVES and never_deleted and message_id not in dead:
            result.violations.append(
                f"{FIFO}/{message_id} received {MAX_RECEIVES} times, never deleted, and "
                "never reached the dead-letter queue"
            )
    for message_id, items in dead.items():
        sent = history.sends.get(items[0].body)
        if sent is None or sent.queue != FIFO:
            result.violations.append(f"{DLQ}/{message_id} ({items[0].body!r}) is no FIFO message")
        elif any(r.group != sent.group for r in items):
            result.violations.append(f"{DLQ}/{message_id} lost its group {sent.group}")
    result.counts = {
        "redriven": len(dead),
        "redriven poison": sum(
            items[0].body.endswith(f":{POISON_INDEX}") for items in dead.values()
        ),
    }
    return result


# --- the programs -----------------------------------------------------------------------------


class Programs:
    """The SQS programs (producers and consumers, a thread each) and their boto3 clients."""

    def __init__(self, servers: list[ServerProcess], key: tuple[str, str], seed: int) -> None:
        self.history = SqsHistory()
        self.servers = {s.name: s for s in servers}
        self.key = key
        self.rng = random.Random(seed)
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.draining = threading.Event()
        self.threads: list[threading.Thread] = []
        self.urls: dict[str, dict[str, str]] = {}
        self.resent_late: set[str] = set()

    def client(self, server: str) -> Any:
        """A boto3 client as an SQS program configures one: standard retries, short timeouts."""
        client = boto3.client(
            "sqs",
            endpoint_url=f"{self.servers[server].base}/sqs",
            region_name=REGION,
            aws_access_key_id=self.key[0],
            aws_secret_access_key=self.key[1],
            config=Config(
                retries={"max_attempts": 3, "mode": "standard"},
                connect_timeout=1,
                read_timeout=5,
            ),
        )
        client.meta.events.register("needs-retry.sqs", self._count_attempt)
        return client

    def _count_attempt(self, response: Any = None, caught_exception: Any = None, **_: Any) -> None:
        seen = type(caught_exception).__name__ if response is None else response[0].status_code
        with self.history.lock:
            self.history.attempts[str(seen)] += 1

    def create_queues(self) -> None:
        admin = self.client("a")
        attributes = {"VisibilityTimeout": str(VISIBILITY)}
        admin.create_queue(QueueName=STANDARD, Attributes=attributes)
        fifo = {**attributes, "FifoQueue": "true", "ContentBasedDeduplication": "true"}
        dlq = admin.create_queue(QueueName=DLQ, Attributes=fifo)["QueueUrl"]
        arn = admin.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])
        policy = {"deadLetterTargetArn": arn["Attributes"]["QueueArn"], "maxReceiveCount": 3}
        admin.create_queue(QueueName=FIFO, Attributes={**fifo, "RedrivePolicy": json.dumps(policy)})
        for name in self.servers:
            client = self.client(name)
            self.urls[name] = {
                q: client.get_queue_url(QueueName=q)["QueueUrl"] for q in (STANDARD, FIFO, DLQ)
            }

    def start(self) -> None:
        plan: list[tuple[Callable[..., None], tuple[Any, ...]]] = [
            (self.produce_standard, ("a",)),
            (self.produce_standard, ("b",)),
            (self.produce_fifo, ("a", [f"g{i}" for i in range(0, GROUPS, 2)], True)),
            (self.produce_fifo, ("b", [f"g{i}" for i in range(1, GROUPS, 2)], False)),
            (self.consume, ("a", STANDARD)),
            (self.consume, ("b", STANDARD)),
            (self.consume, ("a", FIFO)),
            (self.consume, ("b", FIFO)),
            (self.consume, ("b", DLQ)),
        ]
        # Clients are made here, one per thread: making one is not thread-safe.
        for target, args in plan:
            client = self.client(args[0])
            seed = self.rng.random()
            thread = threading.Thread(
                target=self._run, args=(target, client, seed, *args), daemon=True
            )
            self.threads.append(thread)
        for thread in self.threads:
            thread.start()

    def _run(self, target: Callable[..., None], *args: Any) -> None:
        """A program; one that ends on an exception of its own is recorded (a harness bug)."""
        try:
            target(*args)
        except Exception as error:  # noqa: BLE001 - recorded for the assertion
            self.history.program_failures.append(f"{target.__name__}{args[2:]}: {error!r}")

    def join(self, timeout: float) -> None:
        self.stop_producing.set()
        self.stop_consuming.set()
        limit = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.1, limit - time.monotonic()))
        alive = [t.name for t in self.threads if t.is_alive()]
        assert not alive, f"program threads still running: {alive}"

    # --- producers ----------------------------------------------------------------------------

    def produce_standard(self, client: Any, seed: float, server: str) -> None:
        """Unique bodies, alone or in batches; a failed send is not retried."""
        rng = random.Random(seed)
        url = self.urls[server][STANDARD]
        while not self.stop_producing.is_set():
            n = rng.choice((1, 1, 1, 3, 10))
            sends = [
                Send(STANDARD, f"std:{server}:{next(_counter)}", time.time()) for _ in range(n)
            ]
            for s in sends:
                self.history.sends[s.body] = s
            try:
                if n == 1:
                    answer = client.send_message(QueueUrl=url, MessageBody=sends[0].body)
                    self._acked(sends[0], answer["MessageId"])
                else:
                    entries = [{"Id": f"e{i}", "MessageBody": s.body} for i, s in enumerate(sends)]
                    answer = client.send_message_batch(QueueUrl=url, Entries=entries)
                    for ok in answer.get("Successful", []):
                        self._acked(sends[int(ok["Id"][1:])], ok["MessageId"])
                    for failed in answer.get("Failed", []):
                        self.history.count_error("SendMessageBatch entry", Exception(failed))
            except (BotoCoreError, ClientError) as error:
                self.history.count_error("Send", error)
            self.stop_producing.wait(0.3)

    def produce_fifo(
        self, client: Any, seed: float, server: str, groups: list[str], explicit: bool
    ) -> None:
        """Each group's messages in order, in batches of 1-3, each batch sent again until it is
        answered 200 (with the same deduplication ids: explicit ones, or the bodies' hashes)."""
        rng = random.Random(seed)
        url = self.urls[server][FIFO]
        index = dict.fromkeys(groups, 0)
        for group in itertools.cycle(groups):
            if self.stop_producing.is_set():
                return
            sends = []
            for _ in range(rng.choice((1, 1, 2, 3))):
                body = f"fifo:{group}:{index[group]}"
                sends.append(Send(FIFO, body, time.time(), group, index[group]))
                index[group] += 1
            for s in sends:
                self.history.sends[s.body] = s
            entries = []
            for i, s in enumerate(sends):
                entry = {"Id": f"e{i}", "MessageBody": s.body, "MessageGroupId": group}
                if explicit:
                    s.deduplication_id = s.body.replace(":", "-")
                    entry["MessageDeduplicationId"] = s.deduplication_id
                entries.append(entry)
            while not self._send_fifo(client, url, sends, entries):
                if self.stop_producing.is_set():
                    return  # this batch stays unacknowledged, and it is the group's last
                self.stop_producing.wait(0.1)
            self.stop_producing.wait(0.15)

    def _send_fifo(self, client: Any, url: str, sends: list[Send], entries: list[Any]) -> bool:
        call = time.time()
        try:
            if len(entries) == 1:
                answer = client.send_message(
                    QueueUrl=url, **{k: v for k, v in entries[0].items() if k != "Id"}
                )
                self._acked(sends[0], answer["MessageId"], call)
                return True
            answer = client.send_message_batch(QueueUrl=url, Entries=entries)
        except (BotoCoreError, ClientError) as error:
            self.history.count_error("Send FIFO", error)
            for s in sends:
                s.failed_calls += 1
            return False
        for failed in answer.get("Failed", []):
            self.history.count_error("SendMessageBatch FIFO entry", Exception(failed))
        if answer.get("Failed"):
            return False
        for ok in answer["Successful"]:
            self._acked(sends[int(ok["Id"][1:])], ok["MessageId"], call)
        return True

    def _acked(self, send: Send, message_id: str, call: float | None = None) -> None:
        if send.acked_at is None:
            send.acked_at = time.time()
        if call is not None:
            send.answered_calls.append(call)
        send.message_ids.add(message_id)

    # --- consumers ----------------------------------------------------------------------------

    def consume(self, client: Any, seed: float, server: str, queue: str) -> None:
        """Receive up to 10, long-polling 1 s; then per message: delete (some in a batch), crash
        (never delete) or stall past the visibility timeout and then delete. A message received
        from the dead-letter queue is first sent again to the FIFO queue, once, as its producer
        would whose answer was lost (:meth:`_resend_late`)."""
        rng = random.Random(seed)
        url = self.urls[server][queue]
        while not self.stop_consuming.is_set():
            requested = time.time()
            try:
                answer = client.receive_message(
                    QueueUrl=url,
                    MaxNumberOfMessages=10,
                    WaitTimeSeconds=1,
                    MessageSystemAttributeNames=["All"],
                )
            except (BotoCoreError, ClientError) as error:
                self.history.count_error(f"Receive {queue}", error)
                self.stop_consuming.wait(0.1)
                continue
            received = time.time()
            got = []
            for message in answer.get("Messages", []):
                system = message.get("Attributes", {})
                count = int(system.get("ApproximateReceiveCount", 0))
                r = Receive(
                    queue=queue,
                    body=message["Body"],
                    message_id=message["MessageId"],
                    receipt=message["ReceiptHandle"],
                    server=server,
                    requested=requested,
                    received=received,
                    receive_count=count,
                    group=system.get("MessageGroupId"),
                    intent=self._intent(rng, queue, message["Body"], count),
                )
                self.history.receives.append(r)
                got.append(r)
            for r in got:
                if queue == DLQ and r.body not in self.resent_late:
                    self.resent_late.add(r.body)
                    self._resend_late(client, server, r.body)
            deleting = [r for r in got if r.intent == "delete"]
            if len(deleting) > 1 and rng.random() < 0.5:
                self._delete_batch(client, url, deleting)
            else:
                for r in deleting:
                    self._delete(client, url, r)
            for r in got:
                if r.intent == "stall":
                    self.stop_consuming.wait(max(0.0, r.received + VISIBILITY + 0.3 - time.time()))
                    self._delete(client, url, r)

    def _resend_late(self, client: Any, server: str, body: str) -> None:
        """Send a dead-lettered message again to the FIFO queue, with its group and deduplication
        id, until answered 200: within the deduplication window, so it must be answered with the
        message's id and change nothing (the tombstone the redrive left keeps the id)."""
        send = self.history.sends[body]
        entry = {"MessageBody": body, "MessageGroupId": send.group}
        if send.deduplication_id is not None:
            entry["MessageDeduplicationId"] = send.deduplication_id
        while not self.stop_consuming.is_set():
            call = time.time()
            try:
                answer = client.send_message(QueueUrl=self.urls[server][FIFO], **entry)
            except (BotoCoreError, ClientError) as error:
                self.history.count_error("Late resend FIFO", error)
                self.stop_consuming.wait(0.1)
            else:
                self._acked(send, answer["MessageId"], call)
                return

    def _intent(self, rng: random.Random, queue: str, body: str, count: int) -> str:
        if queue == DLQ:
            return "delete"
        if queue == FIFO and body.endswith(f":{POISON_INDEX}"):
            # A poison message: every receive of it fails, even if its send failed and was
            # resent (the resend may come after the redrive: it must be deduplicated).
            return "crash"
        if self.draining.is_set():
            return "delete"
        if queue == FIFO and body.endswith(f":{STALL_INDEX}") and count == 1:
            return "stall"
        roll = rng.random()
        return "crash" if roll < 0.04 else "stall" if roll < 0.07 else "delete"

    def _delete(self, client: Any, url: str, r: Receive) -> None:
        sent = time.time()
        try:
            client.delete_message(QueueUrl=url, ReceiptHandle=r.receipt)
        except ClientError as error:
            code = error.response["Error"]["Code"]
            known = error.response["ResponseMetadata"]["HTTPStatusCode"] < 500
            r.deletes.append(DeleteAttempt(sent, time.time(), False if known else None, code))
            self.history.count_error("Delete", error)
        except BotoCoreError as error:
            r.deletes.append(DeleteAttempt(sent, None, None))
            self.history.count_error("Delete", error)
        else:
            r.deletes.append(DeleteAttempt(sent, time.time(), True))

    def _delete_batch(self, client: Any, url: str, receives: list[Receive]) -> None:
        sent = time.time()
        entries = [{"Id": f"e{i}", "ReceiptHandle": r.receipt} for i, r in enumerate(receives)]
        try:
            answer = client.delete_message_batch(QueueUrl=url, Entries=entries)
        except (BotoCoreError, ClientError) as error:
            for r in receives:
                r.deletes.append(DeleteAttempt(sent, None, None))
            self.history.count_error("DeleteBatch", error)
            return
        answered = time.time()
        for ok in answer.get("Successful", []):
            receives[int(ok["Id"][1:])].deletes.append(DeleteAttempt(sent, answered, True))
        for failed in answer.get("Failed", []):
            known = failed.get("SenderFault", True)
            receives[int(failed["Id"][1:])].deletes.append(
                DeleteAttempt(sent, answered, False if known else None, failed.get("Code"))
            )


# --- the run ----------------------------------------------------------------------------------


@dataclass
class Outcome:
    """A run's history, the checks' results and what the database and the APIs said at the end."""

    history: SqsHistory
    checks: list[CheckResult]
    drained: bool
    rows: list[tuple[str, str, str, str | None]]
    """(queue, message id, state, last error) of every message of the namespace, live or in
    history."""
    rest_counts: dict[str, dict[str, int]]
    sqs_counts: dict[str, dict[str, str]]
    tracebacks: int
    seconds: dict[str, float]
    workdir: str

    @property
    def violations(self) -> list[str]:
        return [f"[{c.name}] {v}" for c in self.checks for v in c.violations]

    def figures(self) -> dict[str, Any]:
        counts = {f"{c.name}: {k}": v for c in self.checks for k, v in c.counts.items()}
        by_queue = Counter(r.queue for r in self.history.receives)
        return {
            "kills": len(self.history.kills),
            "sends acknowledged": counts["lost: acknowledged"],
            "receives": dict(by_queue),
            "messages received": len({r.message_id for r in self.history.receives}),
            "final states": dict(Counter((q, state) for q, _id, state, _error in self.rows)),
            **counts,
            "failed calls": dict(self.history.errors),
            "HTTP attempts": dict(self.history.attempts),
            "seconds": {k: round(v, 1) for k, v in self.seconds.items()},
        }

    def format(self) -> str:
        lines = [f"{k}: {v}" for k, v in self.figures().items()]
        lines += [
            f"kill {name} at {at:.1f}, ready after {up - at:.1f} s"
            for name, at, up in self.history.kills
        ]
        lines += [f"VIOLATIONS: {len(self.violations)}", *self.violations[:40]]
        lines.append(f"workdir: {self.workdir}")
        return "\n".join(lines)


async def _run(seed: int) -> Outcome:
    began = time.monotonic()
    campaign = Campaign(CampaignConfig(use_proxy=False, seed=seed))
    try:
        await campaign.setup()
        set_up = time.monotonic()
        base = campaign.servers[0].base
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(base_url=f"{base}/v1", headers=admin, timeout=10) as http:
            answer = await http.post("/namespaces", json={"name": NAMESPACE})
            assert answer.status_code == 201, answer.text
            answer = await http.post(f"/namespaces/{NAMESPACE}/tokens", json={"kind": "sqs"})
            assert answer.status_code == 201, answer.text
            key = (answer.json()["access_key_id"], answer.json()["token"])
        programs = Programs(campaign.servers, key, seed)
        await asyncio.to_thread(programs.create_queues)
        history = programs.history

        stop_watcher = asyncio.Event()
        deadline = time.monotonic() + 240
        watcher = asyncio.create_task(
            ExclusivityWatcher(campaign.database, history.watcher).run(stop_watcher, deadline)
        )
        traffic = time.monotonic()
        drained = False
        try:
            programs.start()
            await _kill_servers(campaign.servers, history)
            await asyncio.sleep(TRAFFIC_AFTER_LAST_RESTART)
            programs.stop_producing.set()
            programs.draining.set()
            drain = time.monotonic()
            drained = await _drain(campaign)
            drained_at = time.monotonic()
        finally:
            await asyncio.to_thread(programs.join, 20)
            stop_watcher.set()
            await asyncio.wait_for(watcher, 10)

        rows = await campaign.database.fetch(
            """
            SELECT q.name, m.id, m.state::text, m.last_error
            FROM messages m JOIN queues q ON q.id = m.queue_id WHERE q.namespace = %s
            UNION ALL
            SELECT h.queue, h.id, h.state::text, h.last_error
            FROM message_history h WHERE h.namespace = %s
            """,
            (NAMESPACE, NAMESPACE),
        )
        async with httpx.AsyncClient(base_url=f"{base}/v1", headers=admin, timeout=10) as http:
            answer = await http.get(f"/namespaces/{NAMESPACE}/queues")
            assert answer.status_code == 200, answer.text
            rest_counts = {q["name"]: q["counts"] for q in answer.json()["queues"]}
        reader = programs.client("b")
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        sqs_counts = {
            q: (
                await asyncio.to_thread(
                    reader.get_queue_attributes, QueueUrl=url, AttributeNames=names
                )
            )["Attributes"]
            for q, url in programs.urls["b"].items()
        }
        return Outcome(
            history=history,
            checks=check_sqs_history(history),
            drained=drained,
            rows=[tuple(row) for row in rows],
            rest_counts=rest_counts,
            sqs_counts=sqs_counts,
            tracebacks=sum(s.tracebacks() for s in campaign.servers),
            seconds={
                "setup": set_up - began,
                "traffic with kills": drain - traffic,
                "drain": drained_at - drain,
                "total": time.monotonic() - began,
            },
            workdir=str(campaign.workdir),
        )
    finally:
        await campaign.teardown()


async def _kill_servers(servers: list[ServerProcess], history: SqsHistory) -> None:
    """kill -9 of a; 3 s later of b, while a may still be restarting (a restart takes 2-12 s,
    the longer on a busy machine: then for a while neither answers); of a again 1.5 s after it is
    back. A killed server is started again at once, as a supervisor would."""
    a, b = servers

    async def kill(server: ServerProcess) -> None:
        killed = time.time()
        server.kill()
        await server.start(60)
        history.kills.append((server.name, killed, time.time()))

    await asyncio.sleep(2.0)
    first = asyncio.create_task(kill(a))
    await asyncio.sleep(3.0)
    second = asyncio.create_task(kill(b))
    await first
    await asyncio.sleep(1.5)
    await asyncio.gather(second, kill(a))


async def _drain(campaign: Campaign) -> bool:
    """Wait (bounded) until every message of the namespace is finished: none live, none errored
    and waiting for the scheduler to move it to the dead-letter queue (the canceled tombstone a
    redrive leaves in the source queue is finished)."""
    limit = time.monotonic() + DRAIN_TIMEOUT
    while time.monotonic() < limit:
        rows = await campaign.database.fetch(
            "SELECT count(*) FROM messages m JOIN queues q ON q.id = m.queue_id "
            "WHERE q.namespace = %s AND m.state NOT IN ('completed', 'canceled')",
            (NAMESPACE,),
        )
        if rows[0][0] == 0:
            return True
        await asyncio.sleep(0.25)
    return False


@pytest.mark.slow
@pytest.mark.serial
def test_guarantees_hold_through_the_sqs_door_under_server_kills() -> None:
    """Nothing acknowledged is lost, a FIFO group never has two messages in flight and is
    received in send order, redrive follows maxReceiveCount, a deleted message stays deleted and
    a stale delete changes nothing, while the servers are killed under boto3 traffic; at the end
    every message is deleted (or was dead-lettered, leaving a canceled tombstone that kept its
    deduplication id, then deleted) and nothing is live."""
    outcome = asyncio.run(_run(seed=7))
    report = outcome.format()
    print(report)  # shown with -s, and by pytest when the test fails
    figures = outcome.figures()

    # The run exercised what it claims to check.
    assert len(outcome.history.kills) == KILLS, report
    assert figures["sends acknowledged"] > 150, report
    assert figures["receives"].get(FIFO, 0) > 80, report
    assert figures["redrive: redriven poison"] >= 1, report
    # Every dead-lettered message was sent again after its redrive (and deduplicated: checked).
    late = figures["lost: FIFO resends deduplicated after redrive"]
    assert late >= figures["redrive: redriven"], report
    assert figures["exclusivity: intervals"] > 80, report
    assert figures["order: ordered pairs checked"] > 50, report
    assert figures["stale deletes: refused"] > 0, report
    assert figures["duplicates: duplicated"] > 0, report  # redeliveries happened
    assert outcome.history.watcher.watcher_samples > 50, report
    # A kill cut requests in flight (long polls, mostly); botocore retried them.
    assert outcome.history.attempts["ConnectionClosedError"] > 0, report
    assert not outcome.history.program_failures, outcome.history.program_failures

    # The guarantees.
    assert outcome.drained, report
    assert not outcome.violations, report
    assert not [k for k in outcome.history.errors if "InternalFailure" in k], report
    assert not [k for k in outcome.history.attempts if k.startswith("50") and k != "503"], report
    assert outcome.tracebacks == 0, report
    # Sundial's side, by SQL: the dead-letter queue holds exactly the messages received from it,
    # deleted (completed); each left a tombstone in the FIFO queue (canceled, "dead-lettered to"
    # the dead-letter queue), which kept its deduplication id; every other message of the
    # namespace ended deleted (completed), and every acknowledged send is one of them.
    dead = {r.message_id for r in outcome.history.receives if r.queue == DLQ}
    assert {(q, s) for q, _i, s, _e in outcome.rows if q == DLQ} <= {(DLQ, "completed")}, report
    assert {i for q, i, _s, _e in outcome.rows if q == DLQ} == dead, report
    tombstone = ("canceled", f"dead-lettered to {DLQ}")
    tombstones = {i for q, i, s, e in outcome.rows if q == FIFO and (s, e) == tombstone}
    assert tombstones == dead, report
    others = Counter(
        (q, s) for q, i, s, _e in outcome.rows if q != DLQ and not (q == FIFO and i in dead)
    )
    assert {s for _q, s in others} == {"completed"}, others
    assert len({(q, i) for q, i, _s, _e in outcome.rows}) == len(outcome.rows), report
    acked_ids = {
        i for s in outcome.history.sends.values() if s.acked_at is not None for i in s.message_ids
    }
    assert acked_ids <= {i for _q, i, _s, _e in outcome.rows}, report
    # Nothing is live, by the REST API and SQS.
    for queue, counts in outcome.rest_counts.items():
        live = {k: counts[k] for k in ("invisible", "pending", "running", "errored")}
        assert set(live.values()) == {0}, (queue, counts)
    for queue, values in outcome.sqs_counts.items():
        assert set(values.values()) == {"0"}, (queue, values)

    shutil.rmtree(outcome.workdir, ignore_errors=True)  # kept for the post-mortem on failure


# --- the checks fire --------------------------------------------------------------------------

T0 = 1_800_000_000.0


def _fifo_receive(
    body: str,
    at: float,
    *,
    count: int = 1,
    delete_at: float | None = None,
    queue: str = FIFO,
    message_id: str | None = None,
    ok: bool | None = True,
    code: str | None = None,
) -> Receive:
    """A receive asked at T0+at-0.05 and answered at T0+at, deleted at T0+delete_at (answered
    10 ms later) or never."""
    group = body.split(":")[1] if body.startswith("fifo:") else None
    r = Receive(
        queue=queue,
        body=body,
        message_id=message_id or f"id-{body}",
        receipt=f"receipt-{body}-{queue}-{count}",
        server="a",
        requested=T0 + at - 0.05,
        received=T0 + at,
        receive_count=count,
        group=group,
        intent="delete" if delete_at is not None else "crash",
    )
    if delete_at is not None:
        answered = None if ok is None else T0 + delete_at + 0.01
        r.deletes.append(DeleteAttempt(T0 + delete_at, answered, ok, code))
    return r


def _sound_history() -> SqsHistory:
    """Group g0: three messages received and deleted in turn; m1 comes back once after a crash;
    a poison message m3 goes to the dead-letter queue after three receives. m3's send failed
    for 11 s: its resend, answered with its id after the redrive, was deduplicated."""
    history = SqsHistory()
    for i in range(4):
        body = f"fifo:g0:{i}"
        history.sends[body] = Send(FIFO, body, T0 - 1, "g0", i, T0 - 0.9, {f"id-{body}"})
    history.sends["fifo:g0:3"].failed_calls = 9
    history.sends["fifo:g0:3"].answered_calls = [T0 + 10.0]
    history.sends["fifo:g0:3"].acked_at = T0 + 10.1
    history.receives = [
        _fifo_receive("fifo:g0:0", 0.0, delete_at=0.5),
        _fifo_receive("fifo:g0:1", 0.6),  # crashed: held until at most 0.55 + 2
        _fifo_receive("fifo:g0:1", 2.7, count=2, delete_at=3.0),
        _fifo_receive("fifo:g0:2", 3.1, delete_at=3.2),
        _fifo_receive("fifo:g0:3", 3.3),
        _fifo_receive("fifo:g0:3", 5.4, count=2),
        _fifo_receive("fifo:g0:3", 7.5, count=3),
        _fifo_receive("fifo:g0:3", 9.7, queue=DLQ, delete_at=9.8),
    ]
    return history


def _violations(history: SqsHistory) -> list[str]:
    return [f"[{c.name}] {v}" for c in check_sqs_history(history) for v in c.violations]


def test_the_sqs_checks_catch_planted_violations() -> None:
    """Each check of the SQS run fires on a history with its guarantee broken, and none fires on
    the sound history they are planted in."""
    assert _violations(_sound_history()) == []

    def planted(change: Callable[[SqsHistory], None]) -> list[str]:
        history = _sound_history()
        change(history)
        return _violations(history)

    # A lost message: acknowledged, never received.
    def lose(h: SqsHistory) -> None:
        h.sends["fifo:g0:4"] = Send(FIFO, "fifo:g0:4", T0 - 1, "g0", 4, T0 - 0.9)

    assert planted(lose) == ["[lost] acknowledged send 'fifo:g0:4' was never received: lost"]

    # Two messages of one group in flight at once: m2 received while m1's lease was still valid.
    def overlap(h: SqsHistory) -> None:
        h.receives[3] = _fifo_receive("fifo:g0:2", 2.9, delete_at=3.2)

    found = planted(overlap)
    assert any("[exclusivity]" in v and "valid for" in v for v in found), found

    # A later message received before an earlier one was (first receive out of send order).
    def reorder(h: SqsHistory) -> None:
        h.receives[0] = _fifo_receive("fifo:g0:0", 3.25, delete_at=3.26)
        h.receives[3] = _fifo_receive("fifo:g0:2", 0.0, delete_at=0.5)

    assert any(v.startswith("[order]") for v in planted(reorder)), planted(reorder)

    # A message received again after its delete was answered.
    def resurrect(h: SqsHistory) -> None:
        h.receives.append(_fifo_receive("fifo:g0:2", 12.0, count=2, delete_at=12.1))

    assert any(v.startswith("[deleted]") for v in planted(resurrect)), planted(resurrect)

    # A delete sent after the lease had expired, accepted on a FIFO queue.
    def stale(h: SqsHistory) -> None:
        h.receives[1] = _fifo_receive("fifo:g0:1", 0.6, delete_at=2.7)

    assert any("after its lease expired was accepted" in v for v in planted(stale))
    refused = _sound_history()
    refused.receives[1] = _fifo_receive(
        "fifo:g0:1", 0.6, delete_at=2.7, ok=False, code="ReceiptHandleIsInvalid"
    )
    assert _violations(refused) == []

    # On a standard queue a stale delete answers success but must change nothing.
    def stale_standard(h: SqsHistory) -> None:
        h.sends["std:a:1"] = Send(STANDARD, "std:a:1", T0, acked_at=T0 + 0.01)
        h.receives.append(_fifo_receive("std:a:1", 1.0, queue=STANDARD, delete_at=3.5))

    assert planted(stale_standard) == [
        "[stale deletes] orders/id-std:a:1: a delete with an expired receipt answered success "
        "and the message never came back"
    ]

    # Received more often than maxReceiveCount, or never redriven.
    def fourth(h: SqsHistory) -> None:
        h.receives.insert(7, _fifo_receive("fifo:g0:3", 9.6, count=4))

    assert any("more than maxReceiveCount" in v for v in planted(fourth)), planted(fourth)

    def not_redriven(h: SqsHistory) -> None:
        del h.receives[7]

    assert planted(not_redriven) == [
        f"[redrive] {FIFO}/id-fifo:g0:3 received 3 times, never deleted, and never reached "
        "the dead-letter queue"
    ]

    # The live watcher saw two running messages of one group.
    def watched(h: SqsHistory) -> None:
        h.watcher.watcher_hits.append(WatcherHit(T0, 3, "g0", 2))

    assert planted(watched) == [
        "[exclusivity] watcher: 2 running messages of value 'g0' in queue 3"
    ]


def test_a_fifo_send_resent_after_its_redrive_is_judged_like_any() -> None:
    """A FIFO send answered after its message was dead-lettered is judged by every check: the
    deduplicated resend is counted, and a resend that came back as a new message of the source
    queue (a second life after the redrive) breaks them."""
    sound = {c.name: c for c in check_sqs_history(_sound_history())}
    assert sound["lost"].counts["FIFO sends resent after a failed call"] == 1
    assert sound["lost"].counts["FIFO resends deduplicated"] == 1
    assert sound["lost"].counts["FIFO resends deduplicated after redrive"] == 1

    history = _sound_history()
    history.receives.append(_fifo_receive("fifo:g0:3", 11.0, delete_at=11.1))  # receive 1 again
    found = _violations(history)
    assert any(v.startswith("[deleted]") and "fifo:g0:3" in v for v in found), found
    assert any(v.startswith("[duplicates]") and "two leases" in v for v in found), found
    assert any(v.startswith("[redrive]") and "more than maxReceiveCount" in v for v in found)

    # The second life also breaks the group's order when a later message came before it.
    history = _sound_history()
    history.sends["fifo:g0:2"].answered_calls = [T0 + 10.0]
    history.sends["fifo:g0:2"].acked_at = T0 + 10.1
    history.receives.append(_fifo_receive("fifo:g0:2", 11.0, delete_at=11.1))
    found = _violations(history)
    assert any(v.startswith("[order]") for v in found), found
    assert any(v.startswith("[deleted]") and "fifo:g0:2" in v for v in found), found
