"""`rtplan deploy`: the shipped agent played live at each FPS against its simulated-clock return.

Past ~450 lines: the experiment (placement, the FPS ladder, resume, per-frame timing, summaries
and the figure) is one command's pipeline; splitting its summary and plot into a module of their
own is left for when `rtplan report` draws the deployment results too.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import datetime
import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.stats import paired, standard_error
from rtplan.processes import HTTPStatusError, http_json
from rtplan.via_services import create_session, play_sessions

__all__ = [
    "Experiment",
    "censored_percentile",
    "fps_ladder",
    "frame_rows",
    "run",
    "served_game",
    "summarize",
]

#: Seconds between two polls of a live session.
POLL_S = 0.5
#: FPS values that `until_miss_rate` adds at most past the given ones (a guard, not a goal).
LADDER_MAX = 40
#: Seconds the env server may take to re-simulate one replay (`GET /v1/replays/NAME`).
REPLAY_TIMEOUT_S = 600.0
#: The latency percentiles reported per k.
QUANTILES = (50, 95, 99)
#: A landing frame whose planned action did not count: nothing (or nothing on time) arrived.
_MISSED = ("fallback", "late")


@dataclasses.dataclass(frozen=True)
class Experiment:
    """One deployment experiment: what is played, where and how often."""

    #: The game id (a committed-action game the services serve).
    game: str
    #: Frame rates played, in order.
    fps: tuple[float, ...]
    #: Full episodes per FPS, on the first evaluation seeds.
    episodes: int
    #: A forced budget; None: the gate picks each option's k.
    k: int | None = None
    #: Frames per episode at most (0: to the episode's end).
    max_frames: int = 0
    #: Continue the FPS ladder past `fps` until the miss rate passes this (None: stop there).
    until_miss_rate: float | None = None
    #: Replay an FPS whose summary exists with the same inputs.
    force: bool = False

    @property
    def agent(self) -> str:
        """ "gate", or "k<K>" for a forced budget."""
        return "gate" if self.k is None else f"k{self.k}"

    @property
    def seeds(self) -> np.ndarray:
        """`[episodes]` the evaluation seeds (`planner.episodes.seeds_of`)."""
        from planner.episodes import seeds_of

        return seeds_of("eval", self.episodes)


def fps_name(fps: float) -> str:
    """The file stem of one FPS: "fps_9", "fps_12.5"."""
    return f"fps_{fps:g}"


def fps_ladder(given: Sequence[float]) -> tuple[float, float]:
    """(the FPS after the given ones, the step): the list's last spacing, else 1."""
    step = given[-1] - given[-2] if len(given) >= 2 and given[-1] > given[-2] else 1.0
    return given[-1] + step, step


def censored_percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (nearest rank) of `values`, where +-inf marks a value known only to
    lie past every measured one (a missed deadline: its latency is longer than the window, its
    slack below zero); None when the percentile falls among those, or there are no values."""
    if len(values) == 0:
        return None
    p = float(np.percentile(np.asarray(values, np.float64), q, method="inverted_cdf"))
    return None if math.isinf(p) else round(p, 3)


def frame_rows(frames: list[dict], *, fps: float, seed: int) -> list[dict]:
    """One timing row per played frame, from a replay's frame messages (`GET /v1/replays/NAME`:
    frame n carries the report of frame n - 1, the viewer's `previous`)."""
    rows = []
    for before, msg in zip(frames, frames[1:]):
        r = msg["previous"]
        rows.append(
            {
                "fps": fps,
                "seed": seed,
                "frame": r["frame"],
                "action": r["action"],
                "k": r["k"],
                "landing": r["answer_source"] == "planned",
                "provenance": r["provenance"],
                "source": r["source"],
                "answer_source": r["answer_source"],
                "latency_ms": r["latency_ms"],
                "slack_ms": r["slack_ms"],
                "reward": round(msg["episode_return"] - before["episode_return"], 6),
            }
        )
    return rows


