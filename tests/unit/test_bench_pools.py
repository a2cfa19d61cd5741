"""The pools bench's figures: CPU per message (gross and net of idle), per-run ratios with their
spread, the capacity model, and the report's tables."""

from __future__ import annotations

import time
from typing import Any

import pytest

from bench.loadgen.measure import Window
from bench.pools.model import (
    compare,
    cores_needed,
    figures,
    idle_cores,
    lifecycle_costs,
    per_message_us,
    pools_needed,
    rate_per_pool,
    router_share,
    spread,
    summarise,
)
from bench.pools.report import fmt, idle_line, ratio, render_report


def _result(
    rate: float,
    handled: int,
    server: float,
    postgres: float | dict[str, float],
    generator: float = 0.5,
    wall: float = 4.0,
    busy: float | None = None,
) -> dict[str, Any]:
    cpu: dict[str, Any] = {
        "wall_s": wall,
        "server_cpu_s": server,
        "postgres_cpu_s": postgres,
        "loadgen_cpu_s": generator,
    }
    if busy is not None:
        cpu["machine_busy_s"] = busy
        cpu["machine_iowait_s"] = 0.2
    return {"rate": rate, "handled": handled, "cpu": cpu}


def test_cpu_per_message() -> None:
    assert per_message_us(2.0, 4_000) == pytest.approx(500.0)
    assert per_message_us(2.0, 0) is None
    assert per_message_us(None, 10) is None


def test_figures_gross_net_of_idle_and_the_others() -> None:
    # 4,000 messages over 4 s; the server idles at 0.05 cores, both clusters at 0.1 together.
    r = _result(1_000.0, 4_000, 2.0, {"first": 1.0, "second": 0.6}, 0.4, busy=6.0)
    f = figures(r, idle_server=0.05, idle_database=0.1)
    assert f["server_us"] == pytest.approx(500.0)
    assert f["database_us"] == pytest.approx(400.0)  # both clusters
    assert f["generator_us"] == pytest.approx(100.0)
    assert f["total_us"] == pytest.approx(1_000.0)
    assert f["server_net_us"] == pytest.approx((2.0 - 0.2) / 4_000 * 1e6)
    assert f["database_net_us"] == pytest.approx((1.6 - 0.4) / 4_000 * 1e6)
    # The machine was busy 6 CPU-s, ours 4: the others kept half a core busy.
    assert f["others_cores"] == pytest.approx(0.5)
    assert f["busy_cores"] == pytest.approx(1.5)
    assert f["iowait_cores"] == pytest.approx(0.05)


def test_figures_without_the_machine_reading() -> None:
    f = figures(_result(1_000.0, 4_000, 2.0, 1.0))
    assert f["others_cores"] is None
    assert f["server_net_us"] == f["server_us"]


def test_spread() -> None:
    assert spread([1.0, None, 3.0, 2.0]) == {
        "median": 2.0,
        "min": 1.0,
        "max": 3.0,
        "runs": [1.0, 3.0, 2.0],
    }
    assert spread([])["median"] is None


def test_compare_takes_ratios_run_by_run() -> None:
    # Run 1 on a quiet machine, run 2 on a busy one: each pair's ratio is what counts.
    runs = [
        {"w": {"a": _result(1_000, 4_000, 2.0, 1.0), "b": _result(1_000, 4_000, 2.1, 1.0)}},
        {"w": {"a": _result(500, 2_000, 2.0, 1.0), "b": _result(500, 2_000, 2.0, 1.0)}},
        {"w": {"a": _result(800, 4_000, 2.0, 1.0), "b": _result(800, 4_000, 2.2, 1.0)}},
        {"other": {}},
    ]
    c = compare(runs, "w", "a", "b")
    assert c["n"] == 3
    assert c["server_us"]["ratio"]["median"] == pytest.approx(1.05)
    assert c["server_us"]["ratio"]["min"] == pytest.approx(1.0)
    assert c["server_us"]["ratio"]["max"] == pytest.approx(1.1)
    assert c["server_us"]["a"] == pytest.approx(500.0)  # medians of 500, 1,000, 500
    assert c["rate"]["ratio"]["median"] == pytest.approx(1.0)


def test_compare_subtracts_each_setups_idle() -> None:
    runs = [{"w": {"a": _result(1_000, 4_000, 2.0, 1.0), "b": _result(1_000, 4_000, 2.4, 1.0)}}]
    c = compare(runs, "w", "a", "b", {"a": (0.0, 0.0), "b": (0.1, 0.0)})
    # b's server idles at 0.1 cores: 0.4 CPU-s of its 2.4 over the 4 s are not the requests'.
    assert c["server_us"]["ratio"]["median"] == pytest.approx(1.2)
    assert c["server_net_us"]["ratio"]["median"] == pytest.approx(1.0)


def test_capacity_model() -> None:
    # 10,000 msg/s at 350 µs of database CPU each, kept at 70 %: 5 cores.
    assert cores_needed(10_000, 350) == pytest.approx(5.0)
    assert cores_needed(10_000, 350, utilisation=0.5) == pytest.approx(7.0)
    assert pools_needed(10_000, 350, 4) == 2
    assert pools_needed(10_000, 350, 8) == 1
    assert pools_needed(1, 1, 8) == 1  # never none
    assert rate_per_pool(350, 5) == pytest.approx(10_000)


def test_a_message_life_is_its_enqueue_and_its_processing() -> None:
    costs = lifecycle_costs(
        {"enqueue_b1": 300.0, "process_b1": 700.0, "enqueue_b100": 40.0, "process_b100": None}
    )
    assert costs == {"one message per request": 1_000.0}


