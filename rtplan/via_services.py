"""`rtplan eval --via-services`: the gate played through the real services against in-process.

Committed games: the gate's episodes, frame by frame (actions, k-sequence, return). Clock games:
the clock gate (the planner agent, player 0) against the reflex opponent, ply by ply (movers,
moves, charged ticks, the gate's budgets, both clocks after every ply, the result).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from harness.checkpoint import checkpoint_root
from rtplan.processes import http_json, services

__all__ = [
    "ClockGame",
    "Served",
    "compare",
    "compare_clock",
    "create_session",
    "play_sessions",
    "read_replay",
    "run",
    "serving_folder",
]

#: Sessions the env server plays at once (its default `max_sessions` is 16).
PARALLEL = 4
#: A session whose frame count stands still this long has stalled (one search of the largest
#: budget on a loaded CPU takes well under a second).
STALL_S = 300.0
#: Session creations tried while the planner service does not answer the gate query.
CREATE_TRIES = 5


@dataclasses.dataclass
class Served:
    """What one services session recorded (its replay file)."""

    seed: int
    returns: float  # sum of the frames' rewards
    frames: int
    actions: np.ndarray  # [frames] the action applied at each frame
    ks: np.ndarray  # [decisions] the k of each option, in order (-1: no decision)
    decision_frames: np.ndarray  # [decisions] the first frame of each option
    reason: str  # why the session ended ("terminated" or "truncated" at the horizon)


def read_replay(path: str | Path, seed: int, reason: str) -> Served:
    """Reads a replay file (`server.replay.ReplayFile`): its frames, cut into options by the k
    each one records.

    An option of budget k covers k frames (k - 1 reflex frames, then the planned one), every
    one recording k; the last option may be cut short by the episode's end.
    """
    from server.replay import ReplayFile  # JAX: only once a comparison runs

    frames = ReplayFile.read(path).frames
    ks, at, f = [], [], 0
    while f < len(frames):
        k = frames[f].report.k
        ks.append(-1 if k is None else int(k))
        at.append(f)
        f += max(1, k or 1)  # no decision (a miss) ends the option at its first frame
    return Served(
        seed=seed,
        returns=float(sum(x.reward for x in frames)),
        frames=len(frames),
        actions=np.array([x.report.action for x in frames], np.int64),
        ks=np.array(ks, np.int64),
        decision_frames=np.array(at, np.int64),
        reason=reason,
    )


@dataclasses.dataclass
class ClockGame:
    """One clock game ply by ply, as a session recorded it or as `play_match` played it."""

    seed: int
    movers: np.ndarray  # [plies] the player who moved (0: the planner agent, 1: the opponent)
    actions: np.ndarray  # [plies] the move
    costs: np.ndarray  # [plies] the ticks it was charged
    ks: np.ndarray  # [agent's moves] its budget (0: policy-only)
    clocks: np.ndarray  # [plies, 2] both players' ticks after the ply
    result: float  # the agent's reward (+1 win, -1 loss, 0 draw or unfinished)


def read_clock_replay(path: str | Path, seed: int, result: float) -> ClockGame:
    """A clock game's replay file as a `ClockGame` (the agent is player 0; the opponent's
    lines have source "opponent"), with the agent's `result` as the session reported it (a
    frame line's reward is the mover's)."""
    from server.replay import ReplayFile

    frames = ReplayFile.read(path).frames
    movers = np.array([1 if x.report.source == "opponent" else 0 for x in frames], np.int64)
    return ClockGame(
        seed=seed,
        movers=movers,
        actions=np.array([x.report.action for x in frames], np.int64),
        costs=np.array([x.report.cost for x in frames], np.int64),
        ks=np.array([x.report.k or 0 for x, m in zip(frames, movers) if m == 0], np.int64),
        clocks=np.array([x.state["clocks"] for x in frames], np.int64).reshape(-1, 2),
        result=result,
    )


def compare_clock(want: list[ClockGame], served: list[ClockGame]) -> tuple[list[dict], list[str]]:
    """Compares in-process clock games with the sessions', seed by seed.

    Returns:
        one row per seed (plies, identical moves / budgets / clocks) and the mismatches, one
        line each naming the first differing ply (or move of the agent).
    """
    rows, problems = [], []
    for a, b in zip(want, served, strict=True):
        plies = {
            name: _first_difference(getattr(a, name), getattr(b, name))
            for name in ("movers", "actions", "costs")
        }
        clock = _first_difference(a.clocks.reshape(-1), b.clocks.reshape(-1))
        k = _first_difference(a.ks, b.ks)
        rows.append(
            {
                "seed": a.seed,
                "plies_in_process": len(a.actions),
                "plies_services": len(b.actions),
                "moves": all(v is None for v in plies.values()),
                "ks": k is None,
                "clocks": clock is None,
                "result": a.result == b.result,
            }
        )
        for name, i in plies.items():
            if i is not None:
                problems.append(
                    f"seed {a.seed}: first differing {name[:-1]} at ply {i}: in-process "
                    f"{_at(getattr(a, name), i)}, services {_at(getattr(b, name), i)}"
                )
        if k is not None:
            problems.append(
                f"seed {a.seed}: first differing budget at the agent's move {k}: in-process "
                f"k={_at(a.ks, k)}, services k={_at(b.ks, k)}"
            )
        if clock is not None:
            i = clock // 2
            problems.append(
                f"seed {a.seed}: clocks first differ after ply {i}: in-process "
                f"{_row(a.clocks, i)}, services {_row(b.clocks, i)}"
            )
        if a.result != b.result:
            problems.append(f"seed {a.seed}: result in-process {a.result:g}, services {b.result:g}")
    return rows, problems


def _row(a: np.ndarray, i: int) -> list | str:
    return a[i].tolist() if i < len(a) else "none (the game is over)"


def _clock_table(rows: list[dict]) -> str:
    yes = {True: "yes", False: "NO"}
    out = [
        f"{'seed':>9} {'plies':>6} {'services':>8} {'moves':>6} {'budgets':>8} {'clocks':>7} "
        f"{'result':>7}"
    ]
    for r in rows:
        out.append(
            f"{r['seed']:>9} {r['plies_in_process']:>6} {r['plies_services']:>8} "
            f"{yes[r['moves']]:>6} {yes[r['ks']]:>8} {yes[r['clocks']]:>7} {yes[r['result']]:>7}"
        )
    return "\n".join(out)


def _clock_in_process(game_id: str, planner_file: str, gate_file: str, seeds: np.ndarray):
    """`play_match` of the clock gate (player A) against the reflex from `game.init(PRNGKey(s))`
    (no opening, the game's own clocks): for each seed the game in which A is player 0, as
    the sessions play it, ply by ply (`on_ply`)."""
    import dataclasses as dc

    from gate.clock_players import gate_player
    from planner.matches import constant_player, play_match
    from planner.options import Planner
    from planner.store import load_planner

    pcfg, params, _ = load_planner(game_id, planner_file)
    planner = Planner(dc.replace(pcfg, gumbel_scale=0.0))  # the service's search
    budgets = np.asarray((0, *planner.config.budgets))
    n = len(seeds)
    log: dict[int, list] = {g: [] for g in range(2 * n)}

    def on_ply(ply) -> None:
        movers = np.asarray(ply.states.current_player)
        clocks = np.asarray(ply.next_states.inner.clocks)
        for r, g in enumerate(ply.game):
            if g >= 0 and ply.alive[r]:
                row = (int(movers[r]), int(ply.actions[r]), int(ply.costs[r]), int(ply.options[r]))
                log[int(g)].append((*row, clocks[r].tolist()))

    ep = play_match(
        planner,
        params,
        gate_player(gate_file, planner, params),
        constant_player("reflex", 0),
        seeds,
        opening_plies=0,
        on_ply=on_ply,
    )
    games = []
    for i, seed in enumerate(seeds):
        # Game i has A moving first, game n + i second: the session's agent is player 0.
        g = i if log[i][0][0] == 0 else n + i
        movers, actions, costs, options, clocks = zip(*log[g])
        movers = np.array(movers)
        a_options = np.array(options)[movers == 0]
        games.append(
            ClockGame(
                seed=int(seed),
                movers=movers,
                actions=np.array(actions),
                costs=np.array(costs),
                ks=np.where(a_options > 0, budgets[np.clip(a_options, 0, None)], 0),
                clocks=np.array(clocks),
                result=2.0 * float(ep.returns[g]) - 1.0,
            )
        )
    return games


def _run_clock(game_id, seeds, split, planner_file, gate_file, log) -> int:
    from gate.clock_gate import load_clock_gate
    from planner.options import Planner
    from planner.store import load_planner

    pcfg, _, _ = load_planner(game_id, planner_file)
    load_clock_gate(gate_file, Planner(pcfg), planner_file=planner_file)  # the service's checks
    with tempfile.TemporaryDirectory(prefix="rtplan-via-services-") as tmp:
        root = serving_folder(Path(tmp), game_id, planner_file, gate_file)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            reference = pool.submit(_clock_in_process, game_id, planner_file, gate_file, seeds)
            log(f"starting the planner service and env server over {planner_file}, {gate_file}")
            with services(
                game_id, echo=False, checkpoint_dir=root, record_dir=Path(tmp) / "replays"
            ) as addr:
                want = reference.result()
                ended = play_sessions(addr["http"], game_id, seeds, log, opponent="reflex")
                served = [
                    read_clock_replay(info["replay"], int(s), float(info["episode_return"]))
                    for info, s in zip(ended, seeds)
                ]
    rows, problems = compare_clock(want, served)
    log(_clock_table(rows))
    for line in problems:
        log(f"MISMATCH {line}")
    if problems:
        return 1
    log(
        f"{game_id}: {len(seeds)} {split} openings identical in process and through the "
        f"services (the gate against the reflex: {sum(len(g.actions) for g in served)} plies, "
        f"{sum(len(g.ks) for g in served)} gate budgets, both clocks after every ply)"
    )
    return 0


def _first_difference(a: np.ndarray, b: np.ndarray) -> int | None:
    """The first index where two sequences differ (a length difference counts), else None."""
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    if len(diff):
        return int(diff[0])
    return None if len(a) == len(b) else n


def _at(a: np.ndarray, i: int) -> int | str:
    return int(a[i]) if i < len(a) else "none (the episode is over)"


def compare(episodes, served: list[Served]) -> tuple[list[dict], list[str]]:
    """Compares in-process episodes (`gate.evaluate.Episodes` with actions) with the sessions.

    Returns:
        one row per seed (returns, frames, identical actions / k-sequence) and the
        mismatches, one line each naming the first differing frame.
    """
    rows, problems = [], []
    for i, s in enumerate(served):
        seed = int(episodes.seeds[i])
        acts, ks = episodes.actions[i], episodes.ks[i]
        frame = _first_difference(acts, s.actions)
        decision = _first_difference(ks, s.ks)
        same_return = abs(float(episodes.returns[i]) - s.returns) <= 1e-6
        rows.append(
            {
                "seed": seed,
                "return_in_process": float(episodes.returns[i]),
                "return_services": s.returns,
                "frames_in_process": int(episodes.frames[i]),
                "frames_services": s.frames,
                "actions": frame is None,
                "ks": decision is None,
            }
        )
        if frame is not None:
            problems.append(
                f"seed {seed}: first differing action at frame {frame}: in-process "
                f"{_at(acts, frame)}, services {_at(s.actions, frame)}"
            )
        if decision is not None:
            where = episodes.decision_frames[i]
            at = where[decision] if decision < len(where) else s.decision_frames[decision]
            problems.append(
                f"seed {seed}: first differing k at decision {decision} (frame {int(at)}): "
                f"in-process k={_at(ks, decision)}, services k={_at(s.ks, decision)}"
            )
        if not same_return or int(episodes.frames[i]) != s.frames:
            problems.append(
                f"seed {seed}: in-process return {float(episodes.returns[i]):g} over "
                f"{int(episodes.frames[i])} frames, services {s.returns:g} over {s.frames}"
            )
    return rows, problems


def _table(rows: list[dict]) -> str:
    yes = {True: "yes", False: "NO"}
    out = [
        f"{'seed':>9} {'return in-process':>17} {'services':>9} {'frames':>7} "
        f"{'services':>8} {'actions':>8} {'k-seq':>6}"
    ]
    for r in rows:
        out.append(
            f"{r['seed']:>9} {r['return_in_process']:>17g} {r['return_services']:>9g} "
            f"{r['frames_in_process']:>7} {r['frames_services']:>8} {yes[r['actions']]:>8} "
            f"{yes[r['ks']]:>6}"
        )
    return "\n".join(out)


def _in_process(game_id: str, planner_file: str, gate_file: str, seeds: np.ndarray):
    """`gate.evaluate.play` of the deployed gate (argmax), recording every frame's action."""
    from gate.evaluate import gate_chooser, play
    from gate.policy import load_gate
    from planner.options import Planner
    from planner.store import load_planner

    pcfg, pparams, _ = load_planner(game_id, planner_file)
    planner = Planner(pcfg)
    gate, gparams, _ = load_gate(gate_file, planner, planner_file=planner_file)
    choose = gate_chooser(gate, gparams, pparams)
    return play(
        gate.runner(len(seeds)),
        pparams,
        seeds,
        choose,
        record_actions=True,
        future_params=gate.future_params(gparams),
    )


def serving_folder(tmp: Path, game_id: str, planner_file: str, gate_file: str) -> Path:
    """A checkpoints folder under `tmp` that holds exactly these two files where the services
    read them (`<dir>/<game>/{planner,gate}.msgpack`); returns it."""
    from gate.policy import gate_path
    from planner.store import planner_path

    root = Path(tmp) / "checkpoints"
    (root / game_id).mkdir(parents=True)
    shutil.copyfile(planner_file, planner_path(root, game_id))
    shutil.copyfile(gate_file, gate_path(root, game_id))
    return root


def create_session(http: str, body: dict) -> str:
    """Creates a session; retries while the env server cannot reach the planner service yet.

    A gated session asks the planner service for its gate first; on a loaded machine a fresh
    connection can time out (UNAVAILABLE) although the service is up, so try a few times.
    """
    for attempt in range(CREATE_TRIES):
        try:
            return http_json("POST", f"{http}/v1/sessions", body)["id"]
        except RuntimeError as e:
            if "UNAVAILABLE" not in str(e) or attempt == CREATE_TRIES - 1:
                raise
            time.sleep(2.0)
    raise AssertionError("unreachable")


def play_sessions(
    http: str,
    game_id: str,
    seeds: np.ndarray,
    log: Callable,
    *,
    k: int | None = None,
    max_frames: int = 0,
    opponent: str | None = None,
) -> list[dict]:
    """One simulated-clock planner-agent session per seed, recorded, to the episode's end (or
    `max_frames`), `PARALLEL` at a time; the gate picks each option's k unless `k` forces one.
    Clock games: `opponent` is the built-in opponent (e.g. "reflex").

    Returns:
        Each session's final details (`GET /v1/sessions/ID`: episode_return, frame, reason,
        stats, replay), in the order of `seeds`.

    Raises:
        RuntimeError: a session was refused, stalled, failed or had planner errors.
    """
    ended: dict[int, dict] = {}
    pending = [int(s) for s in seeds]
    live: dict[str, tuple[int, int, float]] = {}  # id -> (seed, frame, when it last moved)
    while pending or live:
        while pending and len(live) < PARALLEL:
            seed = pending.pop(0)
            body = {
                "game": game_id,
                "agent": "planner",  # no k: the planner service's gate picks each option's k
                "clock": "simulated",
                "seed": seed,
                "record": True,
                "max_frames": max_frames,
                **({} if k is None else {"k": k}),
                **({} if opponent is None else {"opponent": opponent}),
            }
            sid = create_session(http, body)
            if k is None and not http_json("GET", f"{http}/v1/sessions/{sid}")["gated"]:
                raise RuntimeError(f"session {sid} (seed {seed}) does not play the gate")
            live[sid] = (seed, -1, time.monotonic())
        time.sleep(0.1)
        for sid, (seed, frame, moved) in list(live.items()):
            info = http_json("GET", f"{http}/v1/sessions/{sid}")
            if info["status"] in ("waiting", "running"):
                if info["frame"] != frame:
                    live[sid] = (seed, info["frame"], time.monotonic())
                elif time.monotonic() - moved > STALL_S:
                    raise RuntimeError(f"session {sid} (seed {seed}) stalled at frame {frame}")
                continue
            del live[sid]
            if info["status"] != "finished" or info["stats"].get("planner_errors"):
                raise RuntimeError(
                    f"session {sid} (seed {seed}) ended {info['status']}: {info['reason']} "
                    f"(stats {info['stats']})"
                )
            ended[seed] = info
            log(f"seed {seed}: {info['frame']} frames, {info['reason']}")
    return [ended[int(s)] for s in seeds]


def _served(info: dict, seed: int) -> Served:
    """What a finished session's replay file recorded, checked against its reported return."""
    served = read_replay(info["replay"], seed, info["reason"])
    if abs(served.returns - float(info["episode_return"])) > 1e-6:
        raise RuntimeError(
            f"session {info['id']}: replay rewards sum to {served.returns}, the session "
            f"reports {info['episode_return']}"
        )
    return served


def run(
    game_id: str,
    *,
    episodes: int,
    split: str = "eval",
    planner_file: str | None = None,
    gate_file: str | None = None,
    log: Callable = print,
) -> int:
    """Plays the gate on a split's first `episodes` seeds in process and through the services
    (planner service + env server subprocesses, simulated clock) and compares them.

    Returns:
        0 when every seed's return, actions and k-sequence are identical, 1 otherwise.

    Raises:
        FileNotFoundError: no planner or gate file. CheckpointError: one does not load (or the
        gate was trained over another planner). ValueError: too few episodes.
        RuntimeError: a service failed to start or a session failed.
    """
    from gate.evaluate import seeds_of
    from gate.policy import gate_path, load_gate
    from planner.options import Planner
    from planner.store import load_planner, planner_path

    if episodes < 1:
        raise ValueError(f"--episodes must be >= 1, got {episodes}")
    planner_file = planner_file or str(planner_path(checkpoint_root(), game_id))
    if not Path(planner_file).exists():
        raise FileNotFoundError(f"planner checkpoint {planner_file} is missing")
    gate_file = gate_file or str(gate_path(Path(planner_file).parent.parent, game_id))
    if not Path(gate_file).exists():
        raise FileNotFoundError(f"--via-services plays the gate, and {gate_file} is missing")
    pcfg, _, _ = load_planner(game_id, planner_file)
    planner = Planner(pcfg)
    seeds = seeds_of(split, episodes)
    if planner.two_player:
        return _run_clock(game_id, seeds, split, planner_file, gate_file, log)
    load_gate(gate_file, planner, planner_file=planner_file)  # the same checks as the service

    with tempfile.TemporaryDirectory(prefix="rtplan-via-services-") as tmp:
        root = serving_folder(Path(tmp), game_id, planner_file, gate_file)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            # The in-process reference compiles while the services compile theirs.
            reference = pool.submit(_in_process, game_id, planner_file, gate_file, seeds)
            log(f"starting the planner service and env server over {planner_file}, {gate_file}")
            with services(
                game_id, echo=False, checkpoint_dir=root, record_dir=Path(tmp) / "replays"
            ) as addr:
                # Sessions start after the reference: its compile would slow the services.
                ep = reference.result()
                ended = play_sessions(addr["http"], game_id, seeds, log)
                served = [_served(info, int(s)) for info, s in zip(ended, seeds)]
    rows, problems = compare(ep, served)
    log(_table(rows))
    for line in problems:
        log(f"MISMATCH {line}")
    if problems:
        return 1
    log(
        f"{game_id}: {len(seeds)} {split} seeds identical in process and through the services "
        f"(returns, {sum(r['frames_services'] for r in rows)} frame actions, "
        f"{sum(len(s.ks) for s in served)} gate decisions)"
    )
    return 0
