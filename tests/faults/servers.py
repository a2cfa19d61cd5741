"""The ``sundial serve`` processes a campaign drives: started, probed, killed, stopped, read."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx

from tests.faults.config import HarnessError
from tests.processes import ROOT, SUNDIAL


class ServerExited(Exception):
    """The server process ended while it was starting."""

    def __init__(self, code: int) -> None:
        super().__init__(f"exited with {code}")
        self.code = code


class ServerProcess:
    """One ``sundial serve`` process (one worker) that can be killed and started again."""

    def __init__(self, name: str, port: int, env: dict[str, str], log_path: Path) -> None:
        self.name = name
        self.port = port
        self.env = env
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self.up = False
        self.starts = 0
        self.failed_starts: list[int] = []
        """Exit codes of starts that ended before the server was ready."""
        self.base = f"http://127.0.0.1:{port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    async def start(self, ready_within: float) -> float:
        """Start the process and wait (bounded) until /readyz answers 200; returns seconds.

        ``sundial serve`` exits when the database is away while it starts (its migration step
        cannot connect); like a supervisor, start it again (at most 5 times).
        """
        began = time.monotonic()
        for _ in range(5):
            try:
                await self._start_once(began + ready_within)
            except ServerExited as exited:
                self.failed_starts.append(exited.code)
                await asyncio.sleep(1.0)
                continue
            return time.monotonic() - began
        raise HarnessError(f"server {self.name} would not start:\n{self.log_tail()}")

    async def _start_once(self, deadline: float) -> None:
        with self.log_path.open("ab") as out:
            out.write(f"\n--- start #{self.starts + 1} at {time.ctime()} ---\n".encode())
            out.flush()
            self.process = await asyncio.to_thread(
                subprocess.Popen,
                [str(SUNDIAL), "serve"],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=out,
            )
        self.starts += 1
        last = "no answer yet"
        async with httpx.AsyncClient(timeout=3.0) as probe:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise ServerExited(self.process.returncode)
                try:
                    answer = await probe.get(f"{self.base}/readyz")
                except httpx.HTTPError as error:
                    last = repr(error)
                else:
                    if answer.status_code == 200:
                        self.up = True
                        return
                    last = f"{answer.status_code} {answer.text[:300]}"
                await asyncio.sleep(0.1)
        raise HarnessError(
            f"server {self.name} not ready in time (last /readyz: {last}):\n{self.log_tail()}"
        )

    def kill(self) -> int:
        """kill -9; returns the pid that was killed."""
        assert self.process is not None
        self.up = False
        pid = self.process.pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        return pid

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after 15 s."""
        self.up = False
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(self.process.wait, 15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            await asyncio.to_thread(self.process.wait, 10)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def tracebacks(self) -> int:
        try:
            return self.log_path.read_text(errors="replace").count("Traceback (most recent call")
        except OSError:
            return 0

    def unexpected_errors(self) -> list[str]:
        """The 500s this server logged ("unexpected error on …"), each with its exception."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return []
        found = []
        for n, line in enumerate(lines):
            if "unexpected error on" not in line:
                continue
            exception = next(
                (
                    later
                    for later in lines[n + 1 : n + 200]
                    if later and not later.startswith((" ", "Traceback", "The above", "During"))
                ),
                "?",
            )
            found.append(f"{self.name}: {line.split(': ', 1)[-1]}: {exception[:300]}")
        return found