def summarize(
    rows: Sequence[Sequence[dict]],
    returns: Sequence[float],
    simulated: Sequence[float],
    sessions: Sequence[dict],
    budgets: Sequence[int],
) -> dict[str, Any]:
    """The summary of one FPS: N episodes' frame rows, returns, the simulated-clock returns on
    the same seeds, and the sessions' final details (their counters).

    A landing frame (the last of an option, where its planned action applies) misses when the
    action was not there by its deadline (provenance fallback or late). Its latency is then
    censored (longer than the window) and its slack negative: both enter the percentiles as
    +-inf (`censored_percentile`), so p95 is exact while misses stay under 5%.
    """
    flat = [r for ep in rows for r in ep]
    landings = [r for r in flat if r["landing"]]
    missed = [r for r in landings if r["provenance"] in _MISSED]
    by_k: dict[Any, list[float]] = collections.defaultdict(list)
    for r in landings:
        late = r["provenance"] in _MISSED or r["latency_ms"] is None
        by_k["undecided" if r["k"] is None else r["k"]].append(
            math.inf if late else r["latency_ms"]
        )
    latency = {}
    for k in [*sorted(x for x in by_k if x != "undecided"), "undecided"]:
        if k in by_k:
            lat = by_k[k]
            latency[str(k)] = {
                "n": len(lat),
                "misses": sum(math.isinf(x) for x in lat),
                **{f"p{q}": censored_percentile(lat, q) for q in QUANTILES},
            }
    pooled = [x for lat in by_k.values() for x in lat]
    latency["all"] = {
        "n": len(pooled),
        "misses": sum(math.isinf(x) for x in pooled),
        **{f"p{q}": censored_percentile(pooled, q) for q in QUANTILES},
    }
    slack = [-math.inf if r["provenance"] in _MISSED else r["slack_ms"] for r in landings]
    counts = collections.Counter(r["k"] for r in landings if r["k"] is not None)
    decided = max(sum(counts.values()), 1)
    returns = np.asarray(returns, np.float64)
    diff, diff_se = paired(returns, simulated)
    stats = [s.get("stats", {}) for s in sessions]
    return {
        "return": {"mean": float(returns.mean()), "se": standard_error(returns)},
        "simulated": {"mean": float(np.mean(simulated)), "se": standard_error(simulated)},
        "deployed_minus_simulated": {"mean": diff, "se": diff_se},
        "returns": returns.tolist(),
        "simulated_returns": [float(x) for x in simulated],
        "frames": [len(ep) for ep in rows],
        "budgets": {str(k): counts.get(k, 0) / decided for k in budgets},
        "budget_counts": {str(k): counts.get(k, 0) for k in budgets},
        "landings": len(landings),
        "misses": len(missed),
        "miss_rate": len(missed) / len(landings) if landings else None,
        "slack_p95_ms": censored_percentile(slack, 5),
        "latency_ms": latency,
        "late_ticks": sum(int(s.get("late_ticks", 0)) for s in stats),
        "ticks": sum(int(s.get("ticks", 0)) for s in stats),
        "max_tick_lag_ms": max((float(s.get("max_tick_lag_ms", 0.0)) for s in stats), default=0.0),
        "planner_errors": sum(int(s.get("planner_errors", 0)) for s in stats),
        "planner_late_answers": sum(int(s.get("planner_late_answers", 0)) for s in stats),
        "last_planner_error": next(
            (s["last_planner_error"] for s in stats if s.get("last_planner_error")), ""
        ),
    }


def served_game(http: str, exp: Experiment) -> dict:
    """The game as the env server at `http` runs it (`GET /v1/games`), checked playable.

    Raises:
        ValueError: unknown to the server, a clock game, or the planner service cannot play
            the agent (no gate, a budget it does not plan, or not available: its reason).
    """
    listed = http_json("GET", f"{http}/v1/games")["games"]
    spec = next((g for g in listed if g["id"] == exp.game), None)
    if spec is None:
        served = ", ".join(g["id"] for g in listed)
        raise ValueError(f"the env server at {http} has no game {exp.game!r} (it has {served})")
    if spec["num_players"] != 1:
        raise ValueError(f"{exp.game} is a clock game: deploy plays the committed-action games")
    caps = spec["planner"]
    if not caps["available"] and not caps.get("compiling"):
        raise ValueError(f"the planner cannot play {exp.game}: {caps['reason']}")
    if exp.k is None and not caps["gate"]:
        raise ValueError(f"the planner service has no gate for {exp.game}: pass --k K")
    if exp.k is not None and exp.k not in caps["budgets"]:
        raise ValueError(f"--k {exp.k}: the planner service plans {exp.game} at {caps['budgets']}")
    return spec


