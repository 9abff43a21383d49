"""The `rtplan` subcommands: one module per command group, each registering its own."""

from rtplan.commands import deploy, evaluation, gtp, health, play, replays, services, training
from rtplan.commands._errors import FAILED, KNOWN, USAGE, CommandError, run_command

#: The command groups, in `rtplan --help` order; each has `register(subparsers)`.
GROUPS = (play, training, evaluation, deploy, services, health, gtp, replays)

__all__ = ["FAILED", "GROUPS", "KNOWN", "USAGE", "CommandError", "run_command"]
