"""The `rtplan` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rtplan.commands import GROUPS, run_command
from rtplan.jax_setup import use_compile_cache
from rtplan.processes import exit_with_parent


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand, each group registering its own (`rtplan.commands`)."""
    parser = argparse.ArgumentParser(prog="rtplan", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    use_compile_cache()  # before any jax import, here and in the services started
    exit_with_parent()  # a service `rtplan.processes.Child` started goes when its parent goes
    parser = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    chosen = sub.choices.get(argv[0]) if argv else None
    if chosen is not None and chosen.get_default("forward"):
        # A service parses its own flags: argparse would stop at the first `--flag` here.
        args = argparse.Namespace(command=argv[0], args=argv[1:])
        return run_command(argv[0], chosen.get_default("handler"), args)
    helper = chosen.get_default("help_parser") if chosen is not None else None
    if helper is not None and {"-h", "--help"} & set(argv[1:]):
        # A command whose flags depend on another one's value (`train-gate --game G`): the
        # help of what that value selects, once it is known (None: the command's own).
        shown = helper(argv[1:])
        if shown is not None:
            shown.print_help()
            return 0
    args = parser.parse_args(argv)
    args.argv = ["rtplan", *argv]
    return run_command(args.command, args.handler, args)


if __name__ == "__main__":
    sys.exit(main())
