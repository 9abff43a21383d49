"""Clock-game evaluation handlers: `rtplan eval` on a clock game and `annotate-games`."""

from __future__ import annotations

import argparse

from rtplan.commands._errors import FAILED, CommandError
from rtplan.jax_setup import check_map_count


def _clock_eval(args: argparse.Namespace) -> int:
    from rtplan.gate.evaluation import clock as clock_eval
    from rtplan.gate.evaluation.clock_report import clocks_folder
    from rtplan.harness.checkpoint import CheckpointError

    if args.ablations:
        raise CommandError("clock games have no input ablations (--ablations)")
    if args.chunk is not None:
        raise CommandError("--chunk is for committed games (clock games resume per cell)")
    if args.tune_midpeak and args.tune_fixed:
        raise CommandError("--tune-midpeak and --tune-fixed are two runs: give one")
    if args.clocks is not None and args.t0 is not None:
        raise CommandError("--t0 picks among the pre-registered clocks, --clocks plays others")
    clocks = None if args.clocks is None else tuple(args.clocks or clock_eval.OFF_GRID_CLOCKS)
    if clocks is not None and min(clocks) < 1:
        raise CommandError(f"--clocks must be positive ticks, got {list(clocks)}")
    t0s = clocks or tuple(args.t0 or clock_eval.T0S)
    if args.tune_midpeak or args.tune_fixed:
        split = "tuning" if "--split" not in args.argv else args.split
        tune = clock_eval.tune_midpeak if args.tune_midpeak else clock_eval.tune_fixed
        tune(
            args.game,
            split=split,
            games_per_cell=args.episodes or (12 if args.tune_midpeak else 100),
            t0s=t0s,
            opponents=args.opponents,
            planner_file=args.planner,
            out=args.out,
        )
        return 0
    try:
        clock_eval.run_clock_eval(
            args.game,
            split=args.split,
            games_per_cell=args.episodes or 100,
            t0s=t0s,
            players=args.conditions,
            opponents=args.opponents,
            planner_file=args.planner,
            gate_file=args.gate,
            gate_name=args.gate_name,
            out=args.out,
            force=args.force,
            command=" ".join(args.argv),
            folder=None if clocks is None else clocks_folder(args.split),
        )
    except CheckpointError as e:  # name the flag (a ValueError prints as it is: run_command)
        raise CommandError(f"--gate {args.gate}: {e}") from e
    return 0


def _annotate_games(args: argparse.Namespace) -> int:
    check_map_count()
    from rtplan import games

    if games.kind_of(args.game) is not games.Kind.CLOCK:
        raise CommandError(f"{args.game} is not a clock game: annotate-games is for clock games")
    if args.games < 1:
        raise CommandError("--games must be >= 1")
    from rtplan.gate.evaluation.annotate import CellMismatch
    from rtplan.harness import checkpoint as ckpt
    from rtplan.server.annotated import write_annotated_games

    planner_file = str(ckpt.planner_file(args.game, args.planner))
    gate_file = str(ckpt.gate_file(args.game, args.gate))
    try:
        write_annotated_games(
            args.game,
            root=args.results,
            planner_file=planner_file,
            gate_file=gate_file,
            count=args.games,
            split=args.split,
            t0s=args.t0,
            command=" ".join(args.argv),
        )
    except (CellMismatch, FileNotFoundError) as e:
        raise CommandError(str(e), FAILED) from e
    return 0


#: `counterfactual`'s default continuation for the clock games: the README's single best fixed
#: budget (k32 in both); the per-T0 best is the better bar where it is known (`--continuation`).
CLOCK_CONTINUATION = 32


def _clock_counterfactual(args: argparse.Namespace) -> int:
    import json

    check_map_count()
    if args.gumbel_scale is not None and args.gumbel_scale < 0:
        raise CommandError("--gumbel-scale must be >= 0")
    committed_only = [f for f in ("--horizon", "--max-frame") if f in args.argv]
    committed_only += [
        f for f, v in (("--committed", args.committed), ("--tree-k", args.tree_k)) if v is not None
    ]
    if committed_only:
        raise CommandError(
            f"{', '.join(committed_only)}: for committed games only ({args.game} is a clock "
            "game: its moves commit no frames, its branches play to the end, --max-ply draws "
            "the position)"
        )
    if args.t0 is None or args.t0 < 1:
        raise CommandError(f"{args.game} is a clock game: give --t0 (positive ticks)")
    if args.worlds < 2:
        raise CommandError("--worlds must be >= 2 (the noise is measured across worlds)")
    for name in ("states", "chunk", "max_ply", "max_plies", "bins"):
        if getattr(args, name) < 1:
            raise CommandError(f"--{name.replace('_', '-')} must be >= 1")
    from rtplan.gate.counterfactual.clock import run_clock_counterfactual

    given = {f: f in args.argv for f in ("--states", "--worlds")}
    summary = run_clock_counterfactual(
        args.game,
        initial_time=args.t0,
        continuation=args.continuation or CLOCK_CONTINUATION,
        states=args.states if given["--states"] else 32,
        worlds=args.worlds if given["--worlds"] else 4,
        max_ply=args.max_ply,
        max_plies=args.max_plies,
        chunk=args.chunk,
        seed=args.seed,
        n_bins=args.bins,
        gumbel_scale=args.gumbel_scale,
        planner_file=args.planner,
        out=args.out,
        command=" ".join(args.argv),
    )
    print(json.dumps(summary, indent=2))
    return 0
