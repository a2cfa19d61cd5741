"""The outcome of a campaign: the write outage of every fault, and the report.

Write outage. For every fault the report gives the longest stretch without an acknowledged
enqueue that overlaps the fault (:func:`write_outage`): from the last 2xx enqueue answer before
it to the next one. It includes up to one ordinary interval between answers (~0.1-0.2 s here),
and it is a figure, not a check.
"""

from __future__ import annotations

import bisect
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.faults.checks import CheckResult
from tests.faults.config import CampaignConfig
from tests.faults.history import History

# --- write outages ----------------------------------------------------------------------------


def write_outage(
    acknowledged: Iterable[float], start: float, end: float, origin: float
) -> float | None:
    """The longest stretch between consecutive acknowledged enqueues that overlaps [start, end].

    ``acknowledged`` are the times 2xx enqueue answers arrived; ``origin`` stands for the last one
    when none came before ``start``. None when no answer arrived at or after ``end``: the outage
    did not end (within the history).
    """
    times = sorted(set(acknowledged))
    first_after = bisect.bisect_right(times, start)
    previous = times[first_after - 1] if first_after else origin
    longest = 0.0
    for at in times[first_after:]:
        longest = max(longest, at - previous)
        if at >= end:
            return longest
        previous = at
    return None


def measure_outages(history: History) -> None:
    """Set :attr:`FaultEvent.outage` of every fault from the history's enqueue answers."""
    acknowledged = [e.at for e in history.enqueues]
    for fault in history.faults:
        fault.outage = write_outage(acknowledged, fault.started, fault.ended, history.started)


# --- the report -------------------------------------------------------------------------------


