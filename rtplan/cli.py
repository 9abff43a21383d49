"""The `rtplan` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rtplan.commands import SECTIONS, USAGE, run_command
from rtplan.jax_setup import use_compile_cache
from rtplan.processes import exit_with_parent

#: What `rtplan --help` says the tool is (the distribution's description).
DESCRIPTION = "A real-time game service that learns when to think: gated MCTS planning budgets."

#: The examples `rtplan --help` ends with: (command line, what it does).
EXAMPLES = (
    ("rtplan demo", "the showcase game live at http://127.0.0.1:8000/"),
    ("rtplan demo --headless", "the same game, its frames printed in the terminal"),
    ("rtplan play --games snake-rt-v0", "a game played headless, a line per frame"),
    ("rtplan env-server --http-port 8000", "the env server alone (REST, websockets, gRPC)"),
    (
        "python -m rtplan.examples.random_agent --address localhost:50052",
        "your agent: the example one, over the gRPC Env API",
    ),
    ("rtplan eval --game tetris-rt-v0", "the gate and every baseline on the same seeds"),
    ("rtplan <command> --help", "a command's flags"),
)


class _GroupedParser(argparse.ArgumentParser):
    """The `rtplan` parser, whose help lists the subcommands under their headings (`SECTIONS`)
    and ends with `EXAMPLES`; each subcommand's own parser is a plain one."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        #: (heading, the subcommands' help entries), in help order.
        self.sections: list[tuple[str, list[argparse.Action]]] = []

    def format_help(self) -> str:
        formatter = self._get_formatter()
        formatter.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        formatter.add_text(self.description)
        for heading, entries in self.sections:
            formatter.start_section(heading)
            formatter.add_arguments(entries)
            formatter.end_section()
        formatter.start_section("options")
        formatter.add_arguments(self._optionals._group_actions)
        formatter.end_section()
        formatter.add_text(self.epilog)
        return formatter.format_help()


def _examples() -> str:
    width = max(len(line) for line, _ in EXAMPLES if len(line) < 40)
    rows = [
        f"  {line}\n  {'':{width}}  {what}" if len(line) > width else f"  {line:{width}}  {what}"
        for line, what in EXAMPLES
    ]
    return "examples:\n" + "\n".join(rows)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand, each group registering its own (`rtplan.commands`), its
    help grouped by `SECTIONS`."""
    parser = _GroupedParser(
        prog="rtplan",
        usage="rtplan <command> [options]",
        description=DESCRIPTION,
        epilog=_examples(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # prog and parser_class: each subcommand's usage and help stay those of a plain parser.
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="<command>",
        prog="rtplan",
        parser_class=argparse.ArgumentParser,
    )
    for heading, groups in SECTIONS:
        first = len(sub._get_subactions())
        for group in groups:
            group.register(sub)
        parser.sections.append((heading, sub._get_subactions()[first:]))
    return parser


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    """The subcommands of a command group (`rtplan arena`), or None for a plain command."""
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    use_compile_cache()  # before any jax import, here and in the services started
    exit_with_parent()  # a service `rtplan.processes.Child` started goes when its parent goes
    parser = build_parser()
    if not argv:  # as git does: the commands, grouped, rather than one line of error
        parser.print_help()
        return USAGE
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    chosen, depth = sub.choices.get(argv[0]) if argv else None, 1
    while chosen is not None and depth < len(argv) and (group := _subcommands(chosen)):
        # A command group (`rtplan arena serve`): its subcommand is the one that runs.
        chosen, depth = group.choices.get(argv[depth]), depth + 1
    if chosen is not None and chosen.get_default("forward"):
        # A service parses its own flags: argparse would stop at the first `--flag` here.
        name = " ".join(argv[:depth])
        args = argparse.Namespace(command=name, args=argv[depth:])
        return run_command(name, chosen.get_default("handler"), args)
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
