"""The suite's sizes (``--quick`` and ``--full``), its clients and the names of its workloads."""

from __future__ import annotations

from typing import Any

QUICK: dict[str, Any] = {
    "mode": "quick",
    "runs": 2,
    "warmup": 0.5,
    "duration": 2.0,
    # First guesses of each system's rate (msg/s); the backlog of a processing run is sized from
    # the rate measured in the previous run (x1.5 the window), so a slow machine is not kept busy
    # draining a backlog and a fast one does not run out.
    "guess": {
        "sundial_b100": 8_000,
        "sundial_b1": 1_000,
        "sundial_worker": 3_000,
        "sundial_cycle": 1_000,
        "raw_b100": 20_000,
        "raw_b1": 2_000,
        "raw_cycle": 3_000,
        "peer_b100": 10_000,
        "peer_b1": 2_000,
        "peer_b10": 4_000,
    },
    "wake_samples": 60,
    "backlog": 100_000,
    "filter_backlog": 100_000,
    "exclusive_backlog": 100_000,
    "exclusive_values": 10_000,
    "exclusive_running": 100,
    "delay_messages": 10_000,
    "delay_span": 10.0,
    "soak_seconds": 12.0,
    "soak_rate": 1_000,
    "profile_seconds": 8,
}
FULL: dict[str, Any] = {
    "mode": "full",
    "runs": 3,
    "warmup": 2.0,
    "duration": 10.0,
    "guess": {
        "sundial_b100": 15_000,
        "sundial_b1": 1_500,
        "sundial_worker": 5_000,
        "sundial_cycle": 2_000,
        "raw_b100": 60_000,
        "raw_b1": 3_000,
        "raw_cycle": 5_000,
        "peer_b100": 20_000,
        "peer_b1": 5_000,
        "peer_b10": 8_000,
    },
    "wake_samples": 500,
    "backlog": 10_000_000,
    "filter_backlog": 1_000_000,
    "exclusive_backlog": 1_000_000,
    "exclusive_values": 100_000,
    "exclusive_running": 1_000,
    "delay_messages": 100_000,
    "delay_span": 60.0,
    "soak_seconds": 180.0,
    "soak_rate": 2_000,
    "profile_seconds": 20,
}
CLIENTS = 8
WORKLOADS = (
    "enqueue_b100",
    "enqueue_b1",
    "process_b100",
    "process_b1",
    "process_cycle",
    "worker",
    "wake",
    "backlog",
    "filter",
    "filter_or",
    "exclusive",
    "delays",
    "soak",
)
