"""Clock games through the services: the clock gate (the planner agent, player 0) against the
reflex opponent, ply by ply (movers, moves, charged ticks, the gate's budgets, both clocks after
every ply, the result) against `play_match` in process."""

from __future__ import annotations

import dataclasses

import numpy as np

from rtplan.via_services.sessions import Loaded, at, first_difference

__all__ = [
    "COLUMNS",
    "OPPONENT",
    "ClockGame",
    "compare",
    "identical",
    "in_process",
    "load",
    "served",
]

#: The sessions' opponent: the reflex (the agent is player 0).
OPPONENT = "reflex"


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


def served(frames: list[dict], info: dict, seed: int) -> ClockGame:
    """A finished session's clock game (`played_frames` of its replay, as the env server
    re-simulates it): the agent is player 0, the opponent's plies answered by "opponent"; the
    result is the agent's as the session reported it."""
    movers = np.array([1 if x["answer_source"] == "opponent" else 0 for x in frames], np.int64)
    return ClockGame(
        seed=seed,
        movers=movers,
        actions=np.array([x["action"] for x in frames], np.int64),
        costs=np.array([x["cost"] for x in frames], np.int64),
        ks=np.array([x["k"] or 0 for x, m in zip(frames, movers) if m == 0], np.int64),
        clocks=np.array([x["clocks"] for x in frames], np.int64).reshape(-1, 2),
        result=float(info["episode_return"]),
    )


def compare(want: list[ClockGame], served: list[ClockGame]) -> tuple[list[dict], list[str]]:
    """Compares in-process clock games with the sessions', seed by seed.

    Returns:
        one row per seed (plies, identical moves / budgets / clocks) and the mismatches, one
        line each naming the first differing ply (or move of the agent).
    """
    rows, problems = [], []
    for a, b in zip(want, served, strict=True):
        plies = {
            name: first_difference(getattr(a, name), getattr(b, name))
            for name in ("movers", "actions", "costs")
        }
        clock = first_difference(a.clocks.reshape(-1), b.clocks.reshape(-1))
        k = first_difference(a.ks, b.ks)
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
                    f"{at(getattr(a, name), i)}, services {at(getattr(b, name), i)}"
                )
        if k is not None:
            problems.append(
                f"seed {a.seed}: first differing budget at the agent's move {k}: in-process "
                f"k={at(a.ks, k)}, services k={at(b.ks, k)}"
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


#: The per-seed table's columns: (header, row key, width).
COLUMNS = (
    ("seed", "seed", 9),
    ("plies", "plies_in_process", 6),
    ("services", "plies_services", 8),
    ("moves", "moves", 6),
    ("budgets", "ks", 8),
    ("clocks", "clocks", 7),
    ("result", "result", 7),
)


def load(game_id: str, planner_file: str, gate_file: str) -> Loaded:
    """The planner and the clock gate, loaded once: `load_clock_gate` over this planner file
    makes the planner service's checks.

    Raises:
        harness.checkpoint.CheckpointError: a file does not load, or the gate is not a clock
            gate of this planner.
    """
    from rtplan.gate.clock.gate import load_clock_gate
    from rtplan.planner.options import Planner
    from rtplan.planner.store import load_planner

    pcfg, params, _ = load_planner(game_id, planner_file)
    gate, gparams, _ = load_clock_gate(gate_file, Planner(pcfg), planner_file=planner_file)
    return Loaded(gate.planner, params, gate, gparams)


def in_process(loaded: Loaded, seeds: np.ndarray):
    """`play_match` of the clock gate (player A) against the reflex from `game.init(PRNGKey(s))`
    (no opening, the game's own clocks): for each seed the game in which A is player 0, as
    the sessions play it, ply by ply (`on_ply`)."""
    from rtplan.gate.clock.gate import ClockGate, clock_gate_player
    from rtplan.planner.matches import constant_player, play_match
    from rtplan.planner.options import Planner

    params = loaded.planner_params
    planner = Planner(dataclasses.replace(loaded.planner.config, gumbel_scale=0.0))  # as served
    gate = ClockGate(planner, loaded.gate.config)
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
        clock_gate_player(gate, loaded.gate_params),
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


def identical(game_id: str, split: str, rows: list[dict], served: list[ClockGame]) -> str:
    """The line that says every opening played identically."""
    return (
        f"{game_id}: {len(rows)} {split} openings identical in process and through the "
        f"services (the gate against the reflex: {sum(len(g.actions) for g in served)} plies, "
        f"{sum(len(g.ks) for g in served)} gate budgets, both clocks after every ply)"
    )
