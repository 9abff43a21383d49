"""A GTP engine in a subprocess, and the referee's player over it."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from bench.match._clock import Clock, TimeControl
from bench.match._referee import Refused


class GtpProcess:
    """A GTP engine in a subprocess, one command and one answer at a time."""

    def __init__(self, argv: Sequence[str], *, name: str, stderr=subprocess.DEVNULL) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            [str(a) for a in argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            bufsize=1,
        )

    def send(self, command: str) -> str:
        """The answer's text (without "= "); raises Refused on a `? message` answer."""
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        lines = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.name} exited (code {self.proc.poll()}) on {command!r}")
            if not line.strip():
                if lines:
                    break
                continue  # blank lines before an answer
            lines.append(line.rstrip("\n"))
        text = "\n".join(lines)
        if text.startswith("?"):
            raise Refused(f"{self.name}: {command!r} -> {text[1:].strip()!r}")
        if not text.startswith("="):
            raise RuntimeError(f"{self.name}: {command!r} -> not a GTP answer: {text!r}")
        return text[1:].strip()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.proc.wait(timeout=30)
            except (OSError, RuntimeError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> GtpProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class GtpPlayer:
    """A `Player` over a GTP engine; moves are lower-case GTP vertices or "pass"."""

    def __init__(self, engine: GtpProcess) -> None:
        self.engine = engine

    def new_game(self) -> None:
        self.engine.send("clear_board")

    def play(self, colour: int, move: str) -> None:
        self.engine.send(f"play {'bw'[colour]} {move}")

    def genmove(self, colour: int) -> str:
        return self.engine.send(f"genmove {'bw'[colour]}").lower()

    def over(self) -> bool:
        return False

    def time_settings(self, control: TimeControl) -> None:
        self.engine.send(f"time_settings {control.gtp}")

    def time_left(self, colour: int, clock: Clock) -> None:
        self.engine.send(f"time_left {'bw'[colour]} {clock.gtp}")


class RtplanPlayer(GtpPlayer):
    """`rtplan gtp` as a `Player` that also notes, off the clock, the budget k its time manager
    gives each timed move (the `rtplan-budget` extension, asked after `time_left`: it changes
    nothing, and the genmove that follows plays that k)."""

    def __init__(self, engine: GtpProcess) -> None:
        super().__init__(engine)
        #: This game's budgets, one per timed genmove (0: the policy-only move).
        self.budgets: list[int] = []

    def new_game(self) -> None:
        super().new_game()
        self.budgets = []

    def time_left(self, colour: int, clock: Clock) -> None:
        super().time_left(colour, clock)
        self.budgets.append(int(self.engine.send("rtplan-budget").split()[0]))
