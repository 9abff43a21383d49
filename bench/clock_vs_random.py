"""Clock games against a uniformly random player: where the shipped planner loses, and why.

Usage: python -m bench.clock_vs_random [--game speed-hex-v0] [--split eval] [--games 300]

`--games` games (each of the split's first `--games / 2` openings with both colours, random
openings as in `rtplan cross-eval`, unlimited clock) of two players (four with `--untrained`)
against random: the policy-only player (masked argmax of the raw policy, no search) and the
largest option with the shipped search settings.
Prints per player the score (mean +- SE over all games), the score with each colour, the mean
game length in plies, and the number of lost games with their median length (and range). A
player that beats random only after a whole board of moves, and whose raw policy loses often,
is limited by its network's strength (training compute), not by the search.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools

import jax
import numpy as np

from rtplan import games
from rtplan.harness.checkpoint import PLANNER_FILE, planner_file
from rtplan.harness.stats import standard_error
from rtplan.planner.calibrate import with_sims
from rtplan.planner.episodes import seeds_of
from rtplan.planner.matches import EVAL_OPENING_PLIES, RANDOM, REFLEX, option_player, play_match
from rtplan.planner.options import Planner
from rtplan.planner.store import load_planner


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", default="speed-hex-v0")
    parser.add_argument(
        "--checkpoint", default=None, help=f"default checkpoints/<game>/{PLANNER_FILE}"
    )
    parser.add_argument("--split", choices=["eval", "tuning"], default="eval", help="seed range")
    parser.add_argument("--games", type=int, default=300, help="games (even)")
    parser.add_argument(
        "--untrained",
        action="store_true",
        help="also play both players with freshly initialised weights (what search alone gives)",
    )
    parser.add_argument(
        "--max-considered",
        type=int,
        default=None,
        help="override the search's root width (Gumbel MuZero's considered actions)",
    )
    args = parser.parse_args(argv)

    checkpoint = str(planner_file(args.game, args.checkpoint, flag="--checkpoint"))
    base, params, meta = load_planner(args.game, checkpoint)
    largest = max(zip(base.budgets, base.simulations, strict=True), key=lambda b: b[1])
    k, sims = largest
    cfg = with_sims(base, k, sims)
    if args.max_considered:
        cfg = dataclasses.replace(cfg, max_considered_actions=args.max_considered)
    planner = Planner(cfg)
    if planner.kind is not games.Kind.CLOCK:
        parser.error(f"{args.game} is not a clock game")
    players = {"policy-only": REFLEX, f"option {k} ({sims} sims)": option_player(planner, k)}
    print(
        f"{args.game}, checkpoint {meta['checkpoint']}, root width {cfg.max_considered_actions}, "
        f"vs random, {args.games} games on {args.split} seeds, "
        f"openings of 0..{EVAL_OPENING_PLIES} random plies\n"
    )
    print(
        "| player | score | moving first | moving second | mean plies "
        "| lost games: median plies (range) |"
    )
    print("|---|---|---|---|---|---|")
    nets = {"": params}
    if args.untrained:
        nets["untrained "] = planner.init_params(jax.random.PRNGKey(0))
    seeds = seeds_of(args.split, args.games // 2)
    for (prefix, net), (name, policy) in itertools.product(nets.items(), players.items()):
        name = prefix + name
        res = play_match(planner, net, policy, RANDOM, seeds, opening_plies=EVAL_OPENING_PLIES)
        score, plies = res.returns, res.frames  # [games]: A first, then A second
        half = len(seeds)
        lost = plies[score < 0.5]
        lost_text = (
            f"{lost.size}: {np.median(lost):.0f} ({lost.min()}-{lost.max()})" if lost.size else "0"
        )
        print(
            f"| {name} | {score.mean():.3f} +- {standard_error(score):.3f} | "
            f"{score[:half].mean():.3f} | {score[half:].mean():.3f} | {plies.mean():.1f} | "
            f"{lost_text} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
