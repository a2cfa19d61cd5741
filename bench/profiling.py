"""The server workers' profile: ``py-spy record`` (raw collapsed stacks, non-blocking) on every
worker during an extra, uncounted processing run, summarised by library and by function."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.context import Ctx


class Profiler:
    """py-spy record (raw collapsed stacks, non-blocking) on every server worker."""

    def __init__(self, ctx: Ctx, label: str, seconds: int) -> None:
        self.ctx, self.label, self.seconds = ctx, label, seconds
        self.procs: list[tuple[int, Path, subprocess.Popen[bytes]]] = []

    def start(self, delay: float) -> None:
        """Start py-spy on every worker ``delay`` seconds from now (in a thread)."""
        pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        assert self.ctx.env.server is not None
        workers = [p.pid for p in self.ctx.env.server.worker_processes()]

        def launch() -> None:
            time.sleep(delay)
            for pid in workers:
                path = self.ctx.out / f"profile-{self.label}-{pid}.txt"
                proc = subprocess.Popen(
                    [
                        pyspy,
                        "record",
                        "--nonblocking",
                        "-r",
                        "100",
                        "-d",
                        str(self.seconds),
                        "--format",
                        "raw",
                        "-o",
                        str(path),
                        "-p",
                        str(pid),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                self.procs.append((pid, path, proc))

        self.thread = threading.Thread(target=launch)
        self.thread.start()

    def finish(self) -> dict[str, Any]:
        """Wait for every py-spy; the summary of each worker's stacks, by pid."""
        self.thread.join()
        summary: dict[str, Any] = {}
        for pid, path, proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            if path.exists():
                summary[str(pid)] = summarize_stacks(path, self.seconds * 100)
        return summary


CATEGORIES = (
    ("postgres driver (psycopg)", ("psycopg",)),
    ("SQLAlchemy", ("sqlalchemy",)),
    ("Litestar (routing, DI, request/response)", ("litestar",)),
    ("uvicorn / httptools", ("uvicorn", "httptools")),
    ("msgspec (JSON)", ("msgspec",)),
    ("pydantic", ("pydantic",)),
    ("asyncio / event loop", ("asyncio", "uvloop", "selectors")),
    ("Sundial app/", ("/app/",)),
)


def _category(frame: str) -> str:
    for name, needles in CATEGORIES:
        if any(n in frame for n in needles):
            return name
    return "other (stdlib, …)"


def summarize_stacks(path: Path, expected: int) -> dict[str, Any]:
    """Self and inclusive share of the top functions; self share by library."""
    self_counts: dict[str, int] = {}
    incl: dict[str, int] = {}
    cats: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = [
            f
            for f in stack.split(";")
            if not f.startswith("process ") and not f.startswith("thread ")
        ]
        if not frames:
            continue
        total += count
        leaf = frames[-1]
        self_counts[leaf] = self_counts.get(leaf, 0) + count
        # The library a sample is attributed to: the innermost frame of a known library.
        cat = next(
            (c for f in reversed(frames) if (c := _category(f)) != "other (stdlib, …)"), None
        )
        cat = cat or "other (stdlib, …)"
        cats[cat] = cats.get(cat, 0) + count
        for f in {re.sub(r":\d+\)$", ")", f) for f in frames}:
            incl[f] = incl.get(f, 0) + count

    def top(d: dict[str, int], k: int) -> list[tuple[str, float]]:
        return [
            (f, round(100 * c / total, 1)) for f, c in sorted(d.items(), key=lambda x: -x[1])[:k]
        ]

    return {
        "samples": total,
        "busy_share": round(total / expected, 2) if expected else None,
        "by_library_pct": top(cats, 12),
        "top_self_pct": top(self_counts, 20),
        "top_inclusive_pct": top(incl, 30),
    }
