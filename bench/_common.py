"""What every bench script shares: the checkout root, its commit, CSV rows and call timing."""

from __future__ import annotations

import csv
import datetime
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def utc_now() -> str:
    """The `date` column of the bench CSVs: "2026-01-31T12:00:00Z"."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def git_commit(*, short: bool = False) -> str:
    """HEAD's commit (read-only; `short`: its abbreviated hash), or "unknown" outside a git
    checkout. Each CSV keeps the form it was started with (match.csv full, the others short)."""
    argv = ["git", "rev-parse", *(["--short"] if short else []), "HEAD"]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    return out.stdout.strip() or "unknown"


def append_rows(
    path: str | Path, rows: Sequence[dict], fields: Sequence[str] | None = None
) -> None:
    """Appends `rows` to the CSV at `path`, writing the header first when the file is new or
    empty. `fields`: the columns, in order (default the first row's keys); a missing or None
    value is written empty."""
    path = Path(path)
    fields = list(fields if fields is not None else rows[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        if new:
            writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in fields})


def time_calls(fn: Callable, *args, calls: int, warmup: int = 10) -> np.ndarray:
    """Milliseconds of each of `calls` calls of `fn(*args)` (JAX work waited for), after
    `warmup` untimed calls (compilation and caches): shape (calls,)."""
    import jax

    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append((time.perf_counter() - start) * 1e3)
    return np.asarray(times)


def median_p95(times: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """(median, 95th percentile) of timings."""
    a = np.asarray(times)
    return float(np.median(a)), float(np.percentile(a, 95))


def print_ratio_table(
    columns: Sequence[str],
    rows: Sequence[tuple[str, np.ndarray]],
    *,
    cell: Callable[[np.ndarray], str],
) -> float:
    """Prints a Markdown table of timed runs: each row's name, `cell(times)` and its median over
    the first row's; returns that base median (ms), for rows timed otherwise."""
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    base = float(np.median(rows[0][1]))
    for name, t in rows:
        print(f"| {name} | {cell(t)} | {np.median(t) / base:.2f} |")
    return base