def test_idle_cores_per_setup() -> None:
    idle = {
        "overhead": {"servers": {"single": 0.01, "routed": 0.02}, "clusters": {"first": 0.03}},
        "split": {"servers": {"split": 0.02}, "clusters": {"first": 0.03, "second": 0.01}},
    }
    assert idle_cores(idle) == {
        "single": (0.01, 0.03),
        "routed": (0.02, 0.03),
        "one": (0.02, pytest.approx(0.04)),
        "two": (0.02, pytest.approx(0.04)),
    }
    assert idle_cores({}) == {}


def test_idle_before_and_after_the_runs_is_averaged() -> None:
    before = {"wall_s": 3.0, "servers": {"single": 0.1, "routed": 0.2}, "clusters": {"first": 0.0}}
    after = {"wall_s": 3.0, "servers": {"single": 0.3, "routed": 0.2}, "clusters": {"first": 0.1}}
    assert idle_cores({"overhead": [before, after]}) == {
        "single": (pytest.approx(0.2), pytest.approx(0.05)),
        "routed": (pytest.approx(0.2), pytest.approx(0.05)),
    }
    line = idle_line([before, after], {"single": "(a)", "routed": "(b)"})
    assert "before / after the runs (cores): server (a) 0.10 / 0.30, (b) 0.20 / 0.20;" in line


def test_what_the_router_adds_per_message() -> None:
    # 500 ns more per lookup; 2 lookups per enqueued message, 4 per processed one.
    shares = router_share({"added_ns": 500.0}, {"enqueue_b1": 1_000.0, "process_b1": 2_000.0})
    assert shares == {"enqueue_b1": pytest.approx(0.001), "process_b1": pytest.approx(0.001)}


def _run_results() -> dict[str, Any]:
    overhead = [
        {
            "enqueue_b1": {
                "single": _result(1_000, 4_000, 2.0, 1.2),
                "routed": _result(990, 4_000, 2.04, 1.2),
            },
            "process_b1": {
                "single": _result(500, 2_000, 2.0, 1.4),
                "routed": _result(480, 2_000, 2.2, 1.4),
            },
        }
    ]
    split = [
        {
            "enqueue_b100": {
                "one": _result(10_000, 40_000, 2.0, {"first": 2.0, "second": 0.0}),
                "two": _result(10_500, 40_000, 2.0, {"first": 1.0, "second": 1.0}),
            },
            "process_b100": {
                "one": _result(8_000, 40_000, 2.0, {"first": 4.0, "second": 0.0}),
                "two": _result(8_000, 40_000, 2.0, {"first": 2.0, "second": 2.2}),
            },
        }
    ]
    return {
        "mode": "quick",
        "elapsed_s": 10.0,
        "machine": {"cores": 2},
        "overhead": overhead,
        "split": split,
        "checks": [{"check": "x", "ok": True}],
    }


def test_summary_and_capacity_from_a_run() -> None:
    s = summarise(_run_results())
    assert s["overhead"]["enqueue_b1"]["server_us"]["ratio"]["median"] == pytest.approx(1.02)
    assert s["database_us"] == {
        "enqueue_b1": pytest.approx(300.0),
        "process_b1": pytest.approx(700.0),
        "enqueue_b100": pytest.approx(50.0),
        "process_b100": pytest.approx(100.0),
    }
    assert s["lifecycle_us"] == {
        "one message per request": pytest.approx(1_000.0),
        "100 messages per request": pytest.approx(150.0),
    }
    first = s["capacity"][0]
    assert first["lifecycle"] == "one message per request"
    assert first["rate"] == 1_000
    assert first["cores"] == pytest.approx(1_000 * 1_000 / 1e6 / 0.7)
    assert s["split"]["process_b100"]["database_us"]["ratio"]["median"] == pytest.approx(1.05)


def test_report_tables() -> None:
    report = render_report(_run_results())
    rows: dict[str, str] = {}
    for line in report.splitlines():
        if line.startswith("| "):
            rows.setdefault(line.split(" | ")[0], line)  # the first table's row
    enqueue = rows["| enqueue_b1"].split(" | ")
    assert enqueue[6] == "1.020 (1.020-1.020)"
    assert enqueue[7:9] == ["<= 1.05", "yes"]
    process = rows["| process_b1"].split(" | ")
    assert process[6].startswith("1.100")
    assert process[8] == "NO"
    assert "| enqueue_b100 | 10,000 | 10,500 | 1.050 (1.050-1.050) |" in report
    assert "Correctness checks: 1/1 passed." in report
    assert "| one message per request | 1,000 | 1.43 |" in report


def test_formatting() -> None:
    assert fmt(None) == "—"
    assert fmt(3.14159) == "3.14"
    assert fmt(31.4159) == "31.4"
    assert fmt(3141.59) == "3,142"
    assert ratio({"median": 1.0312, "min": 0.99, "max": 1.07}) == "1.031 (0.990-1.070)"
    assert ratio({"median": None}) == "—"


def test_windows_of_generators_started_apart_agree() -> None:
    start_at = time.monotonic() + 0.5
    first = Window(0.2, 1.0, start_at)
    time.sleep(0.05)
    second = Window(0.2, 1.0, start_at)
    assert second.start == pytest.approx(first.start, abs=0.01)
    assert Window(0.2, 1.0, time.monotonic() - 5).start > first.start - 0.6  # late: starts now
