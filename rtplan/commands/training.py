"""Training commands: `train-planner`, `train-gate`, `fit-gate`, `train-gate-cf`,
`ship-planner`, `ship-gate`."""

from __future__ import annotations

import argparse

from rtplan.commands._errors import CommandError
from rtplan.commands._flags import add_budgets, add_out, check_budgets, check_rules, out_dir

# None imports JAX: `--devices` must set XLA's flags before jax loads.
from rtplan.gate.clock.config import ClockGateTrainConfig
from rtplan.gate.committed.config import GateConfig, GateTrainConfig
from rtplan.gate.counterfactual.config import CounterfactualPPOConfig
from rtplan.harness.config import add_flags, flag_fields, help_of

# None imports JAX: `--devices` must set XLA's flags before jax loads.
from rtplan.jax_setup import check_map_count, init_distributed, set_device_count
from rtplan.planner.train_config import TrainConfig

#: `TrainConfig` fields that are not `train-planner` flags (`--game` sets the game).
_NOT_FLAGS = ("game_id", "game_params")


def register(sub: argparse._SubParsersAction) -> None:
    """Adds the training and shipping subcommands to the `rtplan` subcommands."""
    train = sub.add_parser(
        "train-planner",
        help="train a game's planner network (expert iteration / self-play)",
        description="Trains the AlphaZero planner of a game. Flags left out take the "
        "checkpoint's values with --resume, else "
        "rtplan.planner.train_config.TrainConfig's defaults.",
    )
    _run_flags(train, "planner")
    _process_flags(train)
    add_flags(train, TrainConfig, exclude=_NOT_FLAGS)
    train.set_defaults(handler=_train_planner)

    gate = sub.add_parser(
        "train-gate",
        help="train a game's gate (PPO over the frozen planner's budgeted options)",
        description=_GATE_DESCRIPTION + " `--game G --help` lists G's kind's flags only.",
    )
    _gate_flags(gate)
    gate.set_defaults(handler=_train_gate, help_parser=_gate_help)

    fit = sub.add_parser(
        "fit-gate",
        help="committed games: fit a gate to counterfactual labels (rtplan counterfactual)",
        description="Labels each state of an `rtplan counterfactual` folder with the budget "
        "that beats the continuation budget by more than --z paired SE (else the continuation "
        "budget), replays the states under the rules they were measured under (their chunks' "
        "committed and tree_k), fits the gate network by cross-entropy and writes a gate "
        "checkpoint (`rtplan eval --gate` plays it, under those rules only).",
    )
    fit.add_argument("--game", required=True, help="a committed game id")
    fit.add_argument(
        "--labels",
        required=True,
        nargs="+",
        help="rtplan counterfactual output folders (one planner, continuation budget and rules)",
    )
    fit.add_argument("--out", required=True, help="the gate checkpoint to write")
    fit.add_argument("--planner", default=None, help="planner checkpoint (default: shipped)")
    fit.add_argument("--z", type=float, default=2.0, help="SEs a budget must beat K by")
    fit.add_argument("--epochs", type=int, default=200, help="passes over the labels")
    fit.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate")
    fit.add_argument("--seed", type=int, default=0, help="seed of the gate's init and order")
    fit.add_argument(
        "--folds",
        type=int,
        default=4,
        help="first measure the gain of held-out picks, states split by game (0: skip)",
    )
    add_budgets(
        fit,
        "(default: the labels', from rtplan counterfactual --budgets; given, they must be the "
        "labels'). The gate file records them, and rtplan eval plays it over them",
    )
    _gate_shape_flags(fit)
    fit.set_defaults(handler=_fit_gate)

    cf = sub.add_parser(
        "train-gate-cf",
        help="committed games: train a gate by PPO with the counterfactual critic",
        description="Each round plays train games along the gate's sampled budgets to a state "
        "per game, branches every budget there (the same keys, --worlds futures, continued "
        "under --continuation for --horizon frames) and takes a PPO step on the measured "
        "advantages of every budget (rtplan.gate.counterfactual.ppo). Writes "
        "<out>/learner.msgpack, "
        "rounds.jsonl and gate.msgpack (`rtplan eval --gate` plays it) after each round; "
        "--resume continues a killed run.",
    )
    cf.add_argument("--game", required=True, help="a committed game id")
    cf.add_argument("--out", required=True, help="the run's folder")
    cf.add_argument("--planner", default=None, help="planner checkpoint (default: shipped)")
    cf.add_argument("--resume", action="store_true", help="continue the run in --out")
    _gate_shape_flags(cf)
    add_flags(cf, CounterfactualPPOConfig)
    cf.set_defaults(handler=_train_gate_cf)

    ship = sub.add_parser(
        "ship-planner", help="copy a run's planner params, provenance and curve to checkpoints/"
    )
    ship.add_argument("--run", required=True, help="training run folder (has planner.msgpack)")
    ship.add_argument("--dest", default=None, help=_DEST_HELP)
    ship.add_argument(
        "--variant",
        default=None,
        help="keep as a variant (e.g. train-k2): to <dest>/../archive/<game>/<variant>/, not "
        "shipped, instead of replacing the base",
    )
    ship.add_argument(
        "--snapshot",
        default=None,
        help="ship the params of this training checkpoint of the run (e.g. a strength_race "
        "snapshot chosen by outside matches) instead of the run's best evaluated",
    )
    ship.set_defaults(handler=_ship_planner)

    ship_gate = sub.add_parser(
        "ship-gate",
        help="copy a gate run's best params, provenance and curve to checkpoints/<game>/",
    )
    ship_gate.add_argument("--run", required=True, help="gate training run (has gate.msgpack)")
    ship_gate.add_argument("--dest", default=None, help=_DEST_HELP)
    ship_gate.set_defaults(handler=_ship_gate)


