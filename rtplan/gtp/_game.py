"""One Speed Go game as the GTP engine plays it: JAX states, moves, clocks, the planner's moves.

`GtpGame` keeps the position stack, both clocks and the clock gate's per-colour states in step
(undo pops all three together), and its time managers, move guards and background start-up
(the warm-up and the anytime ladder, which set up and time what they read) touch all of them,
so it stays one file past ~450 lines; the pure rules live beside it (`_time.py`, `_gate.py`,
`_board.py`: eyes, dead stones, the capture before passing), and Go's position edits (the
colour to move, the superko record, komi as an input) in `games.go`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple, TextIO

import numpy as np

from rtplan.games import go
from rtplan.games.go import PASS, vertex_name
from rtplan.gtp._board import capture_move, dead_stones, mover_margin, own_eye, self_atari
from rtplan.gtp._gate import TIME_MANAGERS, GateManager
from rtplan.gtp._protocol import GtpError
from rtplan.gtp._time import (
    LAG_S,
    MAX_PLIES,
    Clock,
    SearchTimes,
    TimeSettings,
    capped_budget,
    choose_budget,
    gate_initial_seconds,
    gate_seconds,
    ladder,
    move_allowance,
    to_ticks,
)
from rtplan.harness.checkpoint import gate_file
from rtplan.planner.compiled import CompiledOptions

GAME_ID = go.SpeedGo.id
#: `GtpGame.moves`' entry for a setup (handicap stones placed at once).
SETUP = -1
#: pgx ends a 9x9 game at ply 162 (`MAX_PLIES`). Once its ply count reaches this, the engine
#: starts pgx's state afresh from the position, ...
REBASE_AT = MAX_PLIES - 42
#: ... keeping the superko hashes of the last this many positions (a repetition of an older
#: position is then allowed: such long cycles are practically unknown in real games). The 42
#: plies left before the cap stay beyond what a search of <= 96 simulations looks ahead.
CARRY = 40
#: After the opponent's pass, a search value below this (the mover's, in [-1, 1]) is a lost
#: game: the engine passes too rather than play on inside its own area.
LOST_VALUE = -0.9


#: A move that leaves at least this many of the mover's stones with one liberty is never
#: played (`_board.self_atari`): a sacrifice of that size is not a tactic but a lost group.
BIG_SELF_ATARI = 6


def _unsafe(mine: np.ndarray, point: int) -> bool:
    """A board move the policy's pass is never replaced by: an own eye or a self-atari."""
    return own_eye(mine, point) or self_atari(mine, point) > 0


class TimeChoice(NamedTuple):
    """What the time manager chose for one move."""

    k: int  # the budget searched (0: the policy-only move)
    allowance: float  # the proportional allowance in seconds (inf: no time limit)
    option: int | None = None  # the clock gate's own option (None: the gate was not asked)
    ticks: tuple[int, int, int] | None = None  # the gate's (own, opponent's, T0) clocks in ticks


class _Compiled(NamedTuple):
    game: object
    planner: object  # the planner as trained (its budgets: the clock gate's options)
    init: Callable
    step: Callable
    reposition: Callable  # `go.SpeedGo.reposition`: ply count, superko record and ko replaced
    options: CompiledOptions  # the value (reflex move) and options, komi an input
    serve: Callable  # (state, komi) -> `SpeedGo.served_state`: what a move is chosen from


class _KomiOptions(CompiledOptions):
    """`CompiledOptions` whose executables take the current komi as their first input."""

    def __init__(self, planner, params, game, komi: Callable[[], float]) -> None:
        super().__init__(planner, params)
        self._game = game
        self._komi = komi

    def _fn(self, kind: str, k: int) -> tuple[Callable, tuple]:
        fn, lead = super()._fn(kind, k)
        game = self._game

        def with_komi(komi, *args):
            with game.traced_komi(komi):
                return fn(*args)

        return with_komi, (np.float32(self._komi()), *lead)