@dataclass
class Report:
    """The outcome of a campaign: checks, figures, faults, and where its files are."""

    config: CampaignConfig
    history: History
    checks: list[CheckResult]
    traffic_seconds: float
    total_seconds: float
    workdir: Path
    drained: bool
    server_log_errors: int = 0
    failed_starts: int = 0
    unexpected_errors: list[str] = field(default_factory=list)
    """500 answers the servers logged: docs/api.md promises none (reported, not a violation)."""

    @property
    def needs_post_mortem(self) -> bool:
        return not self.ok or bool(self.unexpected_errors) or self.figures()["HTTP 500 answers"] > 0

    @property
    def violations(self) -> list[str]:
        found = [f"[{c.name}] {v}" for c in self.checks for v in c.violations]
        found += [f"[faults] {v}" for v in self.history.fault_violations]
        if not self.drained:
            found.append("[lost] the system did not drain: live messages remain")
        return found

    @property
    def ok(self) -> bool:
        return not self.violations

    def check(self, name: str) -> CheckResult:
        return next(c for c in self.checks if c.name == name)

    def fault_counts(self) -> Counter[str]:
        return Counter(f.name for f in self.history.faults)

    def outages(self) -> dict[str, dict[str, float | int | None]]:
        """Write outage per fault type (:attr:`FaultEvent.outage`): ``count`` of faults, ``median``
        and ``max`` seconds over those after which an enqueue was acknowledged, and ``unended``:
        how many had none after them."""
        by_name: dict[str, list[float | None]] = defaultdict(list)
        for fault in self.history.faults:
            by_name[fault.name].append(fault.outage)
        summary: dict[str, dict[str, float | int | None]] = {}
        for name, outages in sorted(by_name.items()):
            ended = [o for o in outages if o is not None]
            summary[name] = {
                "count": len(outages),
                "median": statistics.median(ended) if ended else None,
                "max": max(ended) if ended else None,
                "unended": len(outages) - len(ended),
            }
        return summary

    def figures(self) -> dict[str, Any]:
        lost, fencing = self.check("lost"), self.check("fencing")
        exclusive, dup = self.check("exclusivity"), self.check("duplicates")
        status_5xx = Counter(
            key.split()[-1]
            for key in self.history.statuses.elements()
            if key.split()[-1].isdigit() and int(key.split()[-1]) >= 500
        )
        return {
            "faults injected": len(self.history.faults),
            "messages (ids enqueued)": len(self.history.attempted),
            "acknowledged": lost.counts["acknowledged"],
            "unacknowledged (gave up)": len(self.history.unacknowledged),
            "delivered (distinct ids)": dup.counts["delivered_ids"],
            "deliveries": dup.counts["deliveries"],
            "completes acknowledged": fencing.counts["completes_acknowledged"],
            "moved to history": lost.counts["archived"],
            "lost": lost.counts["lost"],
            "live after drain": lost.counts["live"],
            "duplicated deliveries (after a fault)": dup.counts["duplicated"],
            "ids delivered more than once (after a fault)": dup.counts["ids_duplicated"],
            "retries after nack": dup.counts["retries_after_nack"],
            "leases never seen (answer lost)": dup.counts["unseen_leases"],
            "leases forgotten by a database crash": dup.counts["forgotten_leases"],
            "stale-complete attempts refused (409)": fencing.counts["stale_refused"],
            "stale completions accepted": fencing.counts["stale_accepted"],
            "exclusivity: intervals checked": exclusive.counts["intervals"],
            "exclusivity: overlaps": exclusive.counts["overlaps"],
            "exclusivity: overlaps via a lease a crash forgot (consumer view)": exclusive.counts[
                "overlaps_through_forgotten_leases"
            ],
            "exclusivity: watcher samples": self.history.watcher_samples,
            "exclusivity: watcher hits": exclusive.counts["watcher_hits"],
            "exclusivity: watcher errors (database away)": self.history.watcher_errors,
            "HTTP 5xx answers": sum(status_5xx.values()),
            "HTTP 500 answers": status_5xx.get("500", 0),
            "server log tracebacks": self.server_log_errors,
            "server starts that failed (database away)": self.failed_starts,
            "violations": len(self.violations),
        }

    def format(self) -> str:
        database = "pg_auto_failover formation" if self.config.ha else "one PostgreSQL"
        lines = [
            f"Sundial fault campaign: seed {self.config.seed}, "
            f"{self.traffic_seconds:.1f} s of traffic, {self.total_seconds:.1f} s in all, "
            f"{database}, proxy {'on' if self.config.proxied else 'off'}",
            f"workdir: {self.workdir}",
            "",
            "faults injected: "
            + ", ".join(f"{name} x{n}" for name, n in sorted(self.fault_counts().items())),
            "  (start, duration, longest gap between acknowledged enqueues overlapping it, fault)",
        ]
        lines += [
            f"  +{fault.started - self.history.started:6.1f}s "
            f"{fault.ended - fault.started:5.1f}s "
            f"{_seconds(fault.outage):>6}  {fault.name:<22} {fault.detail}"
            for fault in self.history.faults
        ]
        lines += [
            "",
            "write outage per fault type (the longest gap between acknowledged enqueues that",
            "overlaps the fault; s):",
            "",
            "| fault | count | median | max | no enqueue acknowledged after it |",
            "|---|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {name} | {row['count']} | {_seconds(row['median'])} | {_seconds(row['max'])} "
            f"| {row['unended']} |"
            for name, row in self.outages().items()
        ]
        lines += ["", "| metric | value |", "|---|---:|"]
        lines += [f"| {name} | {value} |" for name, value in self.figures().items()]
        status = Counter(self.history.statuses)
        lines += ["", "answers: " + ", ".join(f"{k} x{n}" for k, n in sorted(status.items()))]
        if self.history.server_errors or self.unexpected_errors:
            lines += ["", f"500 ANSWERS (docs/api.md: never): {len(self.history.server_errors)}"]
            lines += [f"  {e}" for e in self.history.server_errors[:20]]
            lines += [f"  logged by {e}" for e in self.unexpected_errors[:20]]
        violations = self.violations
        lines.append("")
        lines.append(f"VIOLATIONS: {len(violations)}" if violations else "no violations")
        lines += [f"  {v}" for v in violations[:50]]
        if len(violations) > 50:
            lines.append(f"  ... and {len(violations) - 50} more")
        return "\n".join(lines)


def _seconds(value: float | int | None) -> str:
    return "-" if value is None else f"{value:.1f}s"
