"""``python -m bench.loadgen``: read a JSON spec on stdin, run its mode, write the JSON result
(with the generator's own CPU seconds) on stdout."""

from __future__ import annotations

import json
import resource
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from bench.loadgen import cycle, peers, sundial, worker

MODES: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
    "enqueue": sundial.enqueue,
    "process": sundial.process,
    "worker": worker.worker,
    "cycle": cycle.cycle,
    "wake": sundial.wake,
    "notify_wake": peers.notify_wake,
    "delays": sundial.delays,
    "soak": sundial.soak,
    "pgq_enqueue": peers.pgq_enqueue,
    "pgq_process": peers.pgq_process,
    "pgq_wake": peers.pgq_wake,
}


def main() -> None:
    """Run the mode the spec on stdin names; its result on stdout."""
    spec = json.loads(sys.stdin.read())
    import uvloop

    result = uvloop.run(MODES[spec["mode"]](spec))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["loadgen_self_cpu_s"] = round(usage.ru_utime + usage.ru_stime, 2)
    sys.stdout.write(json.dumps(result))


if __name__ == "__main__":
    main()
