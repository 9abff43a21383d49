"""Deployment command: `deploy`, the shipped agent played live at each FPS (the paper's study)."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from rtplan.commands._errors import FAILED, CommandError
from rtplan.commands.health import env_health, planner_health
from rtplan.harness.checkpoint import CheckpointError, gate_file, planner_file


def register(sub: argparse._SubParsersAction) -> None:
    """Adds `deploy` to the `rtplan` subcommands."""
    p = sub.add_parser(
        "deploy",
        help="play the shipped agent live over full episodes at each FPS, against its "
        "simulated-clock return on the same seeds: returns, misses, latency, slack (JSON, CSV, "
        "PNG)",
    )
    p.add_argument("--game", required=True, help="a committed-action game id")
    p.add_argument(
        "--fps", type=float, nargs="*", default=None, help="frame rates, e.g. 8 9 10 11 12"
    )
    p.add_argument("--episodes", type=int, default=100, help="episodes per FPS (default 100)")
    agent = p.add_mutually_exclusive_group()
    agent.add_argument(
        "--agent",
        choices=["gate"],
        default="gate",
        help="gate: the shipped gate picks each option's k (the default)",
    )
    agent.add_argument("--k", type=int, default=None, help="force budget K on every option")
    p.add_argument(
        "--gate",
        metavar="PATH",
        default=None,
        help="play this gate checkpoint instead of the shipped one (trained over the same "
        "planner, e.g. a latency-aware fine-tune); default output folder "
        "results/<game>/deploy/gate-<its sha256's first 12>/; not with a forced k or a "
        "remote server",
    )
    p.add_argument(
        "--max-frames", type=int, default=0, help="frames per episode at most (default 0: all)"
    )
    p.add_argument(
        "--until-miss-rate",
        type=float,
        default=None,
        metavar="R",
        help="go on past the last FPS (at the list's last spacing) until the miss rate passes "
        "R, e.g. 0.05: the game's breaking point",
    )
    p.add_argument(
        "--remote",
        metavar="ENV_URL",
        default=None,
        help="play against a running env server (http://HOST:PORT) and its planner service "
        "instead of starting both",
    )
    p.add_argument(
        "--planner",
        metavar="HOST:PORT",
        default=None,
        help="with --remote: the planner service's address, checked SERVING and recorded",
    )
    p.add_argument(
        "--api-key-file",
        metavar="FILE",
        default=None,
        help="with --remote: a file of the env server's keys (its first key creates the "
        "sessions; one a line, # comments), where the server has keys",
    )
    p.add_argument(
        "--checkpoint-dir",
        default=None,
        help="the services' checkpoints (default: the shipped ones); not with --remote",
    )
    p.add_argument(
        "--no-pin",
        action="store_true",
        help="leave the services' cores and devices to the OS (default: split them)",
    )
    p.add_argument("--force", action="store_true", help="replay FPS whose files exist")
    p.add_argument("--out", default=None, help="output folder (default results/<game>/deploy)")
    p.set_defaults(handler=_deploy)


def _experiment(args: argparse.Namespace):
    """The checked experiment of the flags."""
    from rtplan import games
    from rtplan.deploy import Experiment

    if args.game not in games.registered_games():
        known = ", ".join(games.registered_games())
        raise CommandError(f"unknown game {args.game!r}: choose from {known}")
    if not args.fps:
        raise CommandError("--fps needs at least one frame rate, e.g. --fps 8 9 10 11 12")
    if any(f <= 0 for f in args.fps):
        raise CommandError(f"--fps: frame rates must be > 0, got {args.fps}")
    if args.episodes < 1:
        raise CommandError(f"--episodes must be >= 1, got {args.episodes}")
    if args.max_frames < 0:
        raise CommandError(f"--max-frames must be >= 0, got {args.max_frames}")
    if args.k is not None and args.k < 1:
        raise CommandError(f"--k must be >= 1, got {args.k}")
    if args.until_miss_rate is not None and not 0 <= args.until_miss_rate < 1:
        raise CommandError(f"--until-miss-rate must be in [0, 1), got {args.until_miss_rate}")
    if args.remote is None and args.planner is not None:
        raise CommandError("--planner names the planner of a --remote env server")
    if args.remote is None and args.api_key_file is not None:
        raise CommandError("--api-key-file holds the keys of a --remote env server")
    if args.remote is not None and args.checkpoint_dir is not None:
        raise CommandError("--checkpoint-dir is for the services deploy starts, not --remote")
    if args.gate is not None and (args.k is not None or args.remote is not None):
        raise CommandError("--gate is played by the services deploy starts: not with --k, --remote")
    if args.gate is not None:
        gate_file(args.game, args.gate)  # CheckpointError: no file there
    return Experiment(
        game=args.game,
        fps=tuple(args.fps),
        episodes=args.episodes,
        k=args.k,
        max_frames=args.max_frames,
        until_miss_rate=args.until_miss_rate,
        force=args.force,
    )


def _deploy(args: argparse.Namespace) -> int:
    from rtplan import deploy
    from rtplan.harness.layout import results_root

    exp = _experiment(args)
    out = Path(args.out) if args.out else results_root() / args.game / "deploy"
    if args.gate is not None and not args.out:
        from rtplan.gate.files import file_sha256

        out = out / f"gate-{file_sha256(args.gate)[:12]}"
    try:
        if args.remote is not None:
            base = (args.remote if "://" in args.remote else f"http://{args.remote}").rstrip("/")
            key = _key(args.api_key_file)  # a file that cannot serve: refused before a call
            print(env_health(base))
            if args.planner is not None:
                print(planner_health(args.planner))
            ident = {"env_server": base, "planner": args.planner}
            deploy.run(base, exp, out, services=ident, key=key)
            return 0
        return _local(args, exp, out)
    except CheckpointError:  # a missing checkpoint is bad input (USAGE), not a failed run
        raise
    except RuntimeError as e:  # a service did not start or a session failed: its log's tail
        raise CommandError(f"{e}", FAILED) from e


def _key(path: str | None) -> str | None:
    """The key a remote env server gets (`--api-key-file`'s first), None without the flag."""
    from rtplan.processes import KeyFileError, first_key

    if path is None:
        return None
    try:
        return first_key(path)
    except KeyFileError as e:  # bad input (USAGE), before anything is played
        raise CommandError(f"--api-key-file: {e}") from e


def _local(args: argparse.Namespace, exp, out: Path) -> int:
    """Starts the planner service and the env server (`place_services`), then plays."""
    from rtplan import deploy
    from rtplan.gate.files import check_trained_over, file_sha256
    from rtplan.harness.checkpoint import load_metadata
    from rtplan.processes import (
        Placement,
        place_services,
        services,
        stop_on_signals,
        visible_gpus,
    )
    from rtplan.via_services import serving_folder

    root = args.checkpoint_dir  # None: the shipped checkpoints
    planner = planner_file(exp.game, root=root, flag="--checkpoint-dir")
    ident = {"planner_sha256": file_sha256(planner)}
    if exp.k is None:
        gate = gate_file(exp.game, args.gate, root=root, flag="--gate, or --k K")
        ident["gate_sha256"] = file_sha256(gate)
    if args.gate is not None:  # refused here, before the services start
        try:
            check_trained_over(load_metadata(args.gate), planner, args.gate)
        except CheckpointError as e:  # bad input, not a failed run
            raise CommandError(str(e)) from e
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    placement = Placement() if args.no_pin else place_services(cpus, visible_gpus())
    print(f"starting the planner service and env server ({placement.describe()})")
    with (
        tempfile.TemporaryDirectory(prefix="rtplan-deploy-") as tmp,
        stop_on_signals() as stopping,
    ):
        served = Path(root) if root else None
        if args.gate is not None:  # the services serve exactly the planner and this gate
            served = serving_folder(Path(tmp), exp.game, str(planner), args.gate)
        replays = Path(tmp) / "replays"
        replays.mkdir()
        with services(
            exp.game,
            echo=False,
            checkpoint_dir=served,
            record_dir=replays,
            placement=placement,
            stopping=stopping,
        ) as addr:
            deploy.run(
                addr["http"], exp, out, services={**ident, "placement": placement.describe()}
            )
    return 0
