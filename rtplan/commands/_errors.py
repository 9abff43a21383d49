"""The one error wrapper of the subcommands: known errors become a one-line message + exit code."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

# Imports no JAX: the parser is built (and this module loaded) before `--devices` sets XLA's flags.
from rtplan.harness.checkpoint import CheckpointError

#: A subcommand's handler: the parsed arguments -> the process exit code.
Handler = Callable[[argparse.Namespace], int]

#: Exit code of a refused command (bad input: unknown game, missing or wrong checkpoint, bad
#: value), as argparse uses for bad flags.
USAGE = 2
#: Exit code of a command that ran and failed (a mismatch, a service that did not start).
FAILED = 1


class CommandError(Exception):
    """A command's refusal or failure, reported as `rtplan <command>: error: <message>`.

    Args:
        message: one line that says what is wrong and, where it helps, what to pass instead.
        code: the exit code (`USAGE` unless the command ran and failed: `FAILED`).
    """

    def __init__(self, message: str, code: int = USAGE) -> None:
        super().__init__(message)
        self.code = code


#: Errors a command's input can cause (an unknown game is a `ValueError`, a missing file an
#: `OSError`): reported in one line with exit code `USAGE`. Anything else is a bug and keeps its
#: traceback, and so do these with RTPLAN_TRACEBACK=1 (to debug a ValueError from deep inside).
KNOWN = (CheckpointError, ValueError, OSError)
TRACEBACK_ENV = "RTPLAN_TRACEBACK"


def run_command(name: str, handler: Handler, args: argparse.Namespace) -> int:
    """Runs `handler(args)`; a `CommandError` or a known error prints one line on stderr.

    Returns:
        The handler's exit code, or the error's (`USAGE` for the known errors).
    """
    try:
        return handler(args)
    except CommandError as e:
        print(f"rtplan {name}: error: {e}", file=sys.stderr)  # as written (a log's tail too)
        return e.code
    except KNOWN as e:
        if os.environ.get(TRACEBACK_ENV, "") not in ("", "0"):
            raise
        _print(name, e)
        return USAGE


def _print(name: str, error: Exception) -> None:
    # A message that wraps (a long path, a pydantic list) still prints as one line.
    message = " ".join(str(error).split()) or type(error).__name__
    print(f"rtplan {name}: error: {message}", file=sys.stderr)
