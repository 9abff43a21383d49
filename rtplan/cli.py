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
    forwarded = sub.choices.get(argv[0]) if argv else None
    if forwarded is not None and forwarded.get_default("forward"):
        # A service parses its own flags: argparse would stop at the first `--flag` here.
        args = argparse.Namespace(command=argv[0], args=argv[1:])
        return run_command(argv[0], forwarded.get_default("handler"), args)
    args = parser.parse_args(argv)
    args.argv = ["rtplan", *argv]
    return run_command(args.command, args.handler, args)


if __name__ == "__main__":
    sys.exit(main())