_DEST_HELP = (
    "checkpoints root (default: the checkout's checkpoints/); the training log goes to "
    "results/<game>/training/ beside it"
)


_GATE_DESCRIPTION = (
    "Trains the gate that picks the budget k of each option. Flags left out take the "
    "checkpoint's values with --resume, else the defaults of the game's kind: "
    "rtplan.gate.committed.config.GateTrainConfig's on a committed game, "
    "rtplan.gate.clock.config.ClockGateTrainConfig's (the recurrent clock gate) on a clock game "
    "(speed-hex-v0, speed-go-v0); flags of the other kind are refused."
)


def _gate_flags(parser: argparse.ArgumentParser, config_cls: type | None = None) -> None:
    """Adds `train-gate`'s flags: those of one kind's `config_cls` (its help: its own meaning
    and default of every flag), or (None) of both kinds, a flag they share once, its help
    naming each kind's meaning and default where they differ."""
    _run_flags(parser, "gate")
    if config_cls is not ClockGateTrainConfig:  # the clock gate trains in one process
        _process_flags(parser)
    if config_cls is not None:
        add_flags(parser, config_cls, exclude=("game_id",))
        return
    committed = {f.name: f for f in flag_fields(GateTrainConfig, exclude=("game_id",))}
    clock = {f.name: f for f in flag_fields(ClockGateTrainConfig, exclude=("game_id",))}
    shared = committed.keys() & clock.keys()
    texts = {
        name: _per_kind(committed[name], clock[name])
        for name in shared
        if (help_of(committed[name]), committed[name].default)
        != (help_of(clock[name]), clock[name].default)
    }
    both = parser.add_argument_group(
        "both kinds (rtplan.gate.config.PPOConfig and more; --game G --help: G's kind's)"
    )
    add_flags(both, GateTrainConfig, only=[n for n in committed if n in shared], texts=texts)
    own = parser.add_argument_group(
        "committed games (rtplan.gate.committed.config.GateTrainConfig)"
    )
    add_flags(own, GateTrainConfig, only=[n for n in committed if n not in shared])
    own = parser.add_argument_group("clock games (rtplan.gate.clock.config.ClockGateTrainConfig)")
    add_flags(own, ClockGateTrainConfig, only=[n for n in clock if n not in shared])


