"""Progress of the long pipeline commands: bars on a terminal, nothing in scripts.

The commands print their result as JSON on stdout; progress goes to stderr, and only when
stderr is an interactive terminal (rich's judgement: a TTY that is not ``TERM=dumb``; rich's
``FORCE_TERMINAL`` and ``TTY_INTERACTIVE`` variables override it). A script, a pipe or a test
sees no progress at all, and pays nothing for it: Spark's task counts are only polled for a
terminal.

A phase is either counted in rows (the commands call :meth:`Phase.advance` themselves) or in
Spark tasks (:meth:`CommandProgress.spark`, polling the SparkContext's status tracker for the
jobs the phase starts).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

POLL_SECONDS = 0.5
"""How often Spark's task counts are read while a Spark phase runs on a terminal."""


def on_terminal(console: Console) -> bool:
    """Whether progress is shown on ``console``: an interactive terminal, not a dumb one."""
    return console.is_terminal and not console.is_dumb_terminal


class Phase:
    """One line of progress: a description, a count, and a total once known.

    The line appears when the phase is first told something, so phases show in the order they
    start, whenever they were set up. Thread-safe (loaders advance it from their threads).
    """

    def __init__(self, progress: Progress, description: str, unit: str) -> None:
        self._progress = progress
        self._description = description
        self._unit = unit
        self._task: TaskID | None = None
        self._lock = threading.Lock()

    def _line(self) -> TaskID:
        with self._lock:
            if self._task is None:
                self._task = self._progress.add_task(self._description, total=None, unit=self._unit)
            return self._task

    def total(self, total: int) -> None:
        self._progress.update(self._line(), total=total)

    def advance(self, count: int) -> None:
        self._progress.advance(self._line(), count)

    def tasks(self, completed: int, total: int) -> None:
        self._progress.update(self._line(), completed=completed, total=total)

    def finish(self) -> None:
        """The phase is done: its bar full (a Spark stage skipped for a cached result never
        completes its tasks), its clock stopped."""
        line = self._line()
        task = next(task for task in self._progress.tasks if task.id == line)
        total = int(task.total if task.total is not None else task.completed)
        self._progress.update(line, total=total, completed=total)
        self._progress.stop_task(line)


class CommandProgress:
    """The progress display of one command, a context manager (quiet off a terminal)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.shown = on_terminal(self.console)
        self._progress = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"),
            TimeElapsedColumn(),
            console=self.console,
            disable=not self.shown,
        )

    def __enter__(self) -> CommandProgress:
        self._progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._progress.stop()

    def phase(self, description: str, *, unit: str = "rows") -> Phase:
        """A phase counted in ``unit``; its line appears once it starts."""
        return Phase(self._progress, description, unit)

    @contextlib.contextmanager
    def spark(self, spark: SparkSession, description: str) -> Iterator[None]:
        """A phase counted in the tasks of the Spark jobs started within it."""
        if not self.shown:
            yield
            return
        phase = self.phase(description, unit="Spark tasks")
        phase.advance(0)  # the line shows from the start, before the first task count
        context = spark.sparkContext
        group = f"sundial-{uuid.uuid4().hex}"
        context.setJobGroup(group, description)
        done = threading.Event()
        poller = threading.Thread(
            target=_poll_tasks, args=(context, group, phase, done), daemon=True
        )
        poller.start()
        try:
            yield
        finally:
            done.set()
            poller.join()
            context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        _count_tasks(context, group, phase)
        phase.finish()


def _count_tasks(context: SparkContext, group: str, phase: Phase) -> None:
    tracker = context.statusTracker()
    completed = total = 0
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else ():
            stage_info = tracker.getStageInfo(stage)
            if stage_info is not None:
                completed += stage_info.numCompletedTasks
                total += stage_info.numTasks
    if total:
        phase.tasks(completed, total)


def _poll_tasks(context: SparkContext, group: str, phase: Phase, done: threading.Event) -> None:
    while not done.wait(POLL_SECONDS):
        with contextlib.suppress(Exception):  # a display only: never fail the job for it
            _count_tasks(context, group, phase)
