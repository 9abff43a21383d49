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
        help="the live web demo: planner service + env server + a game played by the planner "
        "agent, watched in the browser (--headless: printed)",
    )
    demo.add_argument(
        "--game",
        default=None,
        help="game id (default: the first of Tetris, Snake, Pac-Man that ships a gate, else "
        "Snake; --headless: Snake)",
    )
    demo.add_argument(
        "--k", type=int, default=2, help="the planner agent's forced budget (games with no gate)"
    )
    demo.add_argument("--fps", type=float, default=9.0, help="frames per second (default: 9)")
    demo.add_argument(
        "--frames",
        type=int,
        default=None,
        help="frames per game (0: to the end; default: to the end, 300 with --headless)",
    )
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument(
        "--headless", action="store_true", help="print the frames instead of serving the lobby"
    )
    demo.add_argument(
        "--port", type=int, default=8000, help="the lobby's HTTP port (default 8000, 0: any free)"
    )
    demo.add_argument(
        "--checkpoint-dir",
        default=None,
        help="planner (and gate) checkpoints (default checkpoints)",
    )
    demo.add_argument("--record-dir", default=None, help="replay files (default replays)")
    demo.add_argument("--every", type=int, default=10, help="--headless: print every n-th frame")
    demo.add_argument(
        "--no-example-agent",
        action="store_true",
        help="--headless: do not run examples/random_agent.py against the gRPC Env API beside it",
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
    cal.add_argument(
        "--split",
        choices=["tuning", "eval"],
        default="tuning",
        help="seed range of the quality episodes (default tuning: calibration is a selection)",
    )
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
    cross.add_argument(
        "--split",
        choices=["eval", "tuning"],
        default="eval",
        help="seed range: eval (reported numbers, the seeds of `rtplan eval`) or tuning",
    )
    cross.add_argument("--out", default=None, help="output folder (default runs/cross-eval/<game>)")
    ev = sub.add_parser(
        "eval",
        help="the gate and every baseline on the same seeds (paired), one JSON per condition",
        description="Plays each condition (gate, its input ablations, always-k, random k, "
        "policy-only) on the same seeds to each episode's end and writes "
        "<out>/<game>/<split>/<condition>.json; a condition already there for the same seeds, "
        "planner and gate is kept (an interrupted evaluation resumes). `rtplan report` "
        "summarises them.",
    )
    ev.add_argument("--game", required=True, help="committed-action game id")
    ev.add_argument(
        "--split",
        choices=["eval", "tuning"],
        default="eval",
        help="seed range: eval (reported numbers) or tuning (model selection, best fixed k)",
    )
    ev.add_argument("--episodes", type=int, default=100, help="episodes (seeds) per condition")
    ev.add_argument(
        "--conditions",
        nargs="*",
        default=None,
        help="conditions to play (default: gate when a gate exists, k1..kK, random, policy-only)",
    )
    ev.add_argument("--ablations", action="store_true", help="also the gate's input ablations")
    ev.add_argument("--planner", default=None, help="default checkpoints/<game>/planner.msgpack")
    ev.add_argument("--gate", default=None, help="default: gate.msgpack beside the planner")
    ev.add_argument("--out", default="results", help="results root (default: results)")
    ev.add_argument("--force", action="store_true", help="replay conditions already written")
    ev.add_argument(
        "--via-services",
        action="store_true",
        help="play the gate through the real planner service and env server (simulated clock) "
        "on the split's first --episodes seeds and check that returns, frame actions and "
        "k-sequences equal the in-process play exactly (exit 1 on a mismatch); writes nothing",
    )
    rep = sub.add_parser(
        "report",
        help="results table (CSV/JSON + the README's table) and figures from rtplan eval",
    )
    rep.add_argument("--results", default="results", help="results root (default: results)")
    rep.add_argument(
        "--readme", default="README.md", help="README whose results table to regenerate"
    )
    rep.add_argument("--no-figures", action="store_true", help="tables only")
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
    ship.add_argument(
        "--snapshot",
        default=None,
        help="ship the params of this training checkpoint of the run (e.g. a strength_race "
        "snapshot chosen by outside matches) instead of the run's best evaluated",
    )
    ship_gate = sub.add_parser(
        "ship-gate",
        help="copy a gate run's best params, provenance and curve to checkpoints/<game>/",
    )
    ship_gate.add_argument("--run", required=True, help="gate training run (has gate.msgpack)")
    ship_gate.add_argument("--dest", default="checkpoints", help="destination root")
    gtp = sub.add_parser(
        "gtp",
        help="Speed Go's planner as a GTP v2 engine on stdin/stdout (Sabaki, GoGui, GNU Go)",
        description="Answers GTP v2 commands on stdin/stdout; logs go to stderr. See docs/gtp.md.",
    )
    gtp.add_argument("--game", default="speed-go-v0", help="must be speed-go-v0 (the default)")
    gtp.add_argument(
        "--planner", default=None, help="default checkpoints/speed-go-v0/planner.msgpack"
    )
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
            split=args.split,
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
            split=args.split,
            opponent=args.opponent,
        )
    except (games.UnknownGameError, CheckpointError, ValueError) as e:
        print(f"rtplan cross-eval: error: {e}", file=sys.stderr)
        return 2
    return 0


