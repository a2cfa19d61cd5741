"""The SQS bench's generators as the harness drives them: one process per door
(``bench.sqs.clients``), started and warmed up before the measurements, then told to run one
phase at a time, with the CPU of every process read around each phase: the server (its workers
and their supervisor), PostgreSQL (postmaster and every backend, exited ones included), the
generator itself, and the whole machine (what others spent meanwhile)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import psutil

from bench.harness import ROOT
from bench.processes import Server


def machine_cpu() -> tuple[float, float]:
    """CPU seconds so far of the whole machine: busy (every process's), and waiting for I/O."""
    t = psutil.cpu_times()
    busy = t.user + t.nice + t.system
    busy += getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0) + getattr(t, "steal", 0.0)
    return busy, getattr(t, "iowait", 0.0)


def server_cpu(server: Server) -> tuple[float, float]:
    """CPU seconds so far of the server (workers and supervisor) and of its PostgreSQL."""
    snap = server.snapshot()
    return sum(snap.server_workers.values()) + snap.server_master, snap.postgres


def _process_cpu(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


class Generator:
    """A running ``bench.sqs.clients`` for one door, its clients made and warmed up."""

    def __init__(self, spec: dict[str, Any], log: Path, taskset: str | None = None) -> None:
        argv = [sys.executable, "-m", "bench.sqs.clients"]
        if taskset:
            argv = ["taskset", "-c", taskset, *argv]
        self.log = log
        self.stderr: IO[bytes] = log.open("wb")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            cwd=ROOT,
            text=True,
        )
        self.ps = psutil.Process(self.proc.pid)
        self.spec = spec
        self._send(json.dumps(spec))
        self.warmup: dict[str, Any] = {}

    def _send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=30)
            raise RuntimeError(
                f"the {self.spec['door']} generator exited ({self.proc.returncode}):\n"
                + self.log.read_text(errors="replace")[-3000:]
            )
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ready(self) -> dict[str, Any]:
        """Wait until its clients are made and warmed up; the warm-up's figures."""
        self.warmup = self._answer()["warmup"]
        return self.warmup

    def phase(self, name: str, server: Server) -> dict[str, Any]:
        """Run ``produce`` or ``consume``: the generator's result, and the CPU seconds each
        process spent from the order to the answer (unrounded: the ratios are made of them)."""
        load_before = os.getloadavg()
        machine_before = machine_cpu()
        server_before, pg_before = server_cpu(server)
        generator_before = _process_cpu(self.ps)
        t0 = time.monotonic()
        self._send(name)
        result = self._answer()
        wall = time.monotonic() - t0
        generator_after = _process_cpu(self.ps)
        server_after, pg_after = server_cpu(server)
        machine_after = machine_cpu()
        result["cpu"] = {
            "wall_s": wall,
            "server_cpu_s": server_after - server_before,
            "postgres_cpu_s": pg_after - pg_before,
            "generator_cpu_s": generator_after - generator_before,
            "machine_busy_s": machine_after[0] - machine_before[0],
            "machine_iowait_s": machine_after[1] - machine_before[1],
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        }
        return result

    def close(self) -> None:
        """Tell it to exit; kill it if it does not within 30 s."""
        with contextlib.suppress(OSError, ValueError):
            self._send("exit")
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()
