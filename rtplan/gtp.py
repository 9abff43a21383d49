"""`rtplan gtp`: Speed Go's planner as a GTP v2 engine on stdin/stdout (Sabaki, GoGui, GNU Go)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple, TextIO

from games import go
from games.go import COLUMNS, PASS, SIZE, vertex_name

GAME_ID = go.SpeedGo.id
#: pgx ends a 9x9 game after 2 * 81 plies (see `games.go.SpeedGo`).
MAX_PLIES = 2 * SIZE * SIZE
#: The proportional time manager spends this fraction of its per-move share of the clock ...
SAFETY = 0.8
#: ... less this lag per move (GTP round trip, Python, the GUI), in seconds.
LAG_S = 0.05
#: It expects at least this many more moves of its own, however late the game.
MIN_MOVES_LEFT = 5

COMMANDS = (
    "protocol_version",
    "name",
    "version",
    "known_command",
    "list_commands",
    "boardsize",
    "clear_board",
    "komi",
    "play",
    "genmove",
    "undo",
    "final_score",
    "showboard",
    "time_settings",
    "time_left",
    "kgs-time_settings",
    "rtplan-budget",
    "quit",
)


class GtpError(Exception):
    """A command failed; its message is the `? message` answer."""


# ---- Parsing ------------------------------------------------------------------------------


def parse_colour(text: str) -> int:
    """0 for black ("b", "black"), 1 for white ("w", "white"), any case."""
    colour = {"b": 0, "black": 0, "w": 1, "white": 1}.get(text.lower())
    if colour is None:
        raise GtpError(f"invalid color {text!r}")
    return colour


def parse_vertex(text: str) -> int:
    """pgx's action of a GTP vertex (`games.go.parse_vertex`), failing as a GTP error."""
    try:
        return go.parse_vertex(text)
    except ValueError as e:
        raise GtpError(str(e)) from None


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise GtpError(f"syntax error: {what} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise GtpError(f"syntax error: {what} must be finite, got {text!r}")
    return value


def _clean(line: str) -> str:
    """A command line as GTP reads it: no comment, no control characters, tabs as spaces."""
    line = line.split("#", 1)[0].replace("\t", " ")
    return "".join(c for c in line if c >= " " and c != "\x7f").strip()


# ---- Scoring ------------------------------------------------------------------------------


def score_text(black: float, white: float, komi: float) -> str:
    """GTP's final_score: "B+x", "W+x" or "0" (x = the margin after komi)."""
    margin = black - white - komi
    if margin == 0:
        return "0"
    return f"{'B' if margin > 0 else 'W'}+{abs(margin):g}"


# ---- Time ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Clock:
    """One colour's GTP clock (Canadian byo-yomi, as `time_settings` and `time_left` give it).

    `stones == 0`: main time, `remaining` seconds of it; `stones > 0`: in byo-yomi, `remaining`
    seconds for `stones` more moves. `remaining` None means no time limit.
    """

    remaining: float | None = None
    stones: int = 0


@dataclasses.dataclass(frozen=True)
class TimeSettings:
    """GTP time settings in seconds; `main` None means no time limit."""

    #: Main time in seconds (None: no time limit).
    main: float | None = None
    #: Byo-yomi period in seconds (0: absolute time).
    byo_time: float = 0.0
    #: Moves per byo-yomi period.
    byo_stones: int = 0

    def fresh(self) -> Clock:
        """A clock at the start of a game."""
        if self.main is None:
            return Clock()
        if self.main <= 0 and self.byo_stones > 0:
            return Clock(self.byo_time, self.byo_stones)
        return Clock(self.main, 0)

    def spend(self, clock: Clock, seconds: float) -> Clock:
        """The clock after a move that took `seconds` (when the controller sends no time_left)."""
        if clock.remaining is None:
            return clock
        left = clock.remaining - seconds
        if clock.stones == 0:
            if left > 0 or self.byo_stones == 0:
                return Clock(max(left, 0.0), 0)
            return Clock(max(self.byo_time + left, 0.0), self.byo_stones)  # into byo-yomi
        if clock.stones > 1:
            return Clock(max(left, 0.0), clock.stones - 1)
        return Clock(self.byo_time, self.byo_stones)  # a new period


def move_allowance(settings: TimeSettings, clock: Clock, ply: int) -> float:
    """Seconds the proportional time manager gives the next move (inf with no time limit).

    In main time: the remaining time over the moves expected to be left (our share of the plies
    pgx allows), but at least a byo-yomi period's share per stone when there is byo-yomi. In
    byo-yomi: the period's remaining time over its remaining stones. Then `SAFETY` of that, less
    `LAG_S`.
    """
    if clock.remaining is None:
        return math.inf
    if clock.stones > 0:
        share = clock.remaining / clock.stones
    else:
        moves_left = max(MIN_MOVES_LEFT, (MAX_PLIES - ply + 1) // 2)
        share = clock.remaining / moves_left
        if settings.byo_stones > 0:
            share = max(share, settings.byo_time / settings.byo_stones)
    return max(SAFETY * share - LAG_S, 0.0)


def choose_budget(
    budgets: Iterable[int], search_s: Callable[[int], float], allowance_s: float
) -> int:
    """The largest budget k whose search time fits the move's allowance; 0 (the policy-only
    reflex move) if none does.

    Args:
        budgets: the planner's budgets k.
        search_s: k -> the option's measured (or estimated) search time in seconds.
        allowance_s: seconds for this move (`move_allowance`).
    """
    fits = [k for k in budgets if search_s(k) <= allowance_s]
    return max(fits) if fits else 0


# ---- Engine -------------------------------------------------------------------------------


class _Compiled(NamedTuple):
    game: object
    init: Callable
    step: Callable
    options: object  # planner.compiled.CompiledOptions: the value (reflex move) and options


class GtpEngine:
    """A Speed Go game driven by GTP commands; `genmove` runs the planner's options.

    The engine keeps the stack of JAX states (so `undo` pops one) and the move list (so `komi`
    rebuilds the game with the new komi and replays it). Colours must alternate, black first:
    pgx derives the side to move from the ply count, so `play` or `genmove` for the other colour
    is refused (`? cannot play out of turn`); handicap stones are not supported. A finished game
    (two passes, or pgx's ply cap) accepts no more moves until `undo` or `clear_board`.

    Clocks: the game's clocks count simulations (one tick each). `time_settings`, `time_left`
    and `kgs-time_settings` set the GTP clocks in seconds; before each move they are converted
    to ticks at the measured seconds per simulation and written into the state, and the budget
    is the largest k whose measured search time fits `move_allowance`. A fixed `budget` (for
    matches at one option) plays option k on every move, whatever the clocks say.
    """

    def __init__(
        self,
        planner_file: str | Path,
        *,
        seed: int = 0,
        resign_below: float | None = None,
        budget: int | None = None,
        log: TextIO | None = None,
    ) -> None:
        import jax

        from planner.store import load_planner

        self._log_to = log
        self.planner_file = str(planner_file)
        self.config, self.params, _ = load_planner(GAME_ID, self.planner_file)
        if budget is not None and budget not in self.config.budgets:
            raise ValueError(f"budget {budget} is not one of the planner's {self.config.budgets}")
        #: The option every genmove plays (None: the time manager chooses).
        self.fixed_budget = budget
        self.seed = seed
        self.resign_below = resign_below
        self.komi = 7.5
        self.settings = TimeSettings()
        self.clocks = [Clock(), Clock()]
        self.search_s: dict[int, float] = {}
        self._key = jax.random.PRNGKey(seed)
        self._clear()

    # ---- JAX side ------------------------------------------------------------------------

    @functools.cache  # noqa: B019 (one engine per process; the cache holds the compiled fns)
    def _fns(self, komi: float) -> _Compiled:
        """The game with this komi, its planner and their jitted functions (once per komi)."""
        import jax

        import games
        from planner import Planner
        from planner.compiled import CompiledOptions

        params = {
            **dict(self.config.game_params),
            "initial_time": games.UNLIMITED_CLOCK,
            "timeout": "reflex",
            "komi": komi,
        }
        game = games.make(GAME_ID, **params)
        planner = Planner(self.config, game=game)
        return _Compiled(
            game=game,
            init=jax.jit(game.init),
            step=jax.jit(game.step),
            options=CompiledOptions(planner, self.params),
        )

    def warm_up(self) -> None:
        """Compiles the step, the reflex move and every budget's option, and measures each
        option's time (the median of three)."""
        state = self.states[0]
        self._step(state, 0, 0)
        self._search(state, 0)
        options = self._fns(self.komi).options
        for k in self.config.budgets if self.fixed_budget is None else (self.fixed_budget,):
            self.search_s[k] = options.measure(k, state)
        self._log(
            "search times: "
            + ", ".join(f"k={k} {1e3 * s:.1f} ms" for k, s in self.search_s.items())
        )

    def _step(self, state, action: int, cost: int):
        import jax.numpy as jnp

        return self._fns(self.komi).step(state, jnp.int32(action), jnp.int32(cost))

    def _search(self, state, k: int) -> tuple[int, float]:
        """(action, value) of option k from `state`; k = 0 is the policy-only reflex move.

        The value is the search's root value (the network's for k = 0), for the player to move.
        """
        import jax

        options = self._fns(self.komi).options
        states = jax.tree.map(lambda x: x[None], state)
        if k == 0:
            out = options.evaluate(states)
            return int(out.reflex[0]), float(out.value[0])
        key = jax.random.fold_in(self._key, len(self.moves))
        out = options.option(k, key[None], states)
        return int(out.actions[0, 0]), float(out.search_value[0])

    def _clear(self) -> None:
        """An empty board; the clocks start again."""
        self._clear_board()
        self.clocks = [self.settings.fresh(), self.settings.fresh()]

    def _clear_board(self) -> None:
        import jax

        self.states = [self._fns(self.komi).init(jax.random.PRNGKey(self.seed))]
        self.moves: list[int] = []
        # Black moves first; pgx draws which player id that is.
        self.black_id = int(self.states[0].current_player)

    def _replay(self) -> None:
        """Plays the move list again on a fresh board (after the game was rebuilt)."""
        moves = self.moves
        self._clear_board()
        for action in moves:
            self._apply(action, 0)

    # ---- Game --------------------------------------------------------------------------------

    @property
    def to_play(self) -> int:
        """The colour to move: 0 black, 1 white (black moves first; colours alternate)."""
        return len(self.moves) % 2

    @property
    def over(self) -> bool:
        return bool(self.states[-1].terminated)

    def board(self) -> list[str]:
        """9 rows, top first: "x" black, "o" white, "." empty."""
        from games.render import render

        return render(self._fns(self.komi).game, self.states[-1])["board"]

    def _with_clocks(self, state):
        """`state` with both GTP clocks written into the game's clocks, in ticks."""
        import jax.numpy as jnp

        import games

        per_tick = self._seconds_per_tick()
        ticks = []
        for colour in (0, 1):
            remaining = self.clocks[colour].remaining
            # A fixed budget keeps the game's clocks full: an empty one would force the reflex.
            if remaining is None or per_tick <= 0 or self.fixed_budget is not None:
                ticks.append(games.UNLIMITED_CLOCK)
            else:
                ticks.append(min(int(remaining / per_tick), games.UNLIMITED_CLOCK))
        by_id = ticks if self.black_id == 0 else ticks[::-1]
        return state.replace(inner=state.inner.replace(clocks=jnp.asarray(by_id, jnp.int32)))

    def _seconds_per_tick(self) -> float:
        """Measured seconds per simulation (the slowest budget's ratio; 0 before warm_up)."""
        return max(
            (s / self.config.sims(k) for k, s in self.search_s.items()),
            default=0.0,
        )

    def _check(self, colour: int, action: int) -> None:
        """Raises GtpError unless `colour` may play `action` now."""
        if self.over:
            raise GtpError("game is over (undo or clear_board to go on)")
        if colour != self.to_play:
            raise GtpError("cannot play out of turn")
        state = self.states[-1]
        if action != PASS:
            if not bool(state.legal_action_mask[action]):
                raise GtpError("illegal move")
            nxt = self._step(state, action, 0)
            # A board move that ends the game before pgx's ply cap repeats a position (pgx's
            # positional superko, which would lose the game for the mover).
            if bool(nxt.terminated) and int(nxt.frame) < MAX_PLIES:
                raise GtpError("illegal move (repeats an earlier position: positional superko)")

    def _apply(self, action: int, cost: int) -> None:
        state = self._with_clocks(self.states[-1])
        self.states.append(self._step(state, action, cost))
        self.moves.append(action)

    def budget(self) -> tuple[int, float]:
        """(budget k for the side to move, its allowance in seconds); k = 0 is the reflex move."""
        colour = self.to_play
        allowance = move_allowance(self.settings, self.clocks[colour], len(self.moves))
        if self.fixed_budget is not None:
            return self.fixed_budget, allowance
        if math.isinf(allowance) or not self.search_s:
            return max(self.config.budgets), allowance
        return choose_budget(self.config.budgets, self.search_s.__getitem__, allowance), allowance

    def genmove(self, colour: int) -> str:
        """Plans and plays a move for `colour`; returns its vertex, "pass" or "resign"."""
        if self.over:
            return "pass"
        if colour != self.to_play:
            raise GtpError("cannot play out of turn")
        start = time.perf_counter()
        k, allowance = self.budget()
        state = self._with_clocks(self.states[-1])
        action, value = self._search(state, k)
        took = time.perf_counter() - start
        if k:
            # Measured times feed the next choices (a running average with the warm-up's).
            self.search_s[k] = 0.7 * self.search_s.get(k, took) + 0.3 * took
        self.clocks[colour] = self.settings.spend(self.clocks[colour], took)
        if self.resign_below is not None and value < self.resign_below:
            self._log(f"genmove {'BW'[colour]}: resign (value {value:.2f})")
            return "resign"
        try:
            self._check(colour, action)
        except GtpError:
            action = PASS  # the search picked a superko repetition: pass instead
        self._apply(action, self.config.sims(k) if k else 0)
        self._log(
            f"genmove {'BW'[colour]}: {vertex_name(action)} k={k} "
            f"({self.config.sims(k) if k else 0} simulations) in {1e3 * took:.0f} ms, "
            f"allowance {allowance:.3g} s, value {value:+.2f}"
        )
        return vertex_name(action)

    def _log(self, text: str) -> None:
        if self._log_to is not None:
            print(f"rtplan gtp: {text}", file=self._log_to, flush=True)

    # ---- Commands ----------------------------------------------------------------------------

    def handle(self, line: str) -> tuple[str | None, bool]:
        """Answers one line of GTP input.

        Returns:
            (the answer with its trailing blank line, or None for a blank or comment line;
            True after `quit`).
        """
        words = _clean(line).split()
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
        komi = _number(text, "komi")
        if komi != self.komi:
            self.komi = komi
            self._replay()  # the same moves on a game built with the new komi
            if self.search_s:
                # Compile the searches with the new komi now, before a genmove's clock runs.
                self.warm_up()
        return ""

    def _cmd_play(self, args):
        colour_text, vertex = self._args(args, 2, "play COLOR VERTEX")
        colour, action = parse_colour(colour_text), parse_vertex(vertex)
        self._check(colour, action)
        self._apply(action, 0)
        return ""

    def _cmd_genmove(self, args):
        (colour_text,) = self._args(args, 1, "genmove COLOR")
        return self.genmove(parse_colour(colour_text))

    def _cmd_undo(self, args):
        if not self.moves:
            raise GtpError("cannot undo")
        self.states.pop()
        self.moves.pop()
        return ""

    def _cmd_final_score(self, args):
        import jax
        from pgx._src.games.go import _count_scores  # pgx's own area count (pgx is pinned)

        scores = jax.device_get(_count_scores(self.states[-1].inner.board._x, SIZE))
        black, white = (float(x) for x in scores)  # pgx's colour 1 (black) first
        return score_text(black, white, self.komi)

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

    def _cmd_time_settings(self, args):
        args = self._args(args, 3, "time_settings MAIN BYO STONES")
        main, byo, stones = (_number(a, w) for a, w in zip(args, ("main", "byo", "stones")))
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
        system, rest = args[0].lower(), [_number(a, "time") for a in args[1:]]
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
        seconds, stones = _number(seconds, "time"), _number(stones, "stones")
        if seconds < 0 or stones < 0 or stones != int(stones):
            raise GtpError("syntax error: time and stones must be >= 0, stones an integer")
        self.clocks[colour] = Clock(seconds, int(stones))
        return ""

    def _cmd_rtplan_budget(self, args):
        """Extension: the budget k the next genmove would use (0: the policy-only move)."""
        k, allowance = self.budget()
        return f"{k} {'inf' if math.isinf(allowance) else f'{allowance:.3f}'}"


def run(
    planner_file: str | Path,
    *,
    seed: int = 0,
    resign_below: float | None = None,
    budget: int | None = None,
) -> int:
    """Runs the engine on stdin/stdout; logs go to stderr (so does anything else printed).

    `budget`: play this option on every move (None: the time manager picks per move).
    """
    out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        engine = GtpEngine(
            planner_file, seed=seed, resign_below=resign_below, budget=budget, log=sys.stderr
        )
        engine.warm_up()
        return engine.serve(sys.stdin, out)
