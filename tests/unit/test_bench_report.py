"""The bench report's CPU table: CPU per message, and the ceiling a free server would leave."""

from __future__ import annotations

from bench.report.render import cpu_table


def _run(rate: float, server: float, postgres: float, generator: float) -> dict[str, object]:
    cpu = {"wall_s": 2.0, "server_cpu_s": server, "postgres_cpu_s": postgres}
    return {"rate": rate, "cpu": {**cpu, "loadgen_cpu_s": generator}}


def test_cpu_per_message_and_the_ceiling() -> None:
    runs = [
        {"sundial": _run(1000.0, 1.0, 0.8, 0.2)},  # 2,000 messages
        {"sundial": _run(1000.0, 3.0, 0.8, 0.2)},
        {"sundial": _run(1000.0, 2.0, 0.8, 0.2)},
    ]
    table = cpu_table({"machine": {"cores": 2}, "workloads": {"enqueue_b1": runs}})
    row = table.splitlines()[-1].split(" | ")
    # Medians: server 2.0 s, PostgreSQL 0.8 s, generator 0.2 s over 2,000 messages: 1,000, 400
    # and 100 µs a message; two cores over 500 µs of others' work a message: 4,000 msg/s.
    assert row[6:10] == ["1,000", "400", "100", "4,000 |"]


def test_a_workload_without_cpu_figures_is_left_out() -> None:
    table = cpu_table({"machine": {"cores": 2}, "workloads": {"wake": [{"sundial": {}}]}})
    assert len(table.splitlines()) == 2
