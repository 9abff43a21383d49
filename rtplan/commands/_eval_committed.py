"""Committed-game evaluation handlers: `rtplan eval` (clock games handed on), `counterfactual`."""

from __future__ import annotations

import argparse

from rtplan.commands._errors import FAILED, CommandError
from rtplan.commands._eval_clock import _clock_counterfactual, _clock_eval
from rtplan.commands._flags import check_budgets, check_rules
from rtplan.gate.committed.config import GateTrainConfig
from rtplan.jax_setup import check_map_count

#: `eval`'s simulated-deployment flags: the gate training's own (one definition of each).
_LATENCY_FLAGS = ("latency", "latency_fps", "latency_overhead_ms", "latency_fallback")


def _clock_flags(args: argparse.Namespace) -> bool:
    """Whether a clock-game-only flag of `eval` was given."""
    given = (args.t0, args.clocks, args.opponents)
    return bool(args.tune_midpeak or args.tune_fixed or any(f is not None for f in given))


def _eval(args: argparse.Namespace) -> int:
    check_map_count()
    from rtplan import games

    latency = {f: getattr(args, f) for f in _LATENCY_FLAGS if getattr(args, f) is not None}
    clock = games.kind_of(args.game) is games.Kind.CLOCK
    check_rules(args, clock=clock)
    check_budgets(args, clock=clock)
    if args.via_services:
        if latency:
            raise CommandError("--via-services plays the simulated clock: no --latency")
        if args.budgets is not None:
            raise CommandError(
                "--via-services plays the gate over the budgets its file records (the planner "
                "checkpoint's, or train-gate --budgets'): drop --budgets"
            )
        if clock and _clock_flags(args):
            raise CommandError(
                "--via-services plays the clock gate against the reflex at the game's own "
                "clocks: drop --t0, --clocks, --opponents, --tune-midpeak and --tune-fixed"
            )
        if args.episodes is None:
            args.episodes = 100
        return _via_services(args)
    if clock:
        if latency:
            raise CommandError("--latency and its flags are for committed-action games")
        return _clock_eval(args)
    if _clock_flags(args):
        raise CommandError(
            "--t0, --clocks, --opponents, --tune-midpeak and --tune-fixed are for clock games"
        )
    if args.chunk is not None and args.chunk < 1:
        raise CommandError(f"--chunk must be >= 1 seed, got {args.chunk}")
    if args.episodes is None:
        args.episodes = 100
    if args.episodes < 2:
        raise CommandError("--episodes must be >= 2 (a standard error needs two)")
    try:  # the flags' checks are the training config's
        GateTrainConfig(game_id=args.game, **latency)
    except ValueError as e:
        raise CommandError(str(e)) from e
    from rtplan.gate.evaluation.committed import run_conditions

    run_conditions(
        args.game,
        split=args.split,
        episodes=args.episodes,
        conditions=args.conditions,
        planner_file=args.planner,
        gate_file=args.gate,
        out=args.out,
        force=args.force,
        ablations=args.ablations,
        command=" ".join(args.argv),
        chunk=args.chunk,
        gate_name=args.gate_name,
        committed=args.committed,
        tree_k=args.tree_k,
        budgets=args.budgets,
        **latency,
    )
    return 0


def _counterfactual(args: argparse.Namespace) -> int:
    check_map_count()
    import json

    from rtplan import games

    clock = games.kind_of(args.game) is games.Kind.CLOCK
    check_budgets(args, clock=clock)
    if clock:
        return _clock_counterfactual(args)
    clock_only = [
        f
        for f in ("--t0", "--max-ply", "--max-plies", "--bins", "--gumbel-scale")
        if f in args.argv
    ]
    if clock_only:
        raise CommandError(f"{', '.join(clock_only)}: for clock games only")
    check_rules(args, clock=False)
    if args.continuation is None:
        raise CommandError("--continuation is required for committed games (the best fixed k)")
    if args.worlds < 2:
        raise CommandError("--worlds must be >= 2 (the noise is measured across worlds)")
    for name in ("states", "chunk", "max_frame"):
        if getattr(args, name) < 1:
            raise CommandError(f"--{name.replace('_', '-')} must be >= 1")
    from rtplan.gate.counterfactual.values import run_counterfactual

    summary = run_counterfactual(
        args.game,
        states=args.states,
        continuation=args.continuation,
        horizon=args.horizon or None,
        worlds=args.worlds,
        max_frame=args.max_frame,
        chunk=args.chunk,
        seed=args.seed,
        committed=args.committed,
        tree_k=args.tree_k,
        budgets=args.budgets,
        planner_file=args.planner,
        out=args.out,
        command=" ".join(args.argv),
    )
    print(json.dumps(summary, indent=2))
    return 0


def _via_services(args: argparse.Namespace) -> int:
    if args.conditions is not None or args.ablations:
        raise CommandError("--via-services plays the gate only: drop --conditions and --ablations")
    from rtplan import via_services
    from rtplan.harness.checkpoint import CheckpointError

    try:
        return via_services.run(
            args.game,
            episodes=args.episodes,
            split=args.split,
            planner_file=args.planner,
            gate_file=args.gate,
            rules={"committed": args.committed, "tree_k": args.tree_k},
        )
    except CheckpointError:
        raise
    except RuntimeError as e:  # a service did not start or a session failed: its log's tail
        raise CommandError(f"--via-services: {e}", FAILED) from e
