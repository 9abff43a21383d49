"""The `gtp` command: Speed Go's planner as a GTP v2 engine on stdin/stdout."""

from __future__ import annotations

import argparse

from rtplan.commands._errors import CommandError

#: The one game GTP plays.
GO = "speed-go-v0"


def register(sub: argparse._SubParsersAction) -> None:
    """Adds `gtp` to the `rtplan` subcommands."""
    gtp = sub.add_parser(
        "gtp",
        help="Speed Go's planner as a GTP v2 engine on stdin/stdout (Sabaki, GoGui, GNU Go)",
        description="Answers GTP v2 commands on stdin/stdout; logs go to stderr. See docs/gtp.md.",
    )
    gtp.add_argument("--game", default=GO, help=f"must be {GO} (the default)")
    gtp.add_argument("--planner", default=None, help=f"default: <checkpoints>/{GO}/planner.msgpack")
    gtp.add_argument("--seed", type=int, default=0, help="PRNG seed of the search (default: 0)")
    gtp.add_argument(
        "--resign-below",
        type=float,
        default=None,
        help="genmove resigns when the search value is below this (default: never resigns)",
    )
    gtp.add_argument(
        "--budget",
        type=int,
        default=None,
        help="play this option (one of the planner's budgets k) on every move, whatever the "
        "time settings (default: the time manager picks per move)",
    )
    gtp.add_argument(
        "--time-manager",
        choices=("proportional", "gate"),
        default=None,
        help="who spends the GTP clock: 'proportional' (the remaining time over the moves left) "
        "or 'gate' (the learned clock gate, capped by the proportional allowance). Default: "
        "'gate' with --clock-gate, else 'proportional' (the default until a match measures "
        "the gate better; docs/gtp.md)",
    )
    gtp.add_argument(
        "--clock-gate",
        default=None,
        help=f"the clock gate of --time-manager gate (default: the {GO} gate.msgpack beside "
        "the planner)",
    )
    gtp.add_argument(
        "--max-simulations",
        type=int,
        default=None,
        help="the anytime ladder's largest search: budgets of 2x, 4x, ... the planner's largest "
        "search up to this, compiled in the background once a clock is set, that a long clock "
        "spends (default: 16x the planner's largest; 0: no ladder)",
    )
    gtp.set_defaults(handler=_gtp)


def _gtp(args: argparse.Namespace) -> int:
    from rtplan.harness.checkpoint import planner_file

    if args.game != GO:
        raise CommandError(f"GTP plays Go: --game must be {GO}, not {args.game!r}")
    planner = planner_file(GO, args.planner)
    manager = args.time_manager or ("gate" if args.clock_gate else "proportional")
    if args.clock_gate and manager != "gate":
        raise CommandError("--clock-gate is the gate's: it needs --time-manager gate")
    if args.budget is not None and manager == "gate":
        raise CommandError("--budget plays one option on every move: it takes no time manager")
    from rtplan.gtp import run

    return run(
        planner,
        seed=args.seed,
        resign_below=args.resign_below,
        budget=args.budget,
        time_manager=manager,
        clock_gate=args.clock_gate,
        max_simulations=args.max_simulations,
    )
