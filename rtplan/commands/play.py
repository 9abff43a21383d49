"""Play commands: `demo` (the live services, watched), `play` (every game headless), `games`."""

from __future__ import annotations

import argparse

from rtplan.commands._errors import CommandError
from rtplan.processes import bind_error


def register(sub: argparse._SubParsersAction) -> None:
    """Adds `demo`, `play` and `games` to the `rtplan` subcommands."""
    demo = sub.add_parser(
        "demo",
        help="the live web demo: planner service + env server + a game played by the planner "
        "agent, watched in the browser (--headless: printed)",
    )
    demo.add_argument(
        "--game",
        default=None,
        help="game id (default, with or without --headless: the showcase, the first of Tetris, "
        "Snake, Pac-Man that ships a gate, else Snake)",
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
        "--port",
        type=int,
        default=None,
        help="the lobby's HTTP port (default 8000, with --headless any free one; 0: any free); "
        "a port in use is refused before anything starts",
    )
    demo.add_argument(
        "--verbose",
        action="store_true",
        help="every line of its services as it comes (else: progress, addresses, each game's "
        "result, and an error as one line without its traceback)",
    )
    demo.add_argument(
        "--access-log",
        action="store_true",
        help="the env server logs a line per HTTP request (off: an open page makes about 4 a "
        "second)",
    )
    demo.add_argument(
        "--checkpoint-dir",
        default=None,
        help="planner (and gate) checkpoints (default: the checkout's checkpoints/, else the "
        "installed package's)",
    )
    demo.add_argument(
        "--web-dir",
        default=None,
        help="the browser pages (default: the checkout's web/, else the installed package's)",
    )
    demo.add_argument(
        "--planner-games",
        default=None,
        help="comma-separated games the planner service serves besides the demo's, or 'all' "
        "(default: every game with a checkpoint; the demo's game compiles first, the others "
        "after it, each offered in the lobby once ready)",
    )
    demo.add_argument(
        "--record-dir",
        default=None,
        help="where the replay files go (default: RTPLAN_SERVER_RECORD_DIR, else the "
        "checkout's replays/, else $XDG_DATA_HOME/rtplan/replays: ~/.local/share/rtplan/replays)",
    )
    demo.add_argument(
        "--every", type=int, default=None, help="--headless: print every n-th frame (default 10)"
    )
    demo.add_argument(
        "--no-example-agent",
        action="store_true",
        help="--headless: do not run the example agent (python -m rtplan.examples.random_agent) "
        "against the gRPC Env API beside it",
    )
    demo.set_defaults(handler=_demo)

    play = sub.add_parser("play", help="play every game headless and print a line per frame")
    play.add_argument("--games", nargs="*", default=None, help="game ids (default: all)")
    play.add_argument("--frames", type=int, default=30, help="frames per game (default: 30)")
    play.add_argument("--seed", type=int, default=0, help="PRNG seed (default: 0)")
    play.set_defaults(handler=_play)

    games = sub.add_parser("games", help="list the registered games and their specs")
    games.set_defaults(handler=_games)


#: The demo's flags that only one of its two modes reads: (flag, its `args` name, headless).
_ONE_MODE_FLAGS = (
    ("--every", "every", True),
    ("--no-example-agent", "no_example_agent", True),
    ("--planner-games", "planner_games", False),
    ("--verbose", "verbose", False),
)


def _demo(args: argparse.Namespace) -> int:
    from rtplan.live import DEMO_HTTP_PORT

    for flag, name, headless in _ONE_MODE_FLAGS:  # a flag that would do nothing is refused
        if getattr(args, name) not in (None, False) and args.headless != headless:
            mode = "--headless" if headless else "the web demo (without --headless)"
            raise CommandError(f"{flag} is for {mode} only")
    port = (0 if args.headless else DEMO_HTTP_PORT) if args.port is None else args.port
    taken = bind_error(port)
    if taken is not None:  # before anything starts: the services take seconds to fail on it
        raise CommandError(
            f"port {port} cannot be bound ({taken}); pass --port N to use another (0: any free)"
        )
    if args.headless:
        from rtplan.live import run_demo

        return run_demo(
            args.game,
            k=args.k,
            fps=args.fps,
            frames=300 if args.frames is None else args.frames,
            seed=args.seed,
            every=10 if args.every is None else args.every,
            example_agent=not args.no_example_agent,
            port=port,
            access_log=args.access_log,
            checkpoint_dir=args.checkpoint_dir,
            record_dir=args.record_dir,
            web_dir=args.web_dir,
        )
    from rtplan.live import run_web_demo

    return run_web_demo(
        args.game,
        k=args.k,
        fps=args.fps,
        frames=args.frames or 0,
        seed=args.seed,
        port=port,
        access_log=args.access_log,
        verbose=args.verbose,
        planner_games=args.planner_games.split(",") if args.planner_games else None,
        checkpoint_dir=args.checkpoint_dir,
        record_dir=args.record_dir,
        web_dir=args.web_dir,
    )


def _play(args: argparse.Namespace) -> int:
    from rtplan import games
    from rtplan.demo import play_all

    for game_id in args.games or ():
        games.game_class(game_id)  # an unknown id fails before any game plays
    return play_all(args.games, frames=args.frames, seed=args.seed)


def _games(args: argparse.Namespace) -> int:
    from rtplan.demo import list_games

    return list_games()