def _eval(args: argparse.Namespace, argv: Sequence[str]) -> int:
    import games
    from gate.experiment import run_conditions
    from harness.checkpoint import CheckpointError

    if args.via_services:
        from rtplan import via_services

        if args.conditions is not None or args.ablations:
            print(
                "rtplan eval: error: --via-services plays the gate only: drop --conditions "
                "and --ablations",
                file=sys.stderr,
            )
            return 2
        try:
            return via_services.run(
                args.game,
                episodes=args.episodes,
                split=args.split,
                planner_file=args.planner,
                gate_file=args.gate,
            )
        except (games.UnknownGameError, CheckpointError, FileNotFoundError, ValueError) as e:
            print(f"rtplan eval: error: {e}", file=sys.stderr)
            return 2
        except RuntimeError as e:
            print(f"rtplan eval --via-services: {e}", file=sys.stderr)
            return 1
    if args.episodes < 2:
        print(
            "rtplan eval: error: --episodes must be >= 2 (a standard error needs two)",
            file=sys.stderr,
        )
        return 2
    try:
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
            command=" ".join(["rtplan", *argv]),
        )
    except (games.UnknownGameError, CheckpointError, FileNotFoundError, ValueError) as e:
        print(f"rtplan eval: error: {e}", file=sys.stderr)
        return 2
    return 0


def _gtp(args: argparse.Namespace) -> int:
    from pathlib import Path

    if args.game != "speed-go-v0":
        print(
            f"rtplan gtp: error: GTP plays Go: --game must be speed-go-v0, not {args.game!r}",
            file=sys.stderr,
        )
        return 2
    planner = args.planner
    if planner is None:
        # The shipped planner, from the working directory or else beside the package.
        here = Path("checkpoints") / args.game / "planner.msgpack"
        planner = here if here.exists() else Path(__file__).resolve().parents[1] / here
    if not Path(planner).exists():
        print(f"rtplan gtp: error: no planner checkpoint at {planner}", file=sys.stderr)
        return 2
    from harness.checkpoint import CheckpointError
    from rtplan.gtp import run

    try:
        return run(planner, seed=args.seed, resign_below=args.resign_below, budget=args.budget)
    except (CheckpointError, ValueError) as e:
        print(f"rtplan gtp: error: {e}", file=sys.stderr)
        return 2


def _report(args: argparse.Namespace) -> int:
    from gate.report import report

    try:
        out = report(args.results, readme=args.readme, figures=not args.no_figures)
    except (FileNotFoundError, ValueError) as e:
        print(f"rtplan report: error: {e}", file=sys.stderr)
        return 2
    print(out["table"])
    for path in out["figures"]:
        print(f"wrote {path}")
    print(f"wrote {args.results}/summary.csv, {args.results}/summary.json")
    if out["readme_updated"]:
        print(f"updated the results table in {args.readme}")
    return 0


