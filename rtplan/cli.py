"""The `rtplan` command line."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rtplan", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="play every game headless and print a line per frame")
    demo.add_argument("--games", nargs="*", default=None, help="game ids (default: all)")
    demo.add_argument("--frames", type=int, default=30, help="frames per game (default: 30)")
    demo.add_argument("--seed", type=int, default=0, help="PRNG seed (default: 0)")

    sub.add_parser("games", help="list the registered games and their specs")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the process exit code."""
    args = _build_parser().parse_args(argv)
    if args.command == "demo":
        from rtplan.demo import play_all

        return play_all(args.games, frames=args.frames, seed=args.seed)
    if args.command == "games":
        from rtplan.demo import list_games

        return list_games()
    raise AssertionError(args.command)
