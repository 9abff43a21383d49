"""Evaluation commands: `calibrate`, `cross-eval`, `eval` (and `--via-services`), `report`,
`counterfactual`, `annotate-games` (handlers by kind of game: `_eval_committed`, `_eval_clock`)."""

from __future__ import annotations

import argparse

from rtplan.commands._eval_clock import _annotate_games
from rtplan.commands._eval_committed import _LATENCY_FLAGS, _counterfactual, _eval
from rtplan.commands._flags import add_budgets, add_out, add_split, out_dir
from rtplan.gate.committed.config import COMMITMENTS, GateTrainConfig
from rtplan.harness.config import add_flags
from rtplan.jax_setup import check_map_count

#: `calibrate`'s default simulation counts, by the game's kind (`games.Kind`'s values: this
#: module imports no JAX).
_DEFAULT_SWEEP = {"committed": [8, 16, 32, 64, 128], "clock": [2, 8, 16, 32, 64, 96, 128]}
_PLANNER_HELP = "planner checkpoint (default: <checkpoints>/<game>/planner.msgpack)"
#: `eval --committed`'s choices: `planner.options.COMMITMENTS` (this module imports no JAX).
COMMITTED_CHOICES = COMMITMENTS


def _add_rules(parser: argparse.ArgumentParser, *, committed: str, tree_k: str) -> None:
    """`--committed` and `--tree-k` (the planner's rules for the committed games), each help
    ended by what the command does with them."""
    parser.add_argument(
        "--committed",
        choices=COMMITTED_CHOICES,
        default=None,
        help="committed games: what an option's k-1 frames before its planned action play: "
        "reflex (the raw policy's argmax, the paper) or plan (the previous option's plan where "
        "it reaches, then the reflex); default: the planner checkpoint's (reflex for every "
        f"shipped one). {committed}",
    )
    parser.add_argument(
        "--tree-k",
        type=int,
        default=None,
        metavar="M",
        help="committed games: the frames of every edge below the search's root (default: the "
        "planner checkpoint's, 0 for every shipped one: the option's own k). 1 searches every "
        "frame below the root, which is what gives --committed plan a plan of its own (with 0 "
        "its committed frames are the tree's reflex frames: at a fixed k, exactly the reflex). "
        f"{tree_k}",
    )


