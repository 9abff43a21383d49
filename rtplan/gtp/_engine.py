"""The GTP engine: the Speed Go game (`_game.GtpGame`) answering GTP commands line by line."""

from __future__ import annotations

import math
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

import numpy as np

from rtplan.games import go
from rtplan.games.go import COLUMNS, PASS, SIZE, vertex_name
from rtplan.gtp._board import DEAD, SEKI, area_score, groups_of, stone_status
from rtplan.gtp._game import GAME_ID, GtpGame
from rtplan.gtp._protocol import (
    COMMANDS,
    NO_POSITION,
    SEARCHES,
    GtpError,
    clean,
    handicap_vertices,
    number,
    parse_colour,
    parse_vertex,
    score_text,
)
from rtplan.gtp._time import Clock, TimeSettings, told_clock


class GtpEngine(GtpGame):
    """A Speed Go game driven by GTP commands; `genmove` runs the planner's options.

    The engine keeps the stack of JAX states (so `undo` pops one) and the move list; komi is an
    input of the compiled functions, so `komi` answers at once. Either colour may move at any
    time, as GTP allows (`GtpGame._ready` hands pgx's move to it without a pass); handicap
    stones are a setup (`GtpGame.setup`). Two passes end pgx's game, but GTP has no game-over
    state: `play` and `genmove` go on from there (GUIs settle dead stones so).

    Start-up (`GtpGame.start`) compiles on a background thread: the commands that need no
    position (`_protocol.NO_POSITION`) answer at once, the position's commands once the step
    is compiled, `genmove` and `rtplan-budget` (`_protocol.SEARCHES`) once the searches are.

    Clocks: the game's clocks count simulations (one tick each). `time_settings`, `time_left`
    and `kgs-time_settings` set the GTP clocks in seconds; before each move they are converted
    to ticks at the measured seconds per simulation and written into the state. The
    proportional time manager plays the largest k whose measured search time fits
    `move_allowance`; the clock gate (`time_manager="gate"`) picks an option from its own
    recurrent state and the clocks in ticks, capped to that same allowance (`GtpGame._choose`).
    A fixed `budget` (for matches at one option) plays option k on every move, whatever the
    clocks say.
    """

    def handle(self, line: str) -> tuple[str | None, bool]:
        """Answers one line of GTP input.

        Returns:
            (the answer with its trailing blank line, or None for a blank or comment line;
            True after `quit`).
        """
        words = clean(line).split()
        if not words:
            return None, False
        ident = ""
        if words[0].isdigit():
            ident, words = words[0], words[1:]
            if not words:
                return f"?{ident} missing command\n\n", False
        name, args = words[0].lower(), words[1:]
        try:
            if name not in COMMANDS:
                raise GtpError("unknown command")
            if name in SEARCHES:
                self.need_planner()
            elif name not in NO_POSITION:
                self.need_game()
            with self.lock:
                text = getattr(self, "_cmd_" + name.replace("-", "_"))(args)
        except GtpError as e:
            return f"?{ident} {e}\n\n", False
        except Exception as e:  # a bug must not end the game for the controller
            self._log("".join(traceback.format_exception(e)).rstrip())
            message = " ".join(str(e).split())  # one line: a blank one would end the answer
            return f"?{ident} internal error: {type(e).__name__}: {message}\n\n", False
        return f"={ident} {text}\n\n" if text else f"={ident}\n\n", name == "quit"

    def serve(self, lines: Iterable[str], out: TextIO) -> int:
        """Answers GTP commands from `lines` on `out` until `quit` or the end of input."""
        for line in lines:
            answer, done = self.handle(line)
            if answer is not None:
                out.write(answer)
                out.flush()
            if done:
                break
        return 0

    @staticmethod
    def _args(args: list[str], n: int, usage: str) -> list[str]:
        if len(args) != n:
            raise GtpError(f"syntax error: expected {usage}")
        return args

    def _cmd_protocol_version(self, args):
        return "2"

    def _cmd_name(self, args):
        return "rtplan"

    def _cmd_version(self, args):
        from rtplan import __version__

        return f"{__version__} ({GAME_ID} planner {Path(self.planner_file).name})"

    def _cmd_known_command(self, args):
        (name,) = self._args(args, 1, "known_command NAME")
        return "true" if name.lower() in COMMANDS else "false"

    def _cmd_list_commands(self, args):
        return "\n".join(COMMANDS)

    def _cmd_quit(self, args):
        return ""

    def _cmd_boardsize(self, args):
        (size,) = self._args(args, 1, "boardsize SIZE")
        if not size.isdigit():
            raise GtpError(f"syntax error: board size must be an integer, got {size!r}")
        if int(size) != SIZE:
            raise GtpError(f"unacceptable size: {GAME_ID} is played on 9x9 only")
        self._clear()
        return ""

    def _cmd_clear_board(self, args):
        self._clear()
        return ""

    def _cmd_komi(self, args):
        (text,) = self._args(args, 1, "komi FLOAT")
        # Komi is an input of the compiled step and searches: nothing to rebuild or compile.
        self.komi = number(text, "komi")
        return ""

    def _handicap_count(self, args) -> int:
        (text,) = self._args(args, 1, "NUMBER_OF_STONES")
        if not text.isdigit():
            raise GtpError(f"syntax error: number of stones must be an integer, got {text!r}")
        return int(text)

    def _cmd_fixed_handicap(self, args):
        vertices = handicap_vertices(self._handicap_count(args))
        self.setup([parse_vertex(v) for v in vertices])
        return " ".join(vertices)

    def _cmd_place_free_handicap(self, args):
        n = self._handicap_count(args)
        if not 2 <= n < SIZE * SIZE:
            raise GtpError("invalid number of stones")
        # The fixed points (the engine's own choice up to 9), then the points nearest the centre.
        vertices = handicap_vertices(min(n, 9))
        rest = sorted(
            (a for a in range(SIZE * SIZE) if vertex_name(a) not in vertices),
            key=lambda a: (abs(a // SIZE - 4) + abs(a % SIZE - 4), a),
        )
        vertices += [vertex_name(a) for a in rest[: n - len(vertices)]]
        self.setup([parse_vertex(v) for v in vertices])
        return " ".join(vertices)

    def _cmd_set_free_handicap(self, args):
        try:
            actions = [parse_vertex(v) for v in args]
        except GtpError as e:
            raise GtpError(f"bad vertex list ({e})") from None
        if len(set(actions)) != len(actions) or PASS in actions or not 2 <= len(actions) < PASS:
            raise GtpError("bad vertex list")
        self.setup(actions)
        return ""

    def _cmd_play(self, args):
        colour_text, vertex = self._args(args, 2, "play COLOR VERTEX")
        colour, action = parse_colour(colour_text), parse_vertex(vertex)
        self._check(colour, action)
        self._apply(colour, action, 0)
        return ""

    def _cmd_genmove(self, args):
        (colour_text,) = self._args(args, 1, "genmove COLOR")
        return self.genmove(parse_colour(colour_text))

    def _cmd_undo(self, args):
        self.undo()
        return ""

    def _board_status(self) -> tuple[np.ndarray, np.ndarray]:
        """(the board `[81]`: +1 black, -1 white; each stone's `_board.stone_status`)."""
        if not self.states:  # start-up has not set the board up yet: it is empty
            board = np.zeros(SIZE * SIZE, np.int32)
        else:
            board = np.sign(go.position(self.states[-1]).stones)
        return board, stone_status(board)

    def _cmd_final_score(self, args):
        # The stones final_status_list calls dead are removed before the area count (seki
        # stones stay, their shared liberties count for neither side).
        board, status = self._board_status()
        black, white = area_score(np.where(status == DEAD, 0, board))
        return score_text(black, white, self.komi)

    def _cmd_final_status_list(self, args):
        (which,) = self._args(args, 1, "final_status_list alive|dead|seki")
        wanted = {"alive": None, "dead": DEAD, "seki": SEKI}
        if which.lower() not in wanted:
            raise GtpError(f"syntax error: status must be alive, dead or seki, got {which!r}")
        board, status = self._board_status()
        code = wanted[which.lower()]
        points = (
            (status != 0) & (status != DEAD) & (status != SEKI)
            if code is None
            else (status == code)
        )
        return "\n".join(" ".join(vertex_name(p) for p in g) for g in groups_of(board, points))

    def _cmd_showboard(self, args):
        letters = "   " + " ".join(COLUMNS)
        rows = [letters]
        for i, row in enumerate(self.board()):
            stones = " ".join(row).replace("x", "X").replace("o", "O")
            rows.append(f"{SIZE - i:2d} {stones} {SIZE - i}")
        rows.append(letters)
        rows.append(f"{'Black' if self.to_play == 0 else 'White'} to play, komi {self.komi:g}")
        return "\n" + "\n".join(rows)

    def _set_time(self, settings: TimeSettings) -> None:
        self.settings = settings
        self.clocks = [settings.fresh(), settings.fresh()]
        if settings.main is not None:
            self.want_ladder()  # a clock to spend: the ladder compiles in the background

    def _cmd_time_settings(self, args):
        args = self._args(args, 3, "time_settings MAIN BYO STONES")
        main, byo, stones = (number(a, w) for a, w in zip(args, ("main", "byo", "stones")))
        if min(main, byo, stones) < 0 or stones != int(stones):
            raise GtpError("syntax error: time settings must be >= 0, stones an integer")
        if byo > 0 and stones == 0:  # GTP: byo-yomi time without stones means no limit
            self._set_time(TimeSettings())
        else:
            self._set_time(TimeSettings(main, byo, int(stones)))
        return ""

    def _cmd_kgs_time_settings(self, args):
        if not args:
            raise GtpError("syntax error: expected kgs-time_settings SYSTEM ...")
        system, rest = args[0].lower(), [number(a, "time") for a in args[1:]]
        if system == "none" and not rest:
            self._set_time(TimeSettings())
        elif system == "absolute" and len(rest) == 1:
            self._set_time(TimeSettings(rest[0]))
        elif system == "byoyomi" and len(rest) == 3:
            # Japanese byo-yomi as Canadian with one stone per period (extra periods unused).
            self._set_time(TimeSettings(rest[0], rest[1], 1))
        elif system == "canadian" and len(rest) == 3:
            self._set_time(TimeSettings(rest[0], rest[1], int(rest[2])))
        else:
            raise GtpError(f"syntax error: unknown time system or arguments {' '.join(args)!r}")
        return ""

    def _cmd_time_left(self, args):
        colour_text, seconds, stones = self._args(args, 3, "time_left COLOR TIME STONES")
        colour = parse_colour(colour_text)
        seconds, stones = number(seconds, "time"), number(stones, "stones")
        if seconds < 0 or stones < 0 or stones != int(stones):
            raise GtpError("syntax error: time and stones must be >= 0, stones an integer")
        self.clocks[colour] = told_clock(self.clocks[colour], Clock(seconds, int(stones)))
        return ""

    def _cmd_rtplan_budget(self, args):
        """Extension: the budget k the next genmove would use (0: the policy-only move)."""
        k, allowance = self.budget()
        return f"{k} {'inf' if math.isinf(allowance) else f'{allowance:.3f}'}"