#: JAX's persistent compilation cache: a compiled option, search or step is written here once
#: and loaded by the next process (a resumed training, an evaluation, the services) instead of
#: compiled again, which on a 2-core CPU takes minutes. RTPLAN_COMPILE_CACHE=off disables it;
#: a JAX_COMPILATION_CACHE_DIR already set wins. A size limit makes JAX lock the folder (the
#: `filelock` package), so that processes sharing it never read a half-written entry.
COMPILE_CACHE_ENV = "RTPLAN_COMPILE_CACHE"
COMPILE_CACHE_BYTES = 4 << 30


def _use_compile_cache() -> None:
    """Points JAX (this process and the services it starts) at the persistent compile cache."""
    where = os.environ.get(COMPILE_CACHE_ENV, "")
    if where.lower() in ("off", "0", "no") or "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return
    if not where:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        where = os.path.join(base, "rtplan", "jax")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = where
    os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(COMPILE_CACHE_BYTES))


#: XLA:CPU maps ~3 memory regions per compiled kernel; a gate run's ~60 option searches (4
#: budgets x its group sizes) and their evaluation come close to Linux's default 65,530.
MAP_COUNT_NEEDED = 262_144


def _check_map_count(path: str = "/proc/sys/vm/max_map_count") -> None:
    """Warns when the kernel's per-process memory-map limit is too low for long JAX runs."""
    try:
        with open(path) as f:
            limit = int(f.read())
    except (OSError, ValueError):
        return
    if limit < MAP_COUNT_NEEDED:
        print(
            f"rtplan: warning: vm.max_map_count is {limit}; XLA:CPU maps ~3 regions per "
            "compiled kernel, and the searches of a gate run or evaluation can exceed it "
            "(LLVM then fails with 'Cannot allocate memory'). Raise it: "
            "sudo sysctl -w vm.max_map_count=1048576",
            file=sys.stderr,
        )


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
    _set_device_count(args.devices)
    from gate.train import gate_trainer

    return _train(args, argv, "gate", GateTrainConfig, gate_trainer)


def _ship(args: argparse.Namespace) -> int:
    """`ship-planner` / `ship-gate`: copies a run's export into checkpoints/ (exit 2 on error)."""
    from harness.checkpoint import CheckpointError

    try:
        if args.command == "ship-gate":
            from gate.ship import ship_gate

            shipped = ship_gate(args.run, args.dest)
        else:
            from planner.ship import ship

            shipped = ship(args.run, args.dest, args.variant, args.snapshot)
    except (CheckpointError, OSError, ValueError) as e:
        print(f"rtplan {args.command}: error: {e}", file=sys.stderr)
        return 2
    print(f"shipped {shipped}")
    return 0


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
    _use_compile_cache()
    if argv and argv[0] in _SERVICES:
        import importlib

        return importlib.import_module(_SERVICE_MODULES[argv[0]]).main(argv[1:])
    args = _build_parser().parse_args(argv)
    if args.command == "demo" and not args.headless:
        from rtplan.live import run_web_demo

        return run_web_demo(
            args.game,
            k=args.k,
            fps=args.fps,
            frames=args.frames or 0,
            seed=args.seed,
            port=args.port,
            checkpoint_dir=args.checkpoint_dir,
            record_dir=args.record_dir,
        )
    if args.command == "demo":
        from rtplan.live import run_demo

        return run_demo(
            args.game or "snake-rt-v0",
            k=args.k,
            fps=args.fps,
            frames=300 if args.frames is None else args.frames,
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
    if args.command in ("train-planner", "train-gate", "eval", "calibrate", "cross-eval"):
        _check_map_count()
    if args.command == "train-planner":
        return _train_planner(args, argv)
    if args.command == "train-gate":
        return _train_gate(args, argv)
    if args.command in ("ship-planner", "ship-gate"):
        return _ship(args)
    if args.command == "calibrate":
        return _calibrate(args)
    if args.command == "eval":
        return _eval(args, argv)
    if args.command == "report":
        return _report(args)
    if args.command == "gtp":
        return _gtp(args)
    if args.command == "cross-eval":
        return _cross_eval(args)
    raise AssertionError(args.command)