def _per_kind(committed, clock) -> str:
    """The help of a flag both kinds' configs have (the fields `committed`, `clock`) whose
    meaning or default differs: each kind's default, and each one's meaning where they differ."""
    if help_of(committed) == help_of(clock):
        return (
            f"{help_of(committed)} (default: committed games {committed.default}, clock games "
            f"{clock.default})"
        )
    return f"committed games: {_with_default(committed)}; clock games: {_with_default(clock)}"


def _with_default(field) -> str:
    """A field's help with its default (none named when None)."""
    text = help_of(field).rstrip(".")
    return text if field.default is None else f"{text} (default: {field.default})"


def _gate_help(argv: list[str]) -> argparse.ArgumentParser | None:
    """The parser whose help `rtplan train-gate ... --help` prints: with `--game G`, one of
    G's kind's flags only (`_gate_flags`); None (no game, or an unknown one): the command's own,
    of both kinds."""
    peek = argparse.ArgumentParser(add_help=False)
    peek.add_argument("--game")
    game = peek.parse_known_args(argv)[0].game
    if game is None:
        return None
    from rtplan import games  # JAX, for help only: the kind is the game record's

    try:
        clock = games.kind_of(game) is games.Kind.CLOCK
    except games.UnknownGameError:
        return None
    config_cls = ClockGateTrainConfig if clock else GateTrainConfig
    parser = argparse.ArgumentParser(
        prog="rtplan train-gate",
        description=f"Trains the {'clock' if clock else 'committed'} gate of {game}. Flags left "
        f"out take the checkpoint's values with --resume, else {config_cls.__module__}."
        f"{config_cls.__name__}'s defaults.",
    )
    _gate_flags(parser, config_cls)
    return parser


