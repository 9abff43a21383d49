"""The `rtplan` subcommands: one module per command group, each registering its own."""

from rtplan.commands import (
    arena,
    deploy,
    evaluation,
    gtp,
    health,
    play,
    replays,
    services,
    training,
)
from rtplan.commands._errors import FAILED, KNOWN, USAGE, CommandError, run_command

#: The command groups under their `rtplan --help` headings, in that order (git's and kubectl's
#: grouped help); each group has `register(subparsers)`.
SECTIONS = (
    ("play and watch", (play,)),
    ("serve", (services, health, arena)),
    ("train and evaluate", (training, evaluation, deploy)),
    ("tools", (gtp, replays)),
)

__all__ = ["FAILED", "KNOWN", "SECTIONS", "USAGE", "CommandError", "run_command"]
