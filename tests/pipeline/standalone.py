"""A Spark standalone cluster for tests: a master and a worker started from pyspark's own
``bin/spark-class``, on the loopback with free ports, and a Python for its executors that cannot
import Sundial.

The cluster is a context manager: it waits until the master lists the worker as alive (polling
the master's JSON status page, ``/json/``) and stops both processes, and everything they started
(executors, their Python workers), however the block ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def spark_env(work: Path) -> dict[str, str]:
    """The environment of the cluster's processes: Spark on the loopback, its configuration and
    logs in ``work``, and no PYTHONPATH that could lead executors to Sundial's sources."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("SPARK_")}
    env.pop("PYTHONPATH", None)
    env.pop("PYSPARK_PYTHON", None)
    conf = work / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_CONF_DIR=str(conf),
        SPARK_LOG_DIR=str(work / "logs"),
        SPARK_LOCAL_IP=LOOPBACK,
        SPARK_LOCAL_HOSTNAME=LOOPBACK,
    )
    return env


def python_without_sundial(path: Path, runs: Path) -> Path:
    """A script that runs this virtualenv's Python, with its third-party packages but without
    Sundial: ``-S`` skips the site module, hence the ``.pth`` file through which the editable
    install of ``app`` is found, and the packages come back through PYTHONPATH. Each start
    appends a line to ``runs``, so a test can tell that executors did run it."""
    site_packages = sysconfig.get_paths()["purelib"]
    path.write_text(
        "#!/bin/sh\n"
        f'echo "$$ $*" >> "{runs}"\n'
        f'PYTHONPATH="{site_packages}${{PYTHONPATH:+:$PYTHONPATH}}"'
        f' exec "{sys.executable}" -S "$@"\n'
    )
    path.chmod(0o755)
    return path


@dataclass
class StandaloneCluster:
    """A running master and worker."""

    work: Path
    master_url: str = ""
    status_url: str = ""
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def status(self) -> dict[str, Any]:
        """The master's JSON status page (workers, running and completed applications)."""
        with urllib.request.urlopen(self.status_url, timeout=5) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    def finished_apps(self, timeout: float = 30) -> list[str]:
        """The names of the applications the master has seen finish, once none is running (a
        driver's exit reaches the master a moment later)."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.status()
            if not status["activeapps"] or time.monotonic() > deadline:
                return [app["name"] for app in status["completedapps"]]
            time.sleep(0.2)  # between two polls of the master's status page

    def logs(self) -> str:
        """The tails of the master's, the worker's and the executors' logs, for failures."""
        logs = sorted(self.work.rglob("*.log")) + sorted(self.work.rglob("stderr"))
        return "\n".join(
            f"--- {log.relative_to(self.work)}\n{log.read_text(errors='replace')[-3000:]}"
            for log in logs
        )

    def _start(self, name: str, *arguments: str) -> None:
        log = (self.work / f"{name}.log").open("wb")
        self.processes.append(
            subprocess.Popen(
                [str(SPARK_CLASS), *arguments],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=spark_env(self.work),
                cwd=self.work,
                start_new_session=True,  # its own process group: stopped with all it starts
            )
        )
        log.close()

    def _wait_for_worker(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"{process.args} exited early:\n{self.logs()}")
            with contextlib.suppress(OSError, urllib.error.URLError, ValueError):
                if any(worker["state"] == "ALIVE" for worker in self.status()["workers"]):
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"no worker registered in {timeout} s:\n{self.logs()}")
            time.sleep(0.2)  # between two polls of the master's status page

    def stop(self) -> None:
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=15)
            # The executors and Python workers it started, if any outlived it.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)


@contextlib.contextmanager
def standalone_cluster(
    work: Path, *, cores: int = 2, memory: str = "2g", timeout: float = 60
) -> Iterator[StandaloneCluster]:
    """A master and one worker with ``cores`` and ``memory``, until the block ends."""
    work.mkdir(parents=True, exist_ok=True)
    cluster = StandaloneCluster(work)
    master_port, master_ui = free_port(), free_port()
    cluster.master_url = f"spark://{LOOPBACK}:{master_port}"
    cluster.status_url = f"http://{LOOPBACK}:{master_ui}/json/"
    try:
        cluster._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", LOOPBACK, "--port", str(master_port), "--webui-port", str(master_ui),
        )  # fmt: skip
        cluster._start(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            "--host", LOOPBACK, "--port", str(free_port()), "--webui-port", str(free_port()),
            "--cores", str(cores), "--memory", memory, "--work-dir", str(work / "worker"),
            cluster.master_url,
        )  # fmt: skip
        cluster._wait_for_worker(timeout)
        yield cluster
    finally:
        cluster.stop()
