"""The experiment loop: the simulated-clock returns, then each FPS's live episodes, resumable."""

from __future__ import annotations

import collections
import datetime
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from rtplan.deploy._experiment import Experiment, fps_ladder, fps_name
from rtplan.deploy._resume import _KEPT, _append, _finished, _load, _rewrite, _write_json
from rtplan.deploy._summary import frame_rows, summarize
from rtplan.deploy._tables import _table, _tables
from rtplan.harness.stats import standard_error
from rtplan.processes import HTTPStatusError, http_json
from rtplan.via_services import create_session, fetch_replay, play_sessions

#: Seconds between two polls of a live session.
POLL_S = 0.5


#: FPS values that `until_miss_rate` adds at most past the given ones (a guard, not a goal).
LADDER_MAX = 40


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


def _live_episode(
    http: str, exp: Experiment, fps: float, seed: int, key: str | None
) -> tuple[dict, list[dict]]:
    """One recorded real-time session of the planner agent (created with `key`, where the env
    server has keys); its final details and frame rows."""
    body = {
        "game": exp.game,
        "agent": "planner",
        "fps": fps,
        "seed": seed,
        "record": True,
        "max_frames": exp.max_frames,
        **({} if exp.k is None else {"k": exp.k}),
    }
    sid = create_session(http, body, key)
    while (info := http_json("GET", f"{http}/v1/sessions/{sid}"))["status"] in (
        "waiting",
        "running",
    ):
        time.sleep(POLL_S)
    if info["status"] != "finished":
        raise RuntimeError(
            f"session {sid} (seed {seed}, {fps:g} FPS) ended {info['status']}: {info['reason']}"
        )
    rows = frame_rows(fetch_replay(http, info)["frames"], fps=fps, seed=seed)
    if abs(sum(r["reward"] for r in rows) - float(info["episode_return"])) > 1e-3:
        raise RuntimeError(f"session {sid}: the replay's rewards do not sum to its return")
    return info, rows


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _simulated(
    http: str, exp: Experiment, out: Path, inputs: dict, log: Callable, key: str | None
) -> dict:
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
        http, exp.game, exp.seeds, lambda line: None, k=exp.k, max_frames=exp.max_frames, key=key
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


def run(
    http: str,
    exp: Experiment,
    out: Path,
    *,
    services: dict,
    key: str | None = None,
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
        key: a key of the env server that creates its sessions, where it has keys.

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
    sim = _simulated(http, exp, out, inputs, log, key)
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
                summary = _fps(
                    http, exp, fps, out, inputs, sim, budgets, bar, log, placement, key=key
                )
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
    *,
    key: str | None,
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
        info, ep_rows = _live_episode(http, exp, fps, seed, key)
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
