"""`bench.soak`'s verdicts and figure: what its samples say, apart from the load that made them."""

from __future__ import annotations

from pathlib import Path

#: Memory is flat when the resident size at the end is within this share of its size a
#: quarter of the way in (the compile caches and the replay cache are full by then).
FLAT_SHARE = 0.10
#: Descriptors are flat when the largest count of the last half exceeds the largest of the
#: second quarter by at most this many (sockets of the load come and go).
FLAT_FDS = 16


def verdicts(
    rows: list[dict], max_lag_ms: float, bound_ms: float, replay_keep: int, leaks: list[str]
) -> dict:
    """Each criterion of the soak: (held, the figure that says so)."""
    n = len(rows)
    quarter, half = rows[n // 4], rows[n // 2 :]
    second_quarter = rows[n // 4 : n // 2] or [quarter]
    last = rows[-1]
    rss_growth = (last["rss_mb"] - quarter["rss_mb"]) / quarter["rss_mb"]
    fds_growth = max(r["fds"] for r in half) - max(r["fds"] for r in second_quarter)
    most_files = max(r["record_files"] for r in rows)
    most_mb = max(r["record_mb"] for r in rows)
    read, lost = last["replays_read"], last["replays_lost"]
    return {
        "memory flat (end within 10% of a quarter in)": (
            rss_growth <= FLAT_SHARE, f"{rss_growth:+.1%}"
        ),
        f"descriptors flat (last half's max <= second quarter's + {FLAT_FDS})": (
            fds_growth <= FLAT_FDS, f"{fds_growth:+d}"
        ),
        # + 1: a replay still being written (a dot-name) beside the kept ones.
        f"disk bounded (<= {replay_keep} replay files)": (
            most_files <= replay_keep + 1, f"max {most_files} files, {most_mb} MB"
        ),
        "no finished replay lost": (lost == 0, f"{read} read, {lost} lost"),
        f"no tick later than {bound_ms:.0f} ms": (
            max_lag_ms <= bound_ms, f"max {max_lag_ms:.1f} ms"
        ),
        "no error": (last["errors"] == 0, f"{last['errors']} errors"),
        "no key or token in a log": (not leaks, ", ".join(leaks) or "none found"),
    }  # fmt: skip


def figure(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [r["t_s"] / 60 for r in rows]
    fig, axes = plt.subplots(2, 2, figsize=(10, 6), sharex=True)
    panels = (
        ("rss_mb", "env server resident memory (MB)"),
        ("fds", "open file descriptors"),
        ("record_mb", "record folder (MB)"),
        ("late_ticks", "late ticks (> 5 ms), cumulative"),
    )
    for ax, (key, label) in zip(axes.flat, panels, strict=True):
        ax.plot(t, [r[key] for r in rows])
        ax.set_title(label, fontsize=10)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("minutes")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
