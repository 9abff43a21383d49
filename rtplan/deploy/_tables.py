"""The experiment's tables over the FPS played: deploy.csv, deploy.json and the Markdown one."""

from __future__ import annotations

import csv
from pathlib import Path

from rtplan.deploy._experiment import Experiment
from rtplan.deploy._plot import _plot
from rtplan.deploy._resume import _write_json

#: The CSV's columns before the budget shares (one `budget_k<K>` column per budget follows).
CSV_FIELDS = (
    "fps",
    "episodes",
    "return_mean",
    "return_se",
    "simulated_mean",
    "simulated_se",
    "deployed_minus_simulated",
    "deployed_minus_simulated_se",
    "miss_rate",
    "misses",
    "landings",
    "slack_p95_ms",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "late_ticks",
    "planner_errors",
)


def _csv_row(s: dict) -> dict:
    lat = s["latency_ms"]["all"]
    row = {
        "fps": s["fps"],
        "episodes": len(s["returns"]),
        "return_mean": s["return"]["mean"],
        "return_se": s["return"]["se"],
        "simulated_mean": s["simulated"]["mean"],
        "simulated_se": s["simulated"]["se"],
        "deployed_minus_simulated": s["deployed_minus_simulated"]["mean"],
        "deployed_minus_simulated_se": s["deployed_minus_simulated"]["se"],
        "miss_rate": s["miss_rate"],
        "misses": s["misses"],
        "landings": s["landings"],
        "slack_p95_ms": s["slack_p95_ms"],
        "latency_p50_ms": lat["p50"],
        "latency_p95_ms": lat["p95"],
        "latency_p99_ms": lat["p99"],
        "late_ticks": s["late_ticks"],
        "planner_errors": s["planner_errors"],
    }
    row.update({f"budget_k{k}": share for k, share in s["budgets"].items()})
    return row


def _tables(out: Path, summaries: list[dict], exp: Experiment, breaking: float | None) -> None:
    """deploy.csv and deploy.json (a row per FPS), and deploy.png."""
    rows = [_csv_row(s) for s in summaries]
    fields = list(dict.fromkeys(f for r in rows for f in r))
    with (out / "deploy.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for r in rows:
            writer.writerow({k: "" if r.get(k) is None else r[k] for k in fields})
    _write_json(
        out / "deploy.json",
        {
            "game": exp.game,
            "agent": exp.agent,
            "episodes": exp.episodes,
            "until_miss_rate": exp.until_miss_rate,
            "highest_fps_within_miss_rate": breaking,
            "rows": rows,
        },
    )
    _plot(out / "deploy.png", summaries, exp)


def _table(summaries: list[dict]) -> str:
    """The experiment as a Markdown table, a row per FPS."""

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    lines = [
        "| FPS | return | simulated | deployed - simulated | miss rate | latency p50 / p95 / "
        "p99 ms | p95 slack ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        lat, rate = s["latency_ms"]["all"], s["miss_rate"]
        lines.append(
            f"| {s['fps']:g} | {s['return']['mean']:.1f} ± {s['return']['se']:.1f} "
            f"| {s['simulated']['mean']:.1f} ± {s['simulated']['se']:.1f} "
            f"| {s['deployed_minus_simulated']['mean']:+.1f} ± "
            f"{s['deployed_minus_simulated']['se']:.1f} "
            f"| {'-' if rate is None else f'{100 * rate:.2f}%'} "
            f"| {ms(lat['p50'])} / {ms(lat['p95'])} / {ms(lat['p99'])} "
            f"| {ms(s['slack_p95_ms'])} |"
        )
    return "\n".join(lines)