def _live_episode(http: str, exp: Experiment, fps: float, seed: int) -> tuple[dict, list[dict]]:
    """One recorded real-time session of the planner agent; its final details and frame rows."""
    body = {
        "game": exp.game,
        "agent": "planner",
        "fps": fps,
        "seed": seed,
        "record": True,
        "max_frames": exp.max_frames,
        **({} if exp.k is None else {"k": exp.k}),
    }
    sid = create_session(http, body)
    while (info := http_json("GET", f"{http}/v1/sessions/{sid}"))["status"] in (
        "waiting",
        "running",
    ):
        time.sleep(POLL_S)
    if info["status"] != "finished":
        raise RuntimeError(
            f"session {sid} (seed {seed}, {fps:g} FPS) ended {info['status']}: {info['reason']}"
        )
    name = Path(info["replay"]).name
    index = http_json("GET", f"{http}/v1/replays/{name}", timeout=REPLAY_TIMEOUT_S)
    rows = frame_rows(index["frames"], fps=fps, seed=seed)
    if abs(sum(r["reward"] for r in rows) - float(info["episode_return"])) > 1e-3:
        raise RuntimeError(f"session {sid}: the replay's rewards do not sum to its return")
    return info, rows


def _load(path: Path, inputs: dict) -> dict | None:
    """The record at `path` when it exists and was made with `inputs`."""
    if not path.exists():
        return None
    try:
        rec = json.loads(path.read_text())
    except ValueError:
        return None
    return rec if rec.get("inputs") == inputs else None


def _write_json(path: Path, rec: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(rec, indent=1))
    tmp.replace(path)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _simulated(http: str, exp: Experiment, out: Path, inputs: dict, log: Callable) -> dict:
    """The simulated-clock returns on the same seeds (`via_services.play_sessions`): played once
    per experiment, kept in `simulated.json` while the inputs match."""
    path = out / "simulated.json"
    rec = None if exp.force else _load(path, inputs)
    if rec is not None:
        log(f"simulated clock: kept {path}")
        return rec
    start = time.perf_counter()
    log(f"simulated clock: {exp.episodes} episodes of {exp.game} ({exp.agent})")
    ended = play_sessions(
        http, exp.game, exp.seeds, lambda line: None, k=exp.k, max_frames=exp.max_frames
    )
    ks = collections.Counter()
    for info in ended:
        ks.update({int(k): n for k, n in info["stats"]["k_histogram"].items()})
    rec = {
        "inputs": inputs,
        "seeds": exp.seeds.tolist(),
        "returns": [float(info["episode_return"]) for info in ended],
        "frames": [int(info["frame"]) for info in ended],
        "reasons": [info["reason"] for info in ended],
        "k_histogram": {str(k): n for k, n in sorted(ks.items())},
        "seconds": round(time.perf_counter() - start, 1),
        "timestamp": _now(),
    }
    _write_json(path, rec)
    returns = np.asarray(rec["returns"])
    log(f"simulated clock: {returns.mean():.2f} +- {standard_error(returns):.2f}")
    return rec


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


