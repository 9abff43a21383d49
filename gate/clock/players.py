"""The clock baselines and the clock gate as `ClockPlayer`s for `play_match`."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from rtplan.gate.clock.gate import clock_player
from rtplan.gate.clock.heuristics import (
    ClockChooser,
    ClockOptions,
    always,
    baselines,
    clock_inputs,
    midpeak,
)
from rtplan.harness.checkpoint import checkpoint_root
from rtplan.planner.matches import ClockPlayer
from rtplan.planner.options import Planner

__all__ = [
    "MIDPEAK_FILE",
    "ClockPlayer",
    "baseline_players",
    "chooser_player",
    "fixed_players",
    "gate_player",
    "heuristic_names",
    "load_midpeak_table",
    "midpeak_file",
    "midpeak_name",
    "midpeak_player",
    "multiplex",
    "pool_players",
    "read_bar",
    "write_midpeak_table",
]

#: The tuned midpeak shapes of a game, beside its planner: `{"shapes": {T0: [centre, width]}}`.
MIDPEAK_FILE = "midpeak.json"


def chooser_player(name: str, chooser: ClockChooser) -> ClockPlayer:
    """A stateless player whose option is `chooser(clock_inputs(states, out), keys)`."""

    def choose(carry, states, out, keys):
        return carry, chooser(clock_inputs(states, out), keys)

    return ClockPlayer(name=name, init=lambda batch: (), choose=choose)


def fixed_players(options: ClockOptions) -> dict[str, ClockPlayer]:
    """Always-k for every budget, `k<k>`: budget k whenever it fits, else the largest that fits
    (`clock_heuristics.always`)."""
    return {f"k{k}": chooser_player(f"k{k}", always(options, k)) for k in options.budgets}


def heuristic_names() -> tuple[str, ...]:
    """The baselines that are not a fixed budget, in table order."""
    return ("random", "policy-only", "greedy", "proportional", "midpeak", "uncertainty")


def baseline_players(
    options: ClockOptions,
    *,
    tuned: Mapping[int, tuple[float, float]] | None = None,
    bar: Mapping[int, int] | None = None,
) -> dict[str, ClockPlayer]:
    """Every baseline of `clock_heuristics.baselines` as a player (midpeak with `tuned` shapes
    per T0 when given; with the clock-aware bar's table `bar`, T0 -> k, the bar's rules), by
    condition name: `k<k>` per budget, then `heuristic_names()`, then the bar's."""
    every = baselines(options, tuned=tuned, bar=bar)
    return {name: chooser_player(name, c) for name, c in every.items()}


def read_bar(path: str | os.PathLike) -> dict[int, int]:
    """The clock-aware bar's table at `path` (`rtplan eval --tune-fixed` writes it as
    `results/<game>/clock-eval/fixed-per-t0.json`) as T0 -> k.

    Raises:
        ValueError: the file is not such a table (`clock_heuristics.bar_nearest` checks its
            budgets against the planner's).
    """
    try:
        per_t0 = json.loads(Path(path).read_text())["per_t0"]
        bar = {int(t0): int(str(k).removeprefix("k")) for t0, k in per_t0.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{path}: not a clock-aware bar table ({type(e).__name__}: {e})") from e
    if not bar:
        raise ValueError(f"{path}: the bar's table is empty")
    return bar


def pool_players(options: ClockOptions) -> dict[str, ClockPlayer]:
    """The opponents every player meets (the reference's pool): policy-only, always-k per
    budget, random option."""
    every = baseline_players(options)
    return {n: every[n] for n in ("policy-only", *[f"k{k}" for k in options.budgets], "random")}


def midpeak_name(centre: float, width: float) -> str:
    """A midpeak shape's condition name, e.g. `midpeak-c0.35-w0.3`."""
    return f"midpeak-c{centre:g}-w{width:g}"


def midpeak_player(options: ClockOptions, centre: float, width: float) -> ClockPlayer:
    """Midpeak with one (centre, width) at every T0 (`midpeak_grid` lists the sweep's)."""
    name = midpeak_name(centre, width)
    return chooser_player(name, midpeak(options, centre=centre, width=width))


def midpeak_file(game_id: str, root: str | os.PathLike | None = None) -> Path:
    """`<checkpoints>/<game>/midpeak.json`: the tuned table the midpeak player loads."""
    return Path(root or checkpoint_root()) / game_id / MIDPEAK_FILE


def load_midpeak_table(
    game_id: str, root: str | os.PathLike | None = None
) -> dict[int, tuple[float, float]] | None:
    """T0 -> (centre, width) tuned for `game_id`, or None when it has no table yet."""
    path = midpeak_file(game_id, root)
    if not path.exists():
        return None
    shapes = json.loads(path.read_text())["shapes"]
    return {int(t0): (float(c), float(w)) for t0, (c, w) in shapes.items()}


def write_midpeak_table(
    game_id: str, shapes: Mapping[int, tuple[float, float]], provenance: dict, root=None
) -> Path:
    """Writes the tuned table (and how it was tuned) to `midpeak_file`."""
    path = midpeak_file(game_id, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {
        **provenance,
        "shapes": {str(t0): [c, w] for t0, (c, w) in sorted(shapes.items())},
    }
    path.write_text(json.dumps(body, indent=1) + "\n")
    return path


def gate_player(path: str | os.PathLike, planner: Planner, planner_params) -> ClockPlayer:
    """The recurrent clock gate at `path` as a player named "gate" (`gate.clock.gate.clock_player`).

    Raises:
        harness.checkpoint.CheckpointError: not a clock gate of this game and planner.
    """
    return clock_player(path, planner, planner_params)


def multiplex(players: list[ClockPlayer], rows: int, name: str = "multiplex") -> ClockPlayer:
    """One player that plays `players[i]` on rows [i * rows, (i + 1) * rows) of its batch (rows
    past the last player's play the last), so one `play_match` plays several conditions on
    the same openings in one batch and its searches group across them (seeds tiled
    `len(players)` times, `rows` per player). Every player's choose runs on every row (cheap
    for the baselines); row r's option and carry are only ever player r // rows's."""
    import jax.numpy as jnp

    def init(batch):
        return tuple(p.init(batch) for p in players)

    def choose(carry, states, out, keys):
        picks = [p.choose(c, states, out, keys) for p, c in zip(players, carry, strict=True)]
        which = jnp.minimum(jnp.arange(states.frame.shape[0]) // rows, len(players) - 1)
        options = jnp.stack([o for _, o in picks])  # [P, B]
        return tuple(c for c, _ in picks), jnp.take_along_axis(options, which[None], 0)[0]

    return ClockPlayer(name=name, init=init, choose=choose)
