"""The facts of the machine a bench ran on, for its report."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from bench.harness import Environment


def machine_facts(env: Environment) -> dict[str, Any]:
    """Cores, CPU, memory, kernel, Python, PostgreSQL and its settings, the server's workers."""
    return {
        "cores": os.cpu_count(),
        "cpu": cpu_model(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "postgresql": env.pg_version,
        "postgresql_settings": getattr(env, "pg_settings", {}),
        "server_workers": env.workers,
        "taskset": env.taskset,
    }


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo when there is one)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
