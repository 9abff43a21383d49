"""The `rtplan` command line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

# Neither imports JAX: `--devices` must set XLA's flags before jax loads.
from gate.train_config import GateTrainConfig
from harness.config import add_flags
from planner.train_config import TrainConfig

#: `TrainConfig` fields that are not `train-planner` flags (`--game` sets the game).
_NOT_FLAGS = ("game_id", "game_params")


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rtplan", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser(
        "demo",
        help="the live demo: planner service + env server + a game played by the planner agent",
    )
    demo.add_argument("--game", default="snake-rt-v0", help="game id (default: snake-rt-v0)")
    demo.add_argument("--k", type=int, default=2, help="the planner agent's forced budget")
    demo.add_argument("--fps", type=float, default=9.0, help="frames per second (default: 9)")
    demo.add_argument("--frames", type=int, default=300, help="frames to watch (0: to the end)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--every", type=int, default=10, help="print every n-th frame")
    demo.add_argument(
        "--no-example-agent",
        action="store_true",
        help="do not run examples/random_agent.py against the gRPC Env API beside it",
    )
    play = sub.add_parser("play", help="play every game headless and print a line per frame")
    play.add_argument("--games", nargs="*", default=None, help="game ids (default: all)")
    play.add_argument("--frames", type=int, default=30, help="frames per game (default: 30)")
    play.add_argument("--seed", type=int, default=0, help="PRNG seed (default: 0)")

    sub.add_parser("games", help="list the registered games and their specs")

    train = sub.add_parser(
        "train-planner",
        help="train a game's planner network (expert iteration / self-play)",
        description="Trains the AlphaZero planner of a game. Flags left out take the "
        "checkpoint's values with --resume, else planner.train_config.TrainConfig's defaults.",
    )
    train.add_argument("--game", required=True, help="registered game id, e.g. snake-rt-v0")
    train.add_argument("--resume", action="store_true", help="continue <out>/checkpoint.msgpack")
    train.add_argument("--out", default=None, help="output folder (default runs/planner/<game>)")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_flags(train, TrainConfig, exclude=_NOT_FLAGS)
    gate = sub.add_parser(
        "train-gate",
        help="train a game's gate (PPO over the frozen planner's budgeted options)",
        description="Trains the gate that picks the budget k of each option. Flags left out take "
        "the checkpoint's values with --resume, else gate.train_config.GateTrainConfig's "
        "defaults.",
    )
    gate.add_argument("--game", required=True, help="registered game id, e.g. snake-rt-v0")
    gate.add_argument("--resume", action="store_true", help="continue <out>/checkpoint.msgpack")
    gate.add_argument("--out", default=None, help="output folder (default runs/gate/<game>)")
    gate.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_flags(gate, GateTrainConfig, exclude=("game_id",))
    cal = sub.add_parser(
        "calibrate",
        help="planning quality and batch-1 latency vs simulation count (CSV + PNG)",
    )
    cal.add_argument("--game", required=True, help="registered game id")
    cal.add_argument(
        "--checkpoint",
        default=None,
        help="planner checkpoint (default checkpoints/<game>/planner.msgpack)",
    )
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
    cal.add_argument("--seed", type=int, default=0)
    cal.add_argument("--out", default=None, help="output folder (default runs/calibrate/<game>)")

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
    cross.add_argument("--episodes", type=int, default=32)
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
        default=500,
        help="committed games: frames per episode, the same for every eval-k (ceil(F / k) "
        "options; default: 500)",
    )
    cross.add_argument("--seed", type=int, default=0)
    cross.add_argument("--out", default=None, help="output folder (default runs/cross-eval/<game>)")
    ship = sub.add_parser(
        "ship-planner", help="copy a run's planner params, provenance and curve to checkpoints/"
    )
    ship.add_argument("--run", required=True, help="training run folder (has planner.msgpack)")
    ship.add_argument("--dest", default="checkpoints", help="destination root")
    ship.add_argument(
        "--variant",
        default=None,
        help="ship to <dest>/<game>/<variant>/ (e.g. train-k2) instead of replacing the base",
    )
    for name, help_text in _SERVICES.items():
        # Their own parsers handle the flags (`rtplan NAME --help`).
        svc = sub.add_parser(name, help=help_text, add_help=False)
        svc.add_argument("args", nargs=argparse.REMAINDER)
    return parser


#: Service subcommands -> (help); each forwards its arguments to `<module>.main(argv)`.
_SERVICES = {
    "planner-service": "run the gRPC Planner service (gated MCTS as a service)",
    "env-server": "run the environment server (REST, websockets, gRPC Env API)",
}
_SERVICE_MODULES = {"planner-service": "planner_service.__main__", "env-server": "server.__main__"}


_DEFAULT_SWEEP = {"committed": [8, 16, 32, 64, 128], "clock": [2, 8, 16, 32, 64, 96, 128]}


def _calibrate(args: argparse.Namespace) -> int:
    from pathlib import Path

    import games
    from harness.checkpoint import CheckpointError
    from planner.calibrate import calibrate
    from planner.store import planner_path

    try:
        game = games.make(args.game)
        checkpoint = args.checkpoint or str(planner_path("checkpoints", args.game))
        if not Path(checkpoint).exists():
            raise CheckpointError(f"no planner checkpoint at {checkpoint} (pass --checkpoint)")
        sims = args.sims or _DEFAULT_SWEEP["clock" if game.num_players == 2 else "committed"]
        calibrate(
            args.game,
            checkpoint=checkpoint,
            sims=sims,
            episodes=args.episodes,
            max_decisions=args.max_decisions,
            calls=args.calls,
            out_dir=Path(args.out or Path("runs") / "calibrate" / args.game),
            seed=args.seed,
        )
    except (games.UnknownGameError, CheckpointError, ValueError) as e:
        print(f"rtplan calibrate: error: {e}", file=sys.stderr)
        return 2
    return 0


def _cross_eval(args: argparse.Namespace) -> int:
    from pathlib import Path

    import games
    from harness.checkpoint import CheckpointError
    from planner.calibrate import cross_eval

    try:
        games.game_class(args.game)
        cross_eval(
            args.game,
            checkpoints=args.checkpoints,
            eval_ks=args.eval_k,
            sims_per_frame=args.sims_per_frame,
            episodes=args.episodes,
            max_frames=args.max_frames,
            out_dir=Path(args.out or Path("runs") / "cross-eval" / args.game),
            seed=args.seed,
            opponent=args.opponent,
        )
    except (games.UnknownGameError, CheckpointError, ValueError) as e:
        print(f"rtplan cross-eval: error: {e}", file=sys.stderr)
        return 2
    return 0


def _set_device_count(devices: int | None) -> None:
    """Asks XLA for `devices` host (CPU) devices; only works before jax is imported."""
    if "jax" in sys.modules:
        return
    n = devices if devices is not None else os.cpu_count() or 1
    flags = [
        f
        for f in os.environ.get("XLA_FLAGS", "").split()
        if not f.startswith("--xla_force_host_platform_device_count")
    ]
    os.environ["XLA_FLAGS"] = " ".join([*flags, f"--xla_force_host_platform_device_count={n}"])


def _train_planner(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    _set_device_count(args.devices)
    from planner.train import trainer

    return _train(args, argv, "planner", TrainConfig, trainer)


def _train_gate(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    from gate.ppo import gate_trainer

    return _train(args, argv, "gate", GateTrainConfig, gate_trainer)


def _train(args: argparse.Namespace, argv, what: str, config_cls: type, trainer) -> int:
    """Builds the run of `train-<what>` from the flags (and a resumed checkpoint) and trains."""
    from pathlib import Path

    import games
    from harness.checkpoint import CheckpointError
    from harness.config import overrides
    from harness.run import run_config

    out = Path(args.out or Path("runs") / what / args.game)
    try:
        games.game_class(args.game)
        given = overrides(config_cls, args)
        cfg = run_config(config_cls, out, resume=args.resume, given=given, game_id=args.game)
        full_argv = ["rtplan", *(sys.argv[1:] if argv is None else argv)]
        run = trainer(cfg, out, resume=args.resume, argv=full_argv, progress=not args.no_progress)
    except (games.UnknownGameError, CheckpointError, ValueError) as e:
        print(f"rtplan train-{what}: error: {e}", file=sys.stderr)
        return 2
    row = run.run()
    if row is not None:
        summary = ", ".join(
            f"{k}={row[k]:.4g}"
            for k in ("iteration", "frames", "loss", "eval_mean")
            if row.get(k) is not None
        )
        print(f"trained {args.game}: {summary}; files in {out}")
    else:
        print(f"{args.game}: already at iteration {run.iteration}; nothing to do ({out})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in _SERVICES:
        import importlib

        return importlib.import_module(_SERVICE_MODULES[argv[0]]).main(argv[1:])
    args = _build_parser().parse_args(argv)
    if args.command == "demo":
        from rtplan.live import run_demo

        return run_demo(
            args.game,
            k=args.k,
            fps=args.fps,
            frames=args.frames,
            seed=args.seed,
            every=args.every,
            example_agent=not args.no_example_agent,
        )
    if args.command == "play":
        from rtplan.demo import play_all

        return play_all(args.games, frames=args.frames, seed=args.seed)
    if args.command == "games":
        from rtplan.demo import list_games

        return list_games()
    if args.command == "train-planner":
        return _train_planner(args, argv)
    if args.command == "train-gate":
        return _train_gate(args, argv)
    if args.command == "ship-planner":
        from harness.checkpoint import CheckpointError
        from planner.ship import ship

        try:
            print(f"shipped {ship(args.run, args.dest, args.variant)}")
        except (CheckpointError, OSError, ValueError) as e:
            print(f"rtplan ship-planner: error: {e}", file=sys.stderr)
            return 2
        return 0
    if args.command == "calibrate":
        return _calibrate(args)
    if args.command == "cross-eval":
        return _cross_eval(args)
    raise AssertionError(args.command)
