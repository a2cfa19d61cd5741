"""Progress of the long pipeline commands: shown on a terminal, silent in scripts.

The decision is rich's (an interactive terminal that is not ``TERM=dumb``); the commands are run
as an operator runs them, with stderr a pipe (a script) and a pseudo-terminal (a person).
"""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from rich.console import Console

from app.pipeline.progress import CommandProgress, on_terminal
from bench.pipeline_data import generate_history

ROWS = 2000


@pytest.fixture
def plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A terminal as a person has it: none of rich's overrides, a TERM that draws."""
    for name in ("FORCE_TERMINAL", "TTY_INTERACTIVE", "TTY_COMPATIBLE", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")


def test_progress_is_shown_on_a_terminal_only(plain_terminal, monkeypatch) -> None:
    leader, follower = pty.openpty()
    read, write = os.pipe()
    try:
        with open(follower, "w", closefd=False) as tty, open(write, "w", closefd=False) as pipe:
            assert on_terminal(Console(file=tty))
            assert not on_terminal(Console(file=pipe))
            assert not on_terminal(Console(file=io.StringIO()))
            monkeypatch.setenv("TERM", "dumb")
            assert not on_terminal(Console(file=tty))
    finally:
        for fd in (leader, follower, read, write):
            os.close(fd)


def _env(database_url: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("SUNDIAL_")}
    for name in ("FORCE_TERMINAL", "TTY_INTERACTIVE", "TTY_COMPATIBLE"):
        env.pop(name, None)
    env.update(
        SUNDIAL_DATABASE_URL=database_url,
        SUNDIAL_PIPELINE_EXPORT_LAG_SECONDS="0",
        TERM="xterm-256color",
        COLUMNS="120",
    )
    return env


EXPORT = [sys.executable, "-m", "app.bootstrap.commands", "pipeline", "export", "--lake"]


def test_a_script_gets_the_result_and_no_progress(db, database_url: str, tmp_path: Path) -> None:
    generate_history(db, ROWS, days=1.0, end_days_ago=1.0)
    done = subprocess.run(
        [*EXPORT, str(tmp_path / "lake")],
        env=_env(database_url),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(done.stdout)["rows"] == ROWS
    assert "export history" not in done.stderr
    assert "\x1b[" not in done.stderr  # not a single control sequence


def _drain(fd: int, into: bytearray) -> None:
    """Read a pseudo-terminal's leader side until the other side is gone (EIO)."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        into += chunk


def test_a_terminal_gets_a_progress_bar(db, database_url: str, tmp_path: Path) -> None:
    generate_history(db, ROWS, days=1.0, end_days_ago=1.0)
    leader, follower = pty.openpty()
    screen = bytearray()
    reader = threading.Thread(target=_drain, args=(leader, screen))
    reader.start()
    try:
        with open(follower, "wb") as stderr:  # the command's stderr is the terminal
            export = subprocess.Popen(
                [*EXPORT, str(tmp_path / "lake")],
                env=_env(database_url),
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        out, _ = export.communicate(timeout=120)
    finally:
        reader.join(timeout=30)
        os.close(leader)
    assert export.returncode == 0
    assert json.loads(out)["rows"] == ROWS  # stdout stays the plain JSON result
    drawn = screen.decode(errors="replace")
    assert "export history to the lake" in drawn
    assert f"{ROWS}/{ROWS}" in drawn  # the finished bar counts every row


def test_a_spark_phase_counts_tasks_on_a_terminal(spark, plain_terminal) -> None:
    out = io.StringIO()
    with CommandProgress(Console(file=out, force_terminal=True, width=120)) as progress:
        assert progress.shown
        with progress.spark(spark, "count the rows"):
            assert spark.range(0, 1000, numPartitions=4).count() == 1000
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())  # the text, no colours
    # The finished line: every task of the job's stages (at least the range's 4) counted.
    done = re.search(r"count the rows ━+ (\d+)/(\d+) Spark tasks", drawn)
    assert done is not None, drawn
    assert done.group(1) == done.group(2)
    assert int(done.group(1)) >= 4


def test_a_spark_phase_off_a_terminal_draws_nothing(spark) -> None:
    out = io.StringIO()
    with CommandProgress(Console(file=out)) as progress:
        assert not progress.shown
        with progress.spark(spark, "count the rows"):
            assert spark.range(0, 10).count() == 10
        rows = progress.phase("load")
        rows.total(10)
        rows.advance(10)
        rows.finish()
    assert out.getvalue() == ""
