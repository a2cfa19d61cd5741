"""Real ``sundial`` processes for the tests that need one: where the command lives, a free
port, an environment without the caller's ``SUNDIAL_*`` settings, and ``sundial serve`` started,
awaited and stopped the way an operator would (SIGTERM, then it must exit by itself)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
SUNDIAL = Path(sys.executable).parent / "sundial"
START_TIMEOUT = 90.0
STOP_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def clean_env(**settings: str) -> dict[str, str]:
    """This process's environment without its ``SUNDIAL_*`` variables, plus ``settings``."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("SUNDIAL_")}
    env.update(settings)
    return env


def wait_ready(base: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Poll /readyz until the server answers (bounded); fail with the server's log if it died."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"server exited with {process.returncode}:\n{log.read_text()[-4000:]}")
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    pytest.fail(f"server not ready in {START_TIMEOUT}s:\n{log.read_text()[-4000:]}")


@contextmanager
def sundial_serve(
    env: dict[str, str], log: Path, *, args: Sequence[str] = (), cwd: Path = ROOT
) -> Iterator[subprocess.Popen[bytes]]:
    """``sundial serve`` running with ``env``, its output in ``log``. On leaving it gets SIGTERM
    and is given STOP_TIMEOUT to exit by itself before it is killed; the caller checks how it
    exited (``returncode``)."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(SUNDIAL), "serve", *args], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def assert_exited_cleanly(process: subprocess.Popen[bytes], log: Path) -> None:
    assert process.returncode == 0, log.read_text()[-4000:]
