"""The summary table's rows: for each workload its medians over runs, its ratios to the baselines
(medians of the per-run ratios) and the issue's target, met or not."""

from __future__ import annotations

from typing import Any

from bench.stats import median


def _dequeue_latency_row(
    workload: str, runs: list[dict[str, Any]], target: str, met: bool | None
) -> dict[str, Any]:
    """A table row for a backlog workload: its dequeue latency, rate and target (``met`` None:
    a reference row, which has none)."""
    p99 = _med(runs, "latency_ms", "dequeue", "p99")
    return {
        "workload": workload,
        "unit": "ms p99",
        "sundial": p99,
        "raw": None,
        "peer": None,
        "vs_raw": None,
        "vs_peer": None,
        "p50_ms": _med(runs, "latency_ms", "dequeue", "p50"),
        "p99_ms": p99,
        "target": target,
        "met": met,
        "rate": _med(runs, "rate"),
    }


def _med(runs: list[dict[str, Any]], *path: str) -> float | None:
    """The median over ``runs`` of the number at ``path`` in each."""
    vals = []
    for r in runs:
        x: Any = r
        for p in path:
            x = x.get(p) if isinstance(x, dict) else None
        if isinstance(x, int | float):
            vals.append(float(x))
    return median(vals)


def _ratio_med(runs: list[dict[str, Any]], a: tuple[str, ...], b: tuple[str, ...]) -> float | None:
    """The median of the per-run ratios of the numbers at ``a`` and ``b``."""
    ratios = []
    for r in runs:
        x, y = _med([r], *a), _med([r], *b)
        if x is not None and y:
            ratios.append(x / y)
    return median(ratios)