def _plot(path: Path, summaries: list[dict], exp: Experiment) -> None:
    """The paper's deployment figure: return, miss rate and p95 slack against FPS."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fps = [s["fps"] for s in summaries]
    fig, (ret, miss, slack) = plt.subplots(1, 3, figsize=(12, 3.4))
    ret.errorbar(
        fps,
        [s["return"]["mean"] for s in summaries],
        [s["return"]["se"] for s in summaries],
        marker="o",
        capsize=3,
        label="deployed",
    )
    ret.errorbar(
        fps,
        [s["simulated"]["mean"] for s in summaries],
        [s["simulated"]["se"] for s in summaries],
        marker="s",
        capsize=3,
        linestyle="--",
        label="simulated clock",
    )
    ret.set(xlabel="FPS", ylabel="return (mean ± SE)", title=f"{exp.game} ({exp.agent})")
    ret.legend()
    rates = [np.nan if s["miss_rate"] is None else 100 * s["miss_rate"] for s in summaries]
    miss.plot(fps, rates, marker="o", color="tab:red")
    if exp.until_miss_rate is not None:
        miss.axhline(100 * exp.until_miss_rate, color="grey", linestyle=":")
    miss.set(xlabel="FPS", ylabel="deadline miss rate (%)", title="misses")
    slacks = [np.nan if s["slack_p95_ms"] is None else s["slack_p95_ms"] for s in summaries]
    slack.plot(fps, slacks, marker="o", color="tab:green")
    over = [f for f, v in zip(fps, slacks) if np.isnan(v)]
    if over:  # more than 5% of the planned actions missed: no slack 95% of them beat
        slack.plot(over, [0] * len(over), "x", color="tab:red", label="> 5% missed")
        slack.legend()
    slack.axhline(0, color="grey", linestyle=":")
    slack.set(xlabel="FPS", ylabel="ms", title="p95 slack (95% of planned actions beat it)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(
    http: str,
    exp: Experiment,
    out: Path,
    *,
    services: dict,
    log: Callable = print,
    progress: bool = True,
) -> dict:
    """Plays the experiment against the env server at `http` (its planner agent, real time),
    and writes its files under `out`.

    Per FPS: `fps_<F>.jsonl` (a timing row per frame, `frame_rows`) and `fps_<F>.json` (the
    summary, `summarize`); an FPS whose summary holds the same inputs is kept. Once:
    `simulated.json` (the simulated-clock returns on the same seeds); `deploy.csv`,
    `deploy.json` and `deploy.png` over the FPS played.

    Args:
        http: the env server's base URL.
        exp: the experiment.
        out: the output folder.
        services: what identifies the services (checkpoint digests, or their addresses), part
            of the inputs a kept file must match; `placement` in it is recorded, not matched.

    Returns:
        `deploy.json`'s content.
    """
    from tqdm import tqdm

    spec = served_game(http, exp)
    placement = services.get("placement")
    ident = {k: v for k, v in services.items() if k != "placement"}
    inputs = {
        "game": exp.game,
        "agent": exp.agent,
        "seeds": exp.seeds.tolist(),
        "max_frames": exp.max_frames,
        "services": {
            **ident,
            "budgets": spec["planner"]["budgets"],
            "gate": spec["planner"]["gate"],
        },
    }
    out.mkdir(parents=True, exist_ok=True)
    sim = _simulated(http, exp, out, inputs, log)
    budgets = spec["planner"]["budgets"]
    bar = tqdm(
        total=len(exp.fps) * exp.episodes,
        unit="episode",
        desc=exp.game,
        disable=None if progress else True,
    )
    summaries: list[dict] = []
    todo = list(exp.fps)
    added, breaking = 0, None
    try:
        while todo:
            fps = todo.pop(0)
            try:
                summary = _fps(http, exp, fps, out, inputs, sim, budgets, bar, log, placement)
            except HTTPStatusError as e:
                if not added or e.status != 422:
                    raise
                # A ladder FPS the server refuses (above its --max-fps): the ladder ends.
                log(f"{fps:g} FPS: refused, the ladder ends here ({e})")
                break
            summaries.append(summary)
            rate = summary["miss_rate"]
            within = exp.until_miss_rate is not None and (rate or 0.0) <= exp.until_miss_rate
            if within:
                breaking = fps if breaking is None else max(breaking, fps)
            if not todo and within and added < LADDER_MAX:
                nxt, _ = fps_ladder([s["fps"] for s in summaries])
                todo.append(nxt)
                added += 1
                bar.total += exp.episodes
                bar.refresh()
    finally:
        bar.close()
    _tables(out, summaries, exp, breaking)
    log(_table(summaries))
    if exp.until_miss_rate is not None:
        log(f"highest FPS with a miss rate <= {exp.until_miss_rate:g}: {breaking}")
    log(f"wrote {out}/deploy.csv, deploy.json, deploy.png and fps_*.json(l)")
    return json.loads((out / "deploy.json").read_text())


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


def _fps(
    http: str,
    exp: Experiment,
    fps: float,
    out: Path,
    inputs: dict,
    sim: dict,
    budgets: Sequence[int],
    bar,
    log: Callable,
    placement: dict | None,
) -> dict:
    """One FPS: kept when its summary holds the same inputs, else its N episodes played."""
    path = out / f"{fps_name(fps)}.json"
    inputs = {**inputs, "fps": fps}
    kept = None if exp.force else _load(path, inputs)
    if kept is not None:
        log(f"{fps:g} FPS: kept {path}")
        bar.update(exp.episodes)
        return kept
    start = time.perf_counter()
    frames_path = out / f"{fps_name(fps)}.jsonl"
    episodes_path = out / f"{fps_name(fps)}.episodes.jsonl"
    done = {} if exp.force else _finished(episodes_path, frames_path, inputs)
    _rewrite(episodes_path, frames_path, done)  # drops an episode cut short
    if done:
        log(f"{fps:g} FPS: kept {len(done)} finished episodes")
        bar.update(len(done))
    for seed in exp.seeds.tolist():
        if seed in done:
            continue
        info, ep_rows = _live_episode(http, exp, fps, seed)
        done[seed] = ({"inputs": inputs, "seed": seed, **{k: info[k] for k in _KEPT}}, ep_rows)
        _append(episodes_path, frames_path, *done[seed])
        bar.update(1)
        bar.set_postfix(fps=f"{fps:g}", ret=f"{info['episode_return']:.1f}")
    eps = [done[seed] for seed in exp.seeds.tolist()]
    rows = [ep_rows for _, ep_rows in eps]
    returns = [float(ep["episode_return"]) for ep, _ in eps]
    sessions = [ep for ep, _ in eps]
    summary = {
        "inputs": inputs,
        "fps": fps,
        "seeds": exp.seeds.tolist(),
        **summarize(rows, returns, sim["returns"], sessions, budgets),
        "placement": placement,
        "seconds": round(time.perf_counter() - start, 1),
        "timestamp": _now(),
    }
    _write_json(path, summary)
    rate = summary["miss_rate"]
    log(
        f"{fps:g} FPS: return {summary['return']['mean']:.2f} +- {summary['return']['se']:.2f}, "
        f"deployed - simulated {summary['deployed_minus_simulated']['mean']:+.2f} +- "
        f"{summary['deployed_minus_simulated']['se']:.2f}, miss rate "
        f"{'-' if rate is None else f'{100 * rate:.2f}%'}, p95 slack {summary['slack_p95_ms']} ms"
    )
    return summary


#: What an episode line keeps of its session's final details.
_KEPT = ("episode_return", "frame", "reason", "stats")


def _line(obj: dict) -> str:
    return json.dumps(obj, separators=(",", ":")) + "\n"


def _append(episodes: Path, frames: Path, episode: dict, rows: list[dict]) -> None:
    """Appends one finished episode: its frame rows, then its episode line (which marks it
    finished: a crash between the two leaves rows that `_finished` drops)."""
    with frames.open("a") as f:
        f.writelines(_line(r) for r in rows)
    with episodes.open("a") as f:
        f.write(_line(episode))


def _finished(episodes: Path, frames: Path, inputs: dict) -> dict[int, tuple[dict, list[dict]]]:
    """The episodes of one FPS already played with `inputs`: seed -> (episode line, rows)."""
    if not episodes.exists() or not frames.exists():
        return {}
    lines = {}
    for text in episodes.read_text().splitlines():
        try:
            ep = json.loads(text)
        except ValueError:
            break  # a line cut short: the episodes after it were not finished
        if ep.get("inputs") == inputs and ep.get("seed") in inputs["seeds"]:
            lines[ep["seed"]] = ep
    rows: dict[int, list[dict]] = collections.defaultdict(list)
    for text in frames.read_text().splitlines():
        try:
            r = json.loads(text)
        except ValueError:
            continue
        if r.get("seed") in lines:
            rows[r["seed"]].append(r)
    return {seed: (ep, rows[seed]) for seed, ep in lines.items()}


def _rewrite(episodes: Path, frames: Path, done: dict[int, tuple[dict, list[dict]]]) -> None:
    """Rewrites both files of one FPS with the finished episodes only (none: no files)."""
    if not done:
        frames.unlink(missing_ok=True)
        episodes.unlink(missing_ok=True)
        return
    frames.write_text("".join(_line(r) for _, rows in done.values() for r in rows))
    episodes.write_text("".join(_line(ep) for ep, _ in done.values()))