class GtpGame:
    """The game state and moves of `GtpEngine` (the GTP commands are its subclass's).

    See `GtpEngine` for the rules it keeps (either colour moving, undo, komi, clocks).
    """

    def __init__(
        self,
        planner_file: str | Path,
        *,
        seed: int = 0,
        resign_below: float | None = None,
        budget: int | None = None,
        time_manager: str = "proportional",
        clock_gate: str | Path | None = None,
        max_simulations: int | None = None,
        log: TextIO | None = None,
    ) -> None:
        """`max_simulations`: the anytime ladder's largest rung (`_time.ladder`; None: 16 times
        the planner's largest search, 0: no ladder)."""
        import jax

        from rtplan.planner.store import load_planner

        self._log_to = log
        self.planner_file = str(planner_file)
        self.config, self.params, _ = load_planner(GAME_ID, self.planner_file)
        if budget is not None and budget not in self.config.budgets:
            raise ValueError(f"budget {budget} is not one of the planner's {self.config.budgets}")
        if time_manager not in TIME_MANAGERS:
            raise ValueError(f"time manager must be one of {TIME_MANAGERS}, not {time_manager!r}")
        if budget is not None and time_manager == "gate":
            raise ValueError("--budget plays one option on every move: no time manager with it")
        #: The option every genmove plays (None: the time manager chooses).
        self.fixed_budget = budget
        #: The anytime ladder: budgets past the planner's own (k = their simulations), compiled
        #: and timed in the background once a clock is set (`want_ladder`); a rung is played
        #: once it is timed. Empty with a fixed budget, and under the clock gate (its options
        #: are the planner's budgets).
        top = max(self.config.simulations)
        reach = 16 * top if max_simulations is None else max_simulations
        fixed = budget is not None or time_manager == "gate"
        rungs = () if fixed else ladder(top, reach)
        self.ladder = tuple(r for r in rungs if r > max(self.config.budgets))
        #: The planner's config with the ladder's rungs as budgets (the searches run it).
        self.search_config = dataclasses.replace(
            self.config,
            budgets=(*self.config.budgets, *self.ladder),
            simulations=(*self.config.simulations, *self.ladder),
        )
        self.ladder_ready = threading.Event()
        self._ladder: threading.Thread | None = None
        self._stopping = threading.Event()
        self.seed = seed
        self.resign_below = resign_below
        self.komi = 7.5
        self.settings = TimeSettings()
        self.clocks = [Clock(), Clock()]
        self.search_s = SearchTimes(self.search_config.sims)
        #: Seconds per tick (one simulation) of the clock gate's inputs: `_seconds_per_tick` at
        #: the end of `warm_up`, then fixed (0 before it).
        self.tick_s = 0.0
        self._key = jax.random.PRNGKey(seed)
        #: The clock gate when it manages the time (None: the proportional manager).
        self.gate: GateManager | None = None
        if time_manager == "gate":
            path = gate_file(GAME_ID, clock_gate, beside=planner_file, required=False)
            self.gate = GateManager(
                path, self._fns.planner, self.params, planner_file=self.planner_file
            )
        #: The time manager's choice for the last genmove.
        self.last_choice: TimeChoice | None = None
        # The position stack (`_clear_board`) is set up once the step is compiled: by `start`'s
        # thread, by `warm_up`, or on the first command that needs it (`need_game`).
        self.states: list = []
        self.moves: list[int] = []
        self.movers: list[int] = []
        self.gate_states: list[tuple] = []
        # Start-up in the background (`start`): commands run under `lock`; those that need the
        # position wait for `game_ready`, those that need the searches for `planner_ready`.
        self.lock = threading.RLock()
        self.game_ready = threading.Event()
        self.planner_ready = threading.Event()
        self._warming: threading.Thread | None = None
        self._warm_error: BaseException | None = None

    @functools.cached_property
    def _fns(self) -> _Compiled:
        """The game, its planner and their jitted functions, compiled once: komi is an input."""
        import jax

        from rtplan import games
        from rtplan.planner import Planner

        params = {
            **dict(self.config.game_params),
            "initial_time": games.UNLIMITED_CLOCK,
            "timeout": "reflex",
        }
        game = games.make(GAME_ID, **params)
        planner = Planner(self.search_config, game=game)

        def step(state, action, cost, komi):
            with game.traced_komi(komi):
                return game.step(state, action, cost)

        def serve(state, komi):
            with game.traced_komi(komi):
                return game.served_state(state)

        return _Compiled(
            game=game,
            planner=Planner(self.config, game=game),
            init=jax.jit(game.init),
            step=jax.jit(step),
            reposition=jax.jit(game.reposition),
            options=_KomiOptions(planner, self.params, game, lambda: self.komi),
            serve=jax.jit(serve),
        )

    def start(self) -> None:
        """Warms up (`warm_up`) on a background thread and returns at once: the commands that
        need no position answer meanwhile, the others wait (`need_game`, `need_planner`)."""
        self._warming = threading.Thread(target=self._warm_in_background, daemon=True)
        self._warming.start()

    def _warm_in_background(self) -> None:
        try:
            self.warm_up()
        except BaseException as e:  # the waiting commands report it
            self._warm_error = e
            self._log(f"start-up failed: {type(e).__name__}: {e}")
            self.game_ready.set()
            self.planner_ready.set()

    def need_game(self) -> None:
        """Returns once the position stack exists: at once when `start` is not running (the
        step compiles here, on first use), else when its thread has set it up.

        Raises:
            GtpError: the start-up failed.
        """
        if self._warming is None:
            with self.lock:
                if not self.states:
                    self._clear_board()
            return
        self._wait(self.game_ready)

    def need_planner(self) -> None:
        """Returns once the searches are compiled and timed (at once when `start` is not
        running: they then compile on first use)."""
        self.need_game()
        if self._warming is not None:
            self._wait(self.planner_ready)

    def want_ladder(self) -> None:
        """Compiles and times the ladder's rungs on a background thread (once; after the
        start-up's searches), smallest first: each rung can be played once it is timed
        (`budgets`). Called when a clock is set: with no time limit the planner's largest
        budget plays, and no rung is needed."""
        if self._ladder is not None or not self.ladder:
            return
        self._ladder = threading.Thread(target=self._warm_ladder, daemon=True)
        self._ladder.start()

    def _warm_ladder(self) -> None:
        import jax

        try:
            if self._warming is not None:
                self.planner_ready.wait()
            state = self._fns.init(jax.random.PRNGKey(self.seed))
            for k in self.ladder:
                if self._stopping.is_set():
                    break
                # Compiled, not run: a rung's timing search held the device for up to 7 s while
                # a move waited (a flag fell under 10 s of sudden death). Its first real move
                # times it (`SearchTimes`).
                start = time.perf_counter()
                self._fns.options.compile_option(k, state)
                with self.lock:
                    self.search_s.compiled(k)
                    guess = self.search_s[k]
                self._log(
                    f"ladder: k={k} compiled in {time.perf_counter() - start:.1f} s "
                    f"(estimated {1e3 * guess:.1f} ms until played)"
                )
        except Exception as e:  # the planner's own budgets still play
            self._log(f"ladder failed: {type(e).__name__}: {e}")
        finally:
            self.ladder_ready.set()

    def stop(self, timeout: float) -> bool:
        """Asks the background threads to stop after their current compile and waits up to
        `timeout` seconds for them; True when none is left running (a process that exits
        while XLA compiles on another thread can abort)."""
        self._stopping.set()
        deadline = time.monotonic() + timeout
        for thread in (self._warming, self._ladder):
            if thread is not None:
                thread.join(max(deadline - time.monotonic(), 0.0))
        return not any(t is not None and t.is_alive() for t in (self._warming, self._ladder))

    @property
    def budgets(self) -> tuple[int, ...]:
        """The budgets the proportional manager may play: the planner's, then the ladder's
        rungs timed so far."""
        return (*self.config.budgets, *(k for k in self.ladder if k in self.search_s))

    def _wait(self, event: threading.Event) -> None:
        event.wait()
        if self._warm_error is not None:
            error = self._warm_error
            raise GtpError(f"start-up failed: {type(error).__name__}: {error}")

    def warm_up(self) -> None:
        """Compiles the step (then sets up the board: `game_ready`), the reflex move, every
        budget's option and the clock gate's step, measures each option's time (the median of
        three), then rehearses one move (`_rehearse`; `planner_ready`). The position's commands
        may run meanwhile on another thread: what touches them holds `lock`."""
        import jax

        start = time.perf_counter()
        state = self._fns.init(jax.random.PRNGKey(self.seed))
        self._step(state, 0, 0)
        self._ready(state, 1)  # a colour out of turn: pgx's position set up again
        with self.lock:
            if not self.states:
                self._clear_board()
        self.game_ready.set()
        self._log(f"board ready in {time.perf_counter() - start:.1f} s")
        self._search(state, 0)
        options = self._fns.options
        for k in self.config.budgets if self.fixed_budget is None else (self.fixed_budget,):
            if self._stopping.is_set():  # quit during start-up (a GUI probing the engine)
                return
            self.search_s.measured(k, options.measure(k, state))
        self._log(
            "search times: "
            + ", ".join(f"k={k} {1e3 * s:.1f} ms" for k, s in self.search_s.items())
        )
        self.tick_s = self._seconds_per_tick()
        if self.gate is not None:
            carry = self.gate.zero()
            self.gate.decide(carry, state)  # compiled here, not on the first move
            start = time.perf_counter()
            self.gate.decide(carry, state)
            self._log(
                f"clock gate {self.gate.path}: one step {1e3 * (time.perf_counter() - start):.1f}"
                f" ms; its clocks in ticks of {1e3 * self.tick_s:.3f} ms"
            )
        with self.lock:
            self._rehearse()
        self.planner_ready.set()
        self._log("ready")

    def _rehearse(self) -> None:
        """Plays one genmove under a time limit, unlogged, and takes it all back
        (board, clocks, measured times): the small JAX operations around the search (the clock
        arithmetic, the key folding) compile here. The first real move once took 0.6 s for
        them, and its time then inflated the running average of the search times."""
        saved = (self.settings, self.clocks, self.search_s.copy(), self._log_to)
        game = (list(self.states), list(self.moves), list(self.movers), list(self.gate_states))
        self.settings, self._log_to = TimeSettings(main=3600.0), None
        self.clocks = [self.settings.fresh(), self.settings.fresh()]
        try:
            self.genmove(self.to_play)
        finally:
            self.settings, self.clocks, self.search_s, self._log_to = saved
            self.states, self.moves, self.movers, self.gate_states = game
            self.last_choice = None

    def _step(self, state, action: int, cost: int):
        import jax.numpy as jnp

        return self._fns.step(state, jnp.int32(action), jnp.int32(cost), jnp.float32(self.komi))

    def _search(self, state, k: int) -> tuple[int, float, np.ndarray | None]:
        """(action, value, root visit counts `[82]`) of option k from `state`; k = 0 is the
        policy-only reflex move (visits None).

        The value is the search's root value (the network's for k = 0), for the player to move.
        """
        import jax

        options = self._fns.options
        # The served moves (`SpeedGo.served_state`): no pass while a sensible point is left,
        # unless the opponent has just passed and the pass wins.
        served = self._fns.serve(state, np.float32(self.komi))
        states = jax.tree.map(lambda x: x[None], served)
        if k == 0:
            out = options.evaluate(states)
            return int(out.reflex[0]), float(out.value[0]), None
        key = jax.random.fold_in(self._key, len(self.moves))
        out = options.option(k, key[None], states)
        return int(out.actions[0, 0]), float(out.search_value[0]), np.asarray(out.visit_counts[0])

    def _clear(self) -> None:
        """An empty board; the clocks start again. While `start`'s thread has not set the
        board up yet, it will start empty: nothing to clear (nothing to wait for)."""
        if self.states or self._warming is None:
            self._clear_board()
        self.clocks = [self.settings.fresh(), self.settings.fresh()]

    def _clear_board(self) -> None:
        import jax

        self.states = [self._fns.init(jax.random.PRNGKey(self.seed))]
        self.moves = []
        # The colour of each entry of `moves` (0 black, 1 white; black for a setup).
        self.movers = []
        # The clock gate's state of each colour (black, white) after each entry of `states`:
        # zeroed with the board, stepped only by the gate's own moves, popped by `undo`.
        zero = None if self.gate is None else self.gate.zero()
        self.gate_states = [(zero, zero)]
        # Black moves first; pgx draws which player id that is.
        self.black_id = int(self.states[0].current_player)

    @property
    def to_play(self) -> int:
        """The colour to move next in pgx's state: 0 black, 1 white (pgx's ply parity)."""
        return go.position(self.states[-1]).to_play

    def _ready(self, state, colour: int, *, carry: int | None = None):
        """`state` with `colour` to move: the position set up again when another colour is due,
        or when the game is over (two passes): GTP v2 has no game-over state, and GUIs play on
        to settle dead stones, so the pass count starts again at 0 and the game goes on.

        pgx's colour to move is its ply count's parity. Moving the ply count on by one, with
        that ply's superko hash left 0 (no position hashes to 0), hands the move to the other
        colour without a pass: the board, the observation's history planes, the pass count and
        the superko record are kept; the ko ban, the other colour's, is lifted. `carry`: set the
        position up afresh, keeping the superko hashes of its last `carry` positions only; that
        happens by itself once pgx's ply count reaches `REBASE_AT`, so pgx's cap never ends a
        game (the engine counts its own plies in `moves`).
        """
        pos = go.position(state)
        step = pos.ply
        if carry is None and step >= REBASE_AT:
            carry = CARRY
        over = bool(state.terminated)
        if step % 2 == colour and carry is None and not over:
            return state
        hashes, ko = pos.hashes, pos.ko
        if carry is not None:
            keep = min(carry, step)
            kept = np.zeros_like(hashes)
            kept[:keep] = hashes[step - keep : step]
            hashes, step = kept, keep
        if step % 2 != colour:
            step, ko = step + 1, -1
        passes = 0 if over else pos.passes
        return self._fns.reposition(state, np.int32(step), hashes, np.int32(ko), np.int32(passes))

    def stones(self) -> int:
        """How many stones are on the board."""
        return int(np.count_nonzero(go.position(self.states[-1]).stones))

    def setup(self, actions: list[int]) -> None:
        """Black stones on the empty board (handicap), then white to move; one `undo` step.

        Raises:
            GtpError: the board is not empty.
        """
        if self.stones():
            raise GtpError("board not empty")
        state = self.states[-1]
        for action in actions:
            state = self._step(self._ready(state, 0), action, 0)
        # A fresh start from the handicap position (its hash kept): no ply of pgx's cap spent.
        self.states.append(self._ready(state, 1, carry=1))
        self.moves.append(SETUP)
        self.movers.append(0)
        self.gate_states.append(self.gate_states[-1])

    def undo(self) -> None:
        """Takes the last move (or setup) back, and the clock gate's state with it.

        Raises:
            GtpError: nothing to undo.
        """
        if not self.moves:
            raise GtpError("cannot undo")
        self.states.pop()
        self.moves.pop()
        self.movers.pop()
        self.gate_states.pop()

    @property
    def over(self) -> bool:
        """Two passes ended the game (GTP plays on all the same: `_ready`)."""
        return bool(self.states[-1].terminated)

    def opponent_passed(self, colour: int) -> bool:
        """Whether the last move was the other colour's pass (a pass of `colour`'s own, when
        it moves again out of turn, is not the opponent's)."""
        return bool(self.moves) and self.moves[-1] == PASS and self.movers[-1] != colour

    def board(self) -> list[str]:
        """9 rows, top first: "x" black, "o" white, "." empty."""
        from rtplan.games.render import render

        return render(self._fns.game, self.states[-1])["board"]

    def _with_clocks(self, state):
        """`state` with both GTP clocks written into the game's clocks, in ticks."""
        from rtplan import games

        per_tick = self._seconds_per_tick()
        ticks = []
        for colour in (0, 1):
            remaining = self.clocks[colour].remaining
            # A fixed budget keeps the game's clocks full: an empty one would force the reflex.
            if remaining is None or per_tick <= 0 or self.fixed_budget is not None:
                ticks.append(games.UNLIMITED_CLOCK)
            else:
                ticks.append(to_ticks(remaining, per_tick))
        return self._write_clocks(state, ticks)

    def _write_clocks(self, state, ticks: list[int], initial: int | None = None):
        """`state` with the game's clocks at `ticks` (by colour: black, white) and, when given,
        its T0 at `initial` ticks."""
        import jax.numpy as jnp

        by_id = ticks if self.black_id == 0 else ticks[::-1]
        inner = state.inner.replace(clocks=jnp.asarray(by_id, jnp.int32))
        if initial is not None:
            inner = inner.replace(initial_time=jnp.asarray(initial, jnp.int32))
        return state.replace(inner=inner)

    def gate_view(self, state, colour: int) -> tuple[object, tuple[int, int, int]]:
        """`state` (`colour` to move) as the clock gate sees it, and its (`colour`'s, the
        opponent's, T0) ticks: each colour's `_time.gate_seconds` and the settings'
        `gate_initial_seconds`, converted at `tick_s` seconds per tick, rounded down.

        `tick_s` is fixed at start-up, unlike the running averages of the search times that
        `_with_clocks` and the cap read: T0 in ticks stays constant through a game, as in the
        gate's training, and a slow move (the engine's own overhead, a busy machine) does not
        change what the gate sees. The cap, not the conversion, keeps each move in time.
        """
        ply = len(self.moves)
        ticks = [to_ticks(gate_seconds(self.settings, c, ply), self.tick_s) for c in self.clocks]
        initial = to_ticks(gate_initial_seconds(self.settings), self.tick_s)
        view = self._write_clocks(state, ticks, initial)
        return view, (ticks[colour], ticks[1 - colour], initial)

    def _seconds_per_tick(self) -> float:
        """Measured seconds per simulation (the slowest of the planner's own budgets' ratios,
        the ladder's left out; 0 before warm_up)."""
        own = [k for k in self.config.budgets if k in self.search_s]
        return max((self.search_s[k] / self.config.sims(k) for k in own), default=0.0)

    def _check(self, colour: int, action: int) -> None:
        """Raises GtpError unless `colour` may play `action` now (either colour may move, and
        play goes on after two passes)."""
        state = self._ready(self.states[-1], colour)
        if action != PASS:
            if not bool(state.legal_action_mask[action]):
                raise GtpError("illegal move")
            nxt = self._step(state, action, 0)
            # pgx would end the game with a loss for the mover (positional superko).
            if go.position(nxt).superko:
                raise GtpError("illegal move (repeats an earlier position: positional superko)")

    def _apply(self, colour: int, action: int, cost: int, gate_state=None) -> None:
        """Plays `action` for `colour`; `gate_state`: the gate's state of `colour` after it
        chose this move (None: the gate did not move, its states stay as they were)."""
        state = self._with_clocks(self._ready(self.states[-1], colour))
        self.states.append(self._step(state, action, cost))
        self.moves.append(action)
        self.movers.append(colour)
        memory = list(self.gate_states[-1])
        if gate_state is not None:
            memory[colour] = gate_state
        self.gate_states.append(tuple(memory))

    def budget(self, colour: int | None = None) -> tuple[int, float]:
        """(budget k for `colour` (None: the side to move), its allowance in seconds); k = 0 is
        the reflex move. Changes nothing (the gate's state is not stepped)."""
        colour = self.to_play if colour is None else colour
        choice, _ = self._choose(colour, self._ready(self.states[-1], colour))
        return choice.k, choice.allowance

    def _choose(self, colour: int, state) -> tuple[TimeChoice, object]:
        """The time manager's choice for `colour` at `state` (`colour` to move), and the gate's
        next state of `colour` (None when the gate was not asked).

        A fixed budget plays itself; with no time limit (or nothing measured yet) the planner's
        largest budget plays. Otherwise the proportional manager plays the largest budget, the
        ladder's timed rungs included (`budgets`), whose search fits `move_allowance`; the
        clock gate chooses from the clocks in ticks (`gate_view`) and its own state, and that
        choice is capped to the same allowance (`capped_budget`) and to the planner's own
        budgets (its options): it never spends more on a move than the proportional manager
        would. The gate's state remembers the option played (as in training, where the chosen
        option is the one played).
        """
        allowance = move_allowance(self.settings, self.clocks[colour], len(self.moves))
        budgets = self.config.budgets  # the gate's options; the ladder is the proportional's
        if self.fixed_budget is not None:
            return TimeChoice(self.fixed_budget, allowance), None
        if math.isinf(allowance) or not self.search_s:
            return TimeChoice(max(budgets), allowance), None
        if self.gate is None or self.tick_s <= 0:
            return TimeChoice(
                choose_budget(self.budgets, self.search_s.__getitem__, allowance), allowance
            ), None
        view, ticks = self.gate_view(state, colour)
        decision = self.gate.decide(self.gate_states[-1][colour], view)
        option = int(decision.option)
        wanted = int(self.gate.options.budget(option))
        k = capped_budget(wanted, budgets, self.search_s.__getitem__, allowance)
        played = decision.carry.replace(last=np.int32(self.gate.options.index(k)))
        return TimeChoice(k, allowance, option, ticks), played

    def genmove(self, colour: int) -> str:
        """Plans and plays a move for `colour` (whichever colour is due, and after two passes
        too); returns its vertex, "pass" or "resign"."""
        start = time.perf_counter()
        out_of_turn = colour != self.to_play
        state = self._ready(self.states[-1], colour)
        choice, gate_state = self._choose(colour, state)
        self.last_choice = choice
        k, allowance = choice.k, choice.allowance
        state = self._with_clocks(state)
        action, value, visits = self._search(state, k)
        took = time.perf_counter() - start
        if k:
            self.search_s.measured(k, took)  # the next choices read it (`SearchTimes`)
        resign = self.resign_below is not None and value < self.resign_below
        if not resign:
            action = self._guard(state, action, value, visits=visits, out_of_turn=out_of_turn)
            try:
                self._check(colour, action)
            except GtpError:
                action = PASS  # the search picked a superko repetition: pass instead
        # The whole move is charged (the guards' board reading too: uncharged, it let our count
        # run ahead of the controller's under 1 s of sudden death), with the lag the allowance
        # reserves (the pipes and the controller, unmeasured here): counted without it, our
        # clock ran ahead of the controller's and lost 25 of 100 games on time under 1 s per
        # 60 stones (`_time.told_clock` keeps our count).
        spent = time.perf_counter() - start
        self.clocks[colour] = self.settings.spend(self.clocks[colour], spent + LAG_S)
        if resign:
            self._log(f"genmove {'BW'[colour]}: resign (value {value:.2f})")
            return "resign"
        self._apply(colour, action, self.search_config.sims(k) if k else 0, gate_state)
        gate = "" if choice.option is None else f", gate option {choice.option} at {choice.ticks}"
        self._log(
            f"genmove {'BW'[colour]}: {vertex_name(action)} k={k} "
            f"({self.search_config.sims(k) if k else 0} simulations) in {1e3 * took:.0f} ms, "
            f"allowance {allowance:.3g} s, value {value:+.2f}{gate}"
        )
        return vertex_name(action)

    def _guard(
        self,
        state,
        action: int,
        value: float,
        *,
        visits: np.ndarray | None = None,
        out_of_turn: bool = False,
    ) -> int:
        """The move to play instead of the planner's `action` from `state` (its mover's):

        - never a pass while the mover has no stone on the board (the first move as black):
          the network's best board move instead;
        - (a policy-only move, when the clock affords no search, and the search's root are
          already served moves, `_search` from `games.go.SpeedGo.served_state`: no pass while
          a board move that is neither an own eye, a self-atari nor a repetition is left,
          unless the opponent has just passed and the pass wins by the count. The policy
          passes in positions it reads badly (handicap stones on the board), and a run of
          policy-only passes handed GNU Go the whole board under a 3 s clock);
        - never a move that fills one of the mover's own eyes (`_board.own_eye`) or leaves
          `BIG_SELF_ATARI` or more of its stones in atari (a 96-simulation search filled a
          seki's last liberty and lost a 25-stone group): the next-best safe move instead
          (`_next_best`), a pass only when none is left;
        - a pass instead of any board move when the opponent has just passed and the search
          value is below `LOST_VALUE`: a lost game ends there rather than with the mover's own
          territory filled in (`--resign-below` resigns before this is reached);
        - never a pass for a colour moving out of turn (`out_of_turn`: `genmove b` with white
          to move) while the opponent has not just passed: the next-best safe move instead
          (`_next_best`). The network never saw a side to move right after its own move, and
          the shipped planner's 96-simulation search passed there (`play b e5`, `genmove b`);
        - instead of a pass, a capture of the opponent's dead stones when the count depends on
          them (`_capture_before_passing`).

        `visits` `[82]`: the search's root visit counts (None: no search, or not known).
        """
        pos = go.position(state)
        mine = pos.own()
        passed = self.opponent_passed(pos.to_play)
        if action == PASS:
            mask = np.asarray(state.legal_action_mask).copy()
            mask[PASS] = False
            if not (mine == 1).any() and mask.any():
                return self._policy_move(state, mask)
            if out_of_turn and not passed:
                action = self._next_best(state, mine, visits, policy=True)
                if action != PASS:
                    self._log(f"a pass out of turn: {vertex_name(action)} instead")
                    return action
        elif own_eye(mine, action) or (stones := self_atari(mine, action)) >= BIG_SELF_ATARI:
            why = "fills an own eye" if own_eye(mine, action) else f"leaves {stones} in atari"
            action = self._next_best(state, mine, visits, policy=not passed)
            self._log(f"{vertex_name(action)} instead of a move that {why}")
        elif passed and value < LOST_VALUE:
            self._log(f"lost (value {value:+.2f}) after the opponent's pass: pass too")
            action = PASS
        return self._capture_before_passing(state, mine) if action == PASS else action

    def _next_best(self, state, mine: np.ndarray, visits: np.ndarray | None, *, policy: bool):
        """The move to play instead of an unsafe one (an own eye, a big self-atari): among the
        legal board moves that are neither an own eye nor any self-atari, the one the search
        visited most; if it visited none, the network's best of them when `policy` (the
        opponent has not just passed: a pass mid-game gives the opponent a free move); else,
        or when no such move is left, a pass."""
        mask = np.asarray(state.legal_action_mask).copy()
        mask[PASS] = False
        safe = [int(p) for p in np.flatnonzero(mask) if not _unsafe(mine, int(p))]
        if visits is not None and safe and visits[safe].max() > 0:
            return safe[int(np.argmax(visits[safe]))]
        if policy and safe:
            keep = np.zeros_like(mask)
            keep[safe] = True
            return self._policy_move(state, keep)
        return PASS

    def _policy_move(self, state, mask: np.ndarray) -> int:
        """The network's best move from `state` among the points of `mask` (no search)."""
        import jax.numpy as jnp

        action, _, _ = self._search(state.replace(legal_action_mask=jnp.asarray(mask)), 0)
        return action

    def _capture_before_passing(self, state, mine: np.ndarray) -> int:
        """PASS, or a move that takes a liberty of the opponent's dead stones when the game's own
        count (dead stones counted alive: pgx's, and a Tromp-Taylor referee's) gives the mover
        a worse result than the count with them removed (`_board.capture_move`)."""
        pos = go.position(state)
        black = pos.to_play == 0
        board = np.sign(pos.stones)
        cleaned = np.where(dead_stones(board), 0, board)
        as_is, removed = (mover_margin(b, black, self.komi) for b in (board, cleaned))
        if not as_is <= 0 < removed:  # the dead stones do not turn the result
            return PASS
        move = capture_move(mine, np.asarray(state.legal_action_mask))
        if move is None:
            return PASS
        self._log(
            f"{vertex_name(move)}: captures dead stones before passing (the count gives "
            f"{as_is:+.1f} with them, {removed:+.1f} without)"
        )
        return move

    def _log(self, text: str) -> None:
        if self._log_to is not None:
            print(f"rtplan gtp: {text}", file=self._log_to, flush=True)