def _run_flags(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--game", required=True, help="registered game id, e.g. snake-rt-v0")
    parser.add_argument("--resume", action="store_true", help="continue <out>/checkpoint.msgpack")
    add_out(parser, what)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _process_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of a data-parallel run of several processes (`_setup_processes`)."""
    parser.add_argument(
        "--coordinator",
        default=None,
        metavar="HOST:PORT",
        help="train as one of --num-processes processes (jax.distributed, e.g. one per host): "
        "process 0's address, reachable from every process; --devices then counts the devices "
        "of all processes",
    )
    parser.add_argument(
        "--num-processes", type=int, default=1, help="processes of the job (with --coordinator)"
    )
    parser.add_argument(
        "--process-id",
        type=int,
        default=0,
        help="this process's rank, 0 to --num-processes - 1; process 0 writes the run folder",
    )


def _setup_processes(args: argparse.Namespace) -> None:
    """Sets XLA:CPU's device count (the share of `--devices` of each process) and, with
    `--coordinator`, joins the job; before jax loads."""
    n = args.num_processes
    if args.coordinator is None:
        if n != 1 or args.process_id != 0:
            raise CommandError("--num-processes and --process-id need --coordinator")
        set_device_count(args.devices)
        return
    if args.devices is not None and args.devices % n:
        raise CommandError(f"--devices {args.devices} is not divisible by --num-processes {n}")
    set_device_count(None if args.devices is None else args.devices // n)
    init_distributed(args.coordinator, n, args.process_id)


def _train_planner(args: argparse.Namespace) -> int:
    _setup_processes(args)
    check_map_count()
    from rtplan.planner.train import trainer

    return _train(args, "planner", TrainConfig, trainer)


def _train_gate(args: argparse.Namespace) -> int:
    _setup_processes(args)
    check_map_count()
    from rtplan import games  # JAX: after the job is joined (importing games starts JAX's backends)

    clock = games.kind_of(args.game) is games.Kind.CLOCK
    check_rules(args, clock=clock)  # as `eval` checks them: the gate plays under its rules
    check_budgets(args, clock=clock)  # and over its budgets
    if clock:
        if args.coordinator is not None:
            raise CommandError(
                f"{args.game} is a clock game, whose gate trains in one process: "
                "--coordinator, --num-processes and --process-id are for the committed "
                "games' gate"
            )
        from rtplan.gate.clock.train import clock_gate_trainer

        return _train(args, "gate", ClockGateTrainConfig, clock_gate_trainer, GateTrainConfig)
    from rtplan.gate.committed.train import gate_trainer

    return _train(args, "gate", GateTrainConfig, gate_trainer, ClockGateTrainConfig)


def _train(
    args: argparse.Namespace, what: str, config_cls: type, trainer, other_cls: type | None = None
) -> int:
    """Builds the run of `train-<what>` from the flags (and a resumed checkpoint) and trains.
    Flags that only `other_cls` (the other kind of gate) has are refused."""
    from rtplan import games
    from rtplan.harness.config import overrides
    from rtplan.harness.run import run_config

    out = out_dir(args, what)
    games.game_class(args.game)
    given = overrides(config_cls, args)
    if other_cls is not None:
        foreign = sorted(set(overrides(other_cls, args)) - set(given))
        if foreign:
            flags = ", ".join("--" + f.replace("_", "-") for f in foreign)
            raise ValueError(
                f"{flags}: not a setting of {args.game}'s gate ({config_cls.__name__})"
            )
    cfg = run_config(config_cls, out, resume=args.resume, given=given, game_id=args.game)
    run = trainer(cfg, out, resume=args.resume, argv=args.argv, progress=not args.no_progress)
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


def _fit_gate(args: argparse.Namespace) -> int:
    from rtplan import games

    if games.kind_of(args.game) is not games.Kind.COMMITTED:
        raise CommandError(f"{args.game} is a clock game: fit-gate is for committed games")
    if args.epochs < 1:
        raise CommandError("--epochs must be >= 1")
    if args.folds < 0 or args.folds == 1:
        raise CommandError("--folds must be 0 (skip) or at least 2")
    from rtplan.gate.counterfactual.supervised import fit_gate
    from rtplan.harness.checkpoint import planner_file

    planner = str(planner_file(args.game, args.planner))
    config = _gate_shape(args)
    fit_gate(
        args.game,
        args.labels,
        args.out,
        config=config,
        planner_file=planner,
        z=args.z,
        epochs=args.epochs,
        lr=args.lr,
        seed=args.seed,
        folds=args.folds,
        budgets=args.budgets,
        command=" ".join(args.argv),
    )
    return 0


def _gate_shape_flags(parser: argparse.ArgumentParser) -> None:
    """The gate network's shape flags of the commands that train one outside `train-gate`."""
    parser.add_argument("--gate-stats", action="store_true", help="the gate sees planner stats")
    parser.add_argument("--gate-channels", type=int, default=64, help="board branch width")
    parser.add_argument("--gate-hidden", type=int, default=256, help="hidden units per head")


def _gate_shape(args: argparse.Namespace) -> GateConfig:
    """The `GateConfig` of `_gate_shape_flags`."""
    return GateConfig(
        channels=args.gate_channels, head_hidden=args.gate_hidden, stats=args.gate_stats
    )


def _train_gate_cf(args: argparse.Namespace) -> int:
    from rtplan import games

    if games.kind_of(args.game) is not games.Kind.COMMITTED:
        raise CommandError(f"{args.game} is a clock game: train-gate-cf is for committed games")
    if args.continuation is None:
        raise CommandError("--continuation is required: the best fixed budget K")
    from rtplan.gate.counterfactual.ppo import train_counterfactual_ppo
    from rtplan.harness.checkpoint import planner_file
    from rtplan.harness.config import from_args

    try:
        cfg = from_args(CounterfactualPPOConfig, args)
        config = _gate_shape(args)
    except ValueError as e:
        raise CommandError(str(e)) from e
    planner = str(planner_file(args.game, args.planner))
    try:
        gate = train_counterfactual_ppo(
            args.game,
            args.out,
            cfg,
            gate_config=config,
            planner_file=planner,
            resume=args.resume,
            command=" ".join(args.argv),
        )
    except (FileExistsError, FileNotFoundError, ValueError) as e:
        raise CommandError(str(e)) from e
    print(f"gate: {gate}")
    return 0


def _ship_planner(args: argparse.Namespace) -> int:
    from rtplan.planner.ship import ship

    print(f"shipped {ship(args.run, args.dest, args.variant, args.snapshot)}")
    return 0


def _ship_gate(args: argparse.Namespace) -> int:
    from rtplan.gate.ship import ship_gate

    print(f"shipped {ship_gate(args.run, args.dest)}")
    return 0