def register(sub: argparse._SubParsersAction) -> None:
    """Adds `calibrate`, `cross-eval`, `eval`, `counterfactual`, `report` and `annotate-games`
    to the `rtplan` subcommands."""
    cal = sub.add_parser(
        "calibrate",
        help="planning quality and batch-1 latency vs simulation count (CSV + PNG)",
    )
    cal.add_argument("--game", required=True, help="registered game id")
    cal.add_argument("--checkpoint", default=None, help=_PLANNER_HELP)
    cal.add_argument(
        "--sims",
        type=int,
        nargs="*",
        default=None,
        help="simulation counts (default: 8..128 committed, 2..128 clock)",
    )
    cal.add_argument("--episodes", type=int, default=32, help="episodes per count")
    cal.add_argument(
        "--max-decisions", type=int, default=500, help="cap on decisions per committed episode"
    )
    cal.add_argument("--calls", type=int, default=50, help="timed batch-1 calls per count")
    add_split(cal, "tuning")
    add_out(cal, "calibrate")
    cal.set_defaults(handler=_calibrate)

    cross = sub.add_parser(
        "cross-eval",
        help="evaluate checkpoints at every eval-k and simulation count (paper appendix G)",
    )
    cross.add_argument("--game", required=True, help="registered game id")
    cross.add_argument("--checkpoints", nargs="+", required=True, help="planner checkpoints")
    cross.add_argument(
        "--eval-k",
        type=int,
        nargs="*",
        default=None,
        help="budgets to evaluate (default: the planner's)",
    )
    cross.add_argument(
        "--sims-per-frame",
        type=int,
        nargs="*",
        default=[32],
        help="committed: simulations per frame; clock: simulations per move",
    )
    cross.add_argument(
        "--episodes", type=int, default=32, help="episodes (committed) or games (clock, even)"
    )
    cross.add_argument(
        "--opponent",
        choices=["reflex", "random"],
        default="reflex",
        help="clock games: the opponent (policy-only player or random)",
    )
    cross.add_argument(
        "--max-frames",
        "--max-decisions",  # the older name; the same cap at k=1
        dest="max_frames",
        type=int,
        default=None,
        help="committed games: a cap on frames per episode, the same for every eval-k "
        "(ceil(F / k) options; default: each episode's end, as `rtplan eval` plays)",
    )
    add_split(cross, "eval")
    add_out(cross, "cross-eval")
    cross.set_defaults(handler=_cross_eval)

    ev = sub.add_parser(
        "eval",
        help="the gate and every baseline on the same seeds (paired), one JSON per condition",
        description="Plays each condition (gate, its input ablations, always-k, random k, "
        "policy-only) on the same seeds to each episode's end and writes "
        "<out>/<game>/<split>/<condition>.json; a condition already there for the same seeds, "
        "planner and gate is kept (an interrupted evaluation resumes). `rtplan report` "
        "summarises them.",
    )
    ev.add_argument("--game", required=True, help="registered game id (committed or clock)")
    add_split(ev, "eval")
    ev.add_argument(
        "--episodes",
        type=int,
        default=None,
        help="episodes (seeds) per condition (default 100); clock games: games per (player, "
        "opponent, T0), half as many openings with both colours (default 100; --tune-midpeak 12; "
        "--tune-fixed 100)",
    )
    ev.add_argument(
        "--conditions",
        nargs="*",
        default=None,
        help="conditions to play (default: gate when a gate exists, k1..kK, random, policy-only)",
    )
    ev.add_argument("--ablations", action="store_true", help="also the gate's input ablations")
    ev.add_argument("--planner", default=None, help=_PLANNER_HELP)
    ev.add_argument(
        "--gate",
        default=None,
        help="default: gate.msgpack beside the planner; clock games: a clock gate checkpoint, "
        "played as 'gate' when rtplan.gate.clock.gate provides clock_player() (else skipped)",
    )
    ev.add_argument(
        "--gate-name",
        default="gate",
        help="the gate's condition (player) name, in every game: gate, or a second gate's "
        "gate-<name> (lower case, digits, '.', '_', '-'; not an ablation's), whose results sit "
        "beside the first's",
    )
    clock = ev.add_argument_group("clock games (speed-hex-v0, speed-go-v0)")
    clock.add_argument(
        "--t0",
        type=int,
        nargs="*",
        default=None,
        help="clocks in ticks (default 300 1200 2300 3500 4100)",
    )
    clock.add_argument(
        "--clocks",
        type=int,
        nargs="*",
        default=None,
        help="clocks off the pre-registered five, in ticks (bare: 450 1500 2600 3800 5200 "
        "7000, between the training clocks and past them); cells and tables go to "
        "results/<game>/clock-eval/<split>-clocks/ and <split>-clocks-*.csv, never into the "
        "pre-registered ones; with --tune-fixed / --tune-midpeak: tune at these clocks",
    )
    clock.add_argument(
        "--opponents", nargs="*", default=None, help="the pool (default policy-only, k<k>, random)"
    )
    clock.add_argument(
        "--tune-midpeak",
        action="store_true",
        help="sweep midpeak's centre and width per T0 against the pool (default split tuning) "
        "and write the tuned table <checkpoints>/<game>/midpeak.json (resumable: "
        "results/<game>/clock-eval/midpeak-sweep.csv)",
    )
    clock.add_argument(
        "--tune-fixed",
        action="store_true",
        help="the clock-aware bar: every fixed budget against the pool per T0 (default split "
        "tuning, never eval), the best per T0 written to results/<game>/clock-eval/"
        "fixed-per-t0.json, which `rtplan report` plays as k-per-t0 from the budgets' own "
        "cells (resumable: results/<game>/clock-eval/fixed-sweep.csv)",
    )
    sim = ev.add_argument_group(
        "simulated deployment (committed games): misses drawn from measured latency",
        "every condition's options miss with their budget's probability at the given FPS, the "
        "same draws per seed and decision in every condition; files go to "
        "<out>/<game>/<split>-latency-<F>fps/ (docs/gate.md, Latency-aware gate)",
    )
    add_flags(sim, GateTrainConfig, only=_LATENCY_FLAGS)
    _add_rules(
        ev,
        committed="--committed plan writes to <out>/<game>/<split>-plan/. A gate plays under "
        "the rules it was trained under only (train-gate --committed --tree-k; its "
        "gate.msgpack.json): one under others is refused",
        tree_k="Writes to <out>/<game>/<split>/[plan-]treeM/",
    )
    add_budgets(
        ev,
        "(e.g. 1 2 3 4 6 8, at most 9), so --conditions k6 k8 play (default: a played gate's, "
        "else the checkpoint's). Its own k1..k4 play the same games with or without the flag, "
        "so their files are kept; a gate and its ablations choose among the budgets its file "
        "records (train-gate --budgets), random among the checkpoint's, and each is refused "
        "under others. Files go to the folder the rules give",
    )
    ev.add_argument("--out", default="results", help="results root (default: results)")
    ev.add_argument("--force", action="store_true", help="replay conditions already written")
    ev.add_argument(
        "--chunk",
        type=int,
        default=None,
        help="committed games: play this many seeds at a time and save the finished ones to "
        "<out>/<game>/<split>/partial/<condition>.json after each chunk, so a killed long "
        "evaluation (the 400-seed holdout) resumes from its last chunk (default: all at once)",
    )
    ev.add_argument(
        "--via-services",
        action="store_true",
        help="play the gate through the real planner service and env server (simulated clock) "
        "on the split's first --episodes seeds and check that returns, frame actions and "
        "k-sequences equal the in-process play exactly (exit 1 on a mismatch); writes nothing. "
        "Clock games: the clock gate (player 0) against the reflex from each seed's start at "
        "the game's own clocks, one game per seed: moves, charged ticks, budgets, both clocks "
        "after every ply and the result",
    )
    ev.set_defaults(handler=_eval)

    cf = sub.add_parser(
        "counterfactual",
        help="every budget from copies of the same decision states (paired), and in what share "
        "of states any budget beats a fixed one; clock games (--t0): the room per move",
        description="Committed games: samples decision states along always-K play of "
        "train-range games, plays every budget from copies of each (same search keys; --worlds "
        "futures of chance events re-drawn, shared by every budget), continues each under "
        "always-K for --horizon frames, and reports per state whether a budget beats K by more "
        "than 2 SE over the worlds. Clock games (--t0 required): positions along always-K play "
        "of both sides at clock T0, at a ply drawn from [0, --max-ply); every option of the "
        "mover (the reflex k0 and each budget, charged to its clock at the same remaining "
        "clocks) branched in --worlds search-key streams shared by every option, each played on "
        "with always-K for both sides to the game's end; the value is the mover's result (1 "
        "win, 0 loss, a fallen flag loses). Reports the cross-fitted oracle room over K and "
        "where it lies by ply, clocks and the planner's uncertainty (by-feature.csv). "
        "Writes <out>/<game>/counterfactual/<tag>/ (chunks: resumable; summary.json).",
    )
    cf.add_argument("--game", required=True, help="a game id (a clock game needs --t0)")
    cf.add_argument(
        "--continuation",
        type=int,
        default=None,
        help="the fixed budget K every branch continues with (both sides in clock games): the "
        "best fixed k; required for committed games, default k32 for the clock games (the "
        "README's single best fixed budget)",
    )
    cf.add_argument(
        "--states", type=int, default=64, help="decision states (one per game; clock games: 32)"
    )
    cf.add_argument(
        "--worlds",
        type=int,
        default=8,
        help="re-drawn futures per state, >= 2 (clock games: search-key streams, default 4)",
    )
    cf.add_argument(
        "--horizon",
        type=int,
        default=32,
        help="committed games: frames scored per branch (0: to the game's end)",
    )
    cf.add_argument(
        "--max-frame",
        type=int,
        default=500,
        help="committed games: states are drawn at a frame in [0, this)",
    )
    cf.add_argument(
        "--t0",
        type=int,
        default=None,
        help="clock games: T0, both players' clocks in ticks at the start (e.g. 300)",
    )
    cf.add_argument(
        "--max-ply",
        type=int,
        default=40,
        help="clock games: each game's position is drawn at a ply in [0, this) after its "
        "opening (games over by then are dropped)",
    )
    cf.add_argument(
        "--max-plies",
        type=int,
        default=400,
        help="clock games: plies a branch plays on before it counts as unfinished (0.5)",
    )
    cf.add_argument(
        "--gumbel-scale",
        type=float,
        default=None,
        help="clock games: the planner's Gumbel noise in every search (default: its own); a "
        "planner with none (0) searches deterministically, so its worlds are one game and show "
        "no noise: give e.g. 1.0 to measure it",
    )
    cf.add_argument(
        "--bins", type=int, default=4, help="clock games: quantile bins per feature in the CSV"
    )
    _add_rules(
        cf,
        committed="Every branch and its continuation play it; plan needs --tree-k >= 1 (under "
        "tree_k 0 a plan is the reflex at the continuation's fixed k)",
        tree_k="Any but the shipped reflex and 0 write to <out>/<game>/counterfactual/"
        "[plan-]treeM/<tag>/",
    )
    add_budgets(
        cf,
        "(e.g. 1 2 3 4 5 6 7 8): every state branches each, and --continuation may be one; "
        "writes below the rules' folder to budgets-1-2-...-8/<tag>/ (default: the checkpoint's)",
    )
    cf.add_argument("--chunk", type=int, default=8, help="states per batch (and per file)")
    cf.add_argument("--seed", type=int, default=0, help="first train-range game seed")
    cf.add_argument("--planner", default=None, help=_PLANNER_HELP)
    cf.add_argument("--out", default="results", help="results root (default: results)")
    cf.set_defaults(handler=_counterfactual)

    rep = sub.add_parser(
        "report",
        help="results table (CSV/JSON + the README's table) and figures from rtplan eval",
    )
    rep.add_argument("--results", default="results", help="results root (default: results)")
    rep.add_argument(
        "--readme", default="README.md", help="README whose results table to regenerate"
    )
    rep.add_argument("--no-figures", action="store_true", help="tables only")
    rep.set_defaults(handler=_report)

    ann = sub.add_parser(
        "annotate-games",
        help="clock games: re-play the evaluation games where the gate spent big, as annotated "
        "replays for the replay page",
        description="Picks, from the gate's cells of the clock evaluation, the games whose "
        "most expensive gate move was the biggest (the most simulations, then the largest share "
        "of the clock left), by their options alone (not their scores), re-plays each in-process "
        "on the evaluation's path and checks it equals its cell (score, plies, options, game "
        "id), and writes it as a replay with per-move annotations (budget, the gate's "
        "probabilities, both clocks, the planner's value, a note on the big spends) under "
        "<results>/<game>/clock-eval/games/, with a README.md. Not a step of `rtplan report`: "
        "it needs the checkpoints and takes minutes, and it reads no scores.",
    )
    ann.add_argument("--game", required=True, help="a clock game id")
    ann.add_argument("--games", type=int, default=3, help="games to pick (default 3)")
    ann.add_argument(
        "--t0", type=int, nargs="*", default=None, help="only the cells at these clocks (ticks)"
    )
    add_split(ann, "eval")
    ann.add_argument("--planner", default=None, help=_PLANNER_HELP)
    ann.add_argument(
        "--gate", default=None, help="the clock gate (default: <checkpoints>/<game>/gate.msgpack)"
    )
    ann.add_argument("--results", default="results", help="results root (default: results)")
    ann.set_defaults(handler=_annotate_games)


