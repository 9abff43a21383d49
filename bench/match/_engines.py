"""The engines of a match: open_spiel's MCTS on Go and Hex, our Hex planner, our `rtplan gtp`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.match._board import (
    GO_GAME,
    GO_SIZE,
    HEX_GAME,
    HEX_SIZE,
    HEX_SWAP,
    KOMI,
    hex_to_spiel,
    spiel_to_hex,
)
from bench.match._referee import Refused


def spiel_go_actions(game) -> dict[str, int]:
    """open_spiel go's action of each lower-case GTP vertex ("a1" is action 0) and of "pass"."""
    state = game.new_initial_state()
    return {
        state.action_to_string(0, a).split()[1].lower(): a
        for a in range(game.num_distinct_actions())
    }


class SpielMcts:
    """open_spiel's MCTSBot (one random rollout per leaf) on an open_spiel game: the Go and Hex
    opponent. Subclasses translate our moves to open_spiel's actions and back."""

    def __init__(self, name: str, params: dict, rollouts: int, *, seed: int, uct_c: float):
        import numpy as np
        import pyspiel
        from open_spiel.python.algorithms import mcts

        self.game = pyspiel.load_game(name, params)
        rng = np.random.RandomState(seed)
        evaluator = mcts.RandomRolloutEvaluator(n_rollouts=1, random_state=rng)
        self.bot = mcts.MCTSBot(self.game, uct_c, rollouts, evaluator, random_state=rng)

    def to_action(self, move):
        """open_spiel's action of our move (None: no such action)."""
        raise NotImplementedError

    def to_move(self, action: int):
        """Our move of an open_spiel action."""
        raise NotImplementedError

    def new_game(self) -> None:
        self.state = self.game.new_initial_state()

    def play(self, colour: int, move) -> None:
        action = self.to_action(move)
        if colour != self.state.current_player() or action not in self.state.legal_actions():
            raise Refused(f"open_spiel: illegal move {move} for {'bw'[colour]}")
        self.state.apply_action(action)

    def genmove(self, colour: int):
        action = self.bot.step(self.state)
        self.state.apply_action(action)
        return self.to_move(action)

    def over(self) -> bool:
        return self.state.is_terminal()

    def time_settings(self, control) -> None:
        """MCTS searches its fixed rollouts whatever the clock (its time is charged anyway)."""

    def time_left(self, colour: int, clock) -> None:
        pass


def mcts_settings(args: argparse.Namespace, board: str) -> str:
    return (
        f"max_simulations={args.rollouts} RandomRolloutEvaluator(n_rollouts=1) "
        f"uct_c={args.uct_c:g} solve=True {board}"
    )


class SpielGo(SpielMcts):
    """open_spiel's MCTSBot on open_spiel's 9x9 go; moves are lower-case GTP vertices."""

    def __init__(self, rollouts: int, *, seed: int = 0, uct_c: float = 2.0) -> None:
        params = {"board_size": GO_SIZE, "komi": KOMI}
        super().__init__("go", params, rollouts, seed=seed, uct_c=uct_c)
        self.actions = spiel_go_actions(self.game)
        self.vertices = {a: v for v, a in self.actions.items()}

    def to_action(self, move: str) -> int | None:
        return self.actions.get(move)

    def to_move(self, action: int) -> str:
        return self.vertices[action]

    def black_result(self) -> float:
        """+1 black won, -1 white won, 0 a tie, by open_spiel's area score (a finished game)."""
        if not self.state.is_terminal():
            raise RuntimeError("open_spiel's go game is not over")
        return float(self.state.returns()[0])


def gtp_planner_argv(
    planner: Path,
    option: int | None,
    seed: int,
    *,
    time_manager: str | None = None,
    clock_gate: str | None = None,
    max_simulations: int | None = None,
) -> list:
    """`rtplan gtp` playing `option` on every move, or (`option` None) spending its clock with
    `time_manager` ("proportional" or "gate", the gate's file `clock_gate` or its default), on
    an anytime ladder up to `max_simulations` (None: the engine's default; 0: no ladder)."""
    argv = [sys.executable, "-m", "rtplan", "gtp", "--game", GO_GAME, "--planner", planner,
            "--seed", seed]  # fmt: skip
    if option is not None:
        return [*argv, "--budget", option]
    argv += ["--time-manager", time_manager or "proportional"]
    if max_simulations is not None:
        argv += ["--max-simulations", max_simulations]
    return argv + (["--clock-gate", clock_gate] if clock_gate else [])


def our_hex_board(state) -> str:
    """121 characters, cell by cell: "x" black (moved first), "o" white, "." empty."""
    import numpy as np

    x = state.inner.board._x  # pgx's hex: board > 0 for the player to move, < 0 the other
    board = np.asarray(x.board)
    to_move = int(x.step_count) % 2
    mine, theirs = "xo"[to_move], "xo"[1 - to_move]
    return "".join(mine if v > 0 else theirs if v < 0 else "." for v in board)


def spiel_hex_board(state) -> str:
    """121 characters of an open_spiel hex state, as `our_hex_board`."""
    return "".join(c for c in str(state) if c in "xo.")


class OurHex:
    """Our Speed Hex planner at option k: unlimited clock, deterministic search."""

    def __init__(self, planner_file: Path, k: int, *, seed: int = 0) -> None:
        import jax

        from rtplan.planner.calibrate import with_sims
        from rtplan.planner.compiled import CompiledOptions
        from rtplan.planner.options import Planner
        from rtplan.planner.store import load_planner

        base, params, _ = load_planner(HEX_GAME, str(planner_file))
        self.planner = Planner(with_sims(base, k, base.sims(k)))
        self.k = k
        game = self.planner.game
        self._init, self._step = jax.jit(game.init), jax.jit(game.step)
        self._options = CompiledOptions(self.planner, params)
        self._key = jax.random.PRNGKey(seed)
        self.plies = 0

    def new_game(self) -> None:
        import jax

        self.state = self._init(jax.random.PRNGKey(0))
        self.plies = 0

    def play(self, colour: int, move: int) -> None:
        if colour != self.plies % 2 or not bool(self.state.legal_action_mask[move]):
            raise Refused(f"rtplan: illegal move {move} for {'bw'[colour]}")
        self.state = self._step(self.state, move, 0)
        self.plies += 1

    def genmove(self, colour: int) -> int:
        import jax

        # Swap has no counterpart in open_spiel's hex: the root never considers it.
        state = self.state.replace(
            legal_action_mask=self.state.legal_action_mask.at[HEX_SWAP].set(False)
        )
        key = jax.random.fold_in(self._key, self.plies)
        out = self._options.option(self.k, key[None], jax.tree.map(lambda x: x[None], state))
        move = int(out.actions[0, 0])
        self.play(colour, move)
        return move

    def over(self) -> bool:
        return bool(self.state.terminated)

    def time_settings(self, control) -> None:
        """Option k on every move: the clock is not read (Hex matches are untimed)."""

    def time_left(self, colour: int, clock) -> None:
        pass

    def board(self) -> str:
        return our_hex_board(self.state)


class SpielHex(SpielMcts):
    """open_spiel's MCTSBot on open_spiel's 11x11 hex (no swap)."""

    def __init__(self, rollouts: int, *, seed: int = 0, uct_c: float = 2.0) -> None:
        super().__init__("hex", {"board_size": HEX_SIZE}, rollouts, seed=seed, uct_c=uct_c)

    def to_action(self, move: int) -> int:
        return hex_to_spiel(move)

    def to_move(self, action: int) -> int:
        return spiel_to_hex(action)

    def board(self) -> str:
        return spiel_hex_board(self.state)