def build_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per measured target (bench/README.md, "Reading the output")."""
    rows: list[dict[str, Any]] = []
    w = res.get("workloads", {})

    def tput(
        key: str,
        label: str,
        target: float,
        raw_share: float | None = None,
        p99_max: float | None = None,
        peer_share: float | None = None,
    ) -> None:
        runs = w.get(key)
        if not runs:
            return
        lat_key = "enqueue" if key.startswith("enqueue") else "dequeue"
        s = _med(runs, "sundial", "rate")
        raw = _med(runs, "raw", "rate")
        peer = _med(runs, "peer", "rate")
        p50 = _med(runs, "sundial", "latency_ms", lat_key, "p50")
        p99 = _med(runs, "sundial", "latency_ms", lat_key, "p99")
        vs_raw = _ratio_med(runs, ("sundial", "rate"), ("raw", "rate"))
        met = s is not None and s >= target
        tgt = f">= {target:,.0f} msg/s"
        if raw_share is not None:
            met = met and vs_raw is not None and vs_raw >= raw_share
            tgt += f", >= {raw_share:.0%} raw"
        if p99_max is not None:
            met = met and p99 is not None and p99 <= p99_max
            tgt += f", p99 <= {p99_max:g} ms"
        vs_peer = _ratio_med(runs, ("sundial", "rate"), ("peer", "rate"))
        if peer_share is not None:
            met = met and vs_peer is not None and vs_peer >= peer_share
            tgt += f", >= {peer_share:g}x PgQueuer"
        rows.append(
            {
                "workload": label,
                "unit": "msg/s",
                "sundial": s,
                "raw": raw,
                "peer": peer,
                "vs_raw": vs_raw,
                "vs_peer": vs_peer,
                "p50_ms": p50,
                "p99_ms": p99,
                "target": tgt,
                "met": met,
            }
        )

    tput("enqueue_b100", "1. enqueue, 100/request, 8 clients", 40_000)
    tput("enqueue_b1", "2. enqueue, 1/request, 8 clients", 3_000, p99_max=20)
    tput("process_b100", "3. dequeue 100 + ack 100, 8 consumers", 20_000, raw_share=0.40)
    tput("process_b1", "4. dequeue 1 + complete 1, 8 consumers", 1_500)
    tput("process_cycle", "4c. complete 1 + lease next, 1 request, 8 consumers", 0, raw_share=0.6)
    tput("worker", "4w. Worker end to end, no-op handler, concurrency 8", 0, peer_share=1.0)

    if w.get("wake"):
        runs = w["wake"]
        p50 = _med(runs, "sundial", "latency_ms", "wake", "p50")
        p99 = _med(runs, "sundial", "latency_ms", "wake", "p99")
        rows.append(
            {
                "workload": "5. long-poll wake, commit -> response",
                "unit": "ms p50/p99",
                "sundial": (p50, p99),
                "raw": (
                    _med(runs, "raw", "latency_ms", "wake", "p50"),
                    _med(runs, "raw", "latency_ms", "wake", "p99"),
                ),
                "peer": (
                    _med(runs, "peer", "latency_ms", "wake", "p50"),
                    _med(runs, "peer", "latency_ms", "wake", "p99"),
                ),
                "vs_raw": None,
                "vs_peer": None,
                "p50_ms": p50,
                "p99_ms": p99,
                "target": "p50 <= 5, p99 <= 10 ms",
                "met": p50 is not None and p99 is not None and p50 <= 5 and p99 <= 10,
            }
        )

    base_p99 = _med(w.get("process_b1", []), "sundial", "latency_ms", "dequeue", "p99")
    base_rate = _med(w.get("process_b1", []), "sundial", "rate")
    if w.get("backlog"):
        b = w["backlog"][0]
        p99 = _med(b["runs"], "latency_ms", "dequeue", "p99")
        ratio = p99 / base_p99 if p99 and base_p99 else None
        rows.append(
            _dequeue_latency_row(
                f"6a. dequeue 1 + complete 1, {b['backlog']:,} pending",
                b["runs"],
                f"p99 <= 2x small-backlog p99 ({base_p99 or 0:.1f} ms): x{ratio or 0:.2f}",
                ratio is not None and ratio <= 2,
            )
        )
    if w.get("filter"):
        b = w["filter"][0]
        for runs, what, held in (
            (b["runs"], "queue filter_key", True),
            (b.get("second_key", {}).get("runs", []), "queue's second filter key", True),
            # The reference: a filter on a key the queue does not index, tested row by row.
            (b.get("general", {}).get("runs", []), "key not indexed, tested row by row", False),
        ):
            p99 = _med(runs, "latency_ms", "dequeue", "p99")
            if p99 is not None:
                rows.append(
                    _dequeue_latency_row(
                        f"6b. metadata-filtered dequeue, {b['backlog']:,} pending ({what})",
                        runs,
                        "p99 <= 20 ms" if held else "none (reference: what the index saves)",
                        p99 <= 20 if held else None,
                    )
                )
    if w.get("filter_or"):
        b = w["filter_or"][0]
        p99 = _med(b["runs"], "latency_ms", "dequeue", "p99")
        if p99 is not None:
            rows.append(
                _dequeue_latency_row(
                    f"6b'. filtered dequeue, OR over filter_key (2 values), {b['backlog']:,} "
                    "pending",
                    b["runs"],
                    "p99 <= 20 ms",
                    p99 <= 20,
                )
            )
    if w.get("exclusive"):
        b = w["exclusive"][0]
        p99 = _med(b["runs"], "latency_ms", "dequeue", "p99")
        rate = _med(b["runs"], "rate")
        share = rate / base_rate if rate and base_rate else None
        rows.append(
            _dequeue_latency_row(
                f"6c. exclusive, {b['backlog']:,} msgs / {b['values']:,} values, "
                f"{b['running_values']:,} running",
                b["runs"],
                f"p99 <= 20 ms, rate >= 0.5x simple ({rate or 0:,.0f} = x{share or 0:.2f})",
                p99 is not None and p99 <= 20 and share is not None and share >= 0.5,
            )
        )
    if w.get("delays"):
        d = w["delays"][0]
        lat = d["sundial"]["latency_ms"]["lateness"]
        rows.append(
            {
                "workload": f"7. {d['messages']:,} delayed msgs due within {d['span_s']:g} s",
                "unit": "ms late p99",
                "sundial": lat["p99"],
                "raw": None,
                "peer": None,
                "vs_raw": None,
                "vs_peer": None,
                "p50_ms": lat["p50"],
                "p99_ms": lat["p99"],
                "target": "lateness p99 <= 100 ms",
                "met": lat["p99"] is not None and lat["p99"] <= 100,
            }
        )
    if w.get("soak"):
        s = w["soak"][0]
        samples = s["samples"]
        rss_max = max((v for x in samples for v in x["rss_mb"].values()), default=None)
        rss_first = max(samples[0]["rss_mb"].values()) if samples else None
        rss_last = max(samples[-1]["rss_mb"].values()) if samples else None
        sizes = [x["messages_bytes"] for x in samples]
        rows.append(
            {
                "workload": "8. worker RSS (max over soak), hot table size",
                "unit": "MB",
                "sundial": rss_max,
                "raw": None,
                "peer": None,
                "vs_raw": None,
                "vs_peer": None,
                "p50_ms": None,
                "p99_ms": None,
                "target": (
                    f"RSS <= 150 MB ({rss_first}->{rss_last}); table "
                    f"{sizes[0] / 2**20 if sizes else 0:.1f}->{max(sizes, default=0) / 2**20:.1f}"
                    f"->{sizes[-1] / 2**20 if sizes else 0:.1f} MB (start/max/end)"
                ),
                "met": rss_max is not None and rss_max <= 150,
            }
        )
    return rows