def _calibrate(args: argparse.Namespace) -> int:
    check_map_count()
    from rtplan import games
    from rtplan.harness.checkpoint import planner_file
    from rtplan.planner.calibrate import calibrate

    kind = games.kind_of(args.game)
    checkpoint = str(planner_file(args.game, args.checkpoint, flag="--checkpoint"))
    sims = args.sims or _DEFAULT_SWEEP[kind]
    calibrate(
        args.game,
        checkpoint=checkpoint,
        sims=sims,
        episodes=args.episodes,
        max_decisions=args.max_decisions,
        calls=args.calls,
        out_dir=out_dir(args, "calibrate"),
        split=args.split,
    )
    return 0


def _cross_eval(args: argparse.Namespace) -> int:
    check_map_count()
    from rtplan import games
    from rtplan.planner.calibrate import cross_eval

    games.game_class(args.game)
    cross_eval(
        args.game,
        checkpoints=args.checkpoints,
        eval_ks=args.eval_k,
        sims_per_frame=args.sims_per_frame,
        episodes=args.episodes,
        max_frames=args.max_frames,
        out_dir=out_dir(args, "cross-eval"),
        split=args.split,
        opponent=args.opponent,
    )
    return 0


def _report(args: argparse.Namespace) -> int:
    from rtplan.gate.evaluation.report import report

    out = report(args.results, readme=args.readme, figures=not args.no_figures)
    print(out["table"])
    for path in out["figures"]:
        print(f"wrote {path}")
    if out["rows"]:
        print(f"wrote {args.results}/summary.csv, {args.results}/summary.json")
    if out["readme_updated"]:
        print(f"updated the results table in {args.readme}")
    return 0
