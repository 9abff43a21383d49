"""`rtplan gtp --time-manager gate`: a tiny clock gate spends the GTP clock (in process)."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rtplan.games import UNLIMITED_CLOCK
from rtplan.gate.clock.gate import clock_gate_player, load_clock_gate
from rtplan.gtp import (
    Clock,
    GtpEngine,
    TimeSettings,
    capped_budget,
    gate_initial_seconds,
    gate_seconds,
    to_ticks,
)
from rtplan.harness.checkpoint import CheckpointError
from support import write_checkpoints, write_clock_gate

GAME = "speed-go-v0"
#: A random-init clock gate that, on the clocks of `CLOCKS`, asks for each of its options.
GATE_SEED = 0
#: (black's, white's) seconds before each genmove of the equality test, black first; T0 = 30 s.
CLOCKS = [(30, 30), (30, 29), (12, 29), (12, 3), (0.5, 3), (0.5, 0.05), (20, 0.05), (20, 0.001)]
CLOCKS += [(0.001, 0.001), (0.001, 25), (2, 25), (2, 8)]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """(the tiny planner, the tiny clock gate shipped beside it)."""
    root = write_checkpoints(tmp_path_factory.mktemp("ck"), (GAME,))
    return root / GAME / "planner.msgpack", write_clock_gate(root, GAME, seed=GATE_SEED)


@pytest.fixture(scope="module")
def engine(files) -> GtpEngine:
    """The gate-managed engine, warmed up (its gate found beside the planner)."""
    engine = GtpEngine(files[0], time_manager="gate")
    engine.warm_up()
    assert engine.gate is not None and engine.gate.path == files[1]
    return engine


def ok(engine: GtpEngine, line: str) -> str:
    answer, _ = engine.handle(line)
    assert answer.startswith("="), (line, answer)
    return answer[1:].strip()


def test_seconds_become_ticks_by_the_documented_rule():
    sudden = TimeSettings(main=60.0)
    assert gate_initial_seconds(sudden) == 60.0
    assert gate_seconds(sudden, Clock(12.5, 0), ply=30) == 12.5
    # Byo-yomi of 30 s per 5 stones: 6 s for each own move expected (81 at ply 0, 61 at ply 40).
    byo = TimeSettings(main=10.0, byo_time=30.0, byo_stones=5)
    assert gate_initial_seconds(byo) == pytest.approx(10 + 6 * 81)
    assert gate_seconds(byo, Clock(4.0, 0), ply=40) == pytest.approx(4 + 6 * 61)
    # In a period: its 9 s for its 3 stones, then 6 s for each expected move beyond them.
    assert gate_seconds(byo, Clock(9.0, 3), ply=40) == pytest.approx(9 + 6 * 58)
    assert gate_seconds(byo, Clock(9.0, 3), ply=160) == pytest.approx(9 + 6 * 2)  # 5 moves left
    assert gate_initial_seconds(TimeSettings(main=0.0, byo_time=5.0, byo_stones=1)) == 5 * 81
    assert gate_seconds(TimeSettings(), Clock(), ply=0) == math.inf
    assert to_ticks(1.0, 0.00025) == 4000
    assert to_ticks(0.0002, 0.00025) == 0
    assert to_ticks(math.inf, 0.00025) == UNLIMITED_CLOCK
    # The cap: the gate's budget when its search fits the allowance, else the largest below it.
    times = {16: 0.004, 32: 0.008, 64: 0.012, 96: 0.018}
    assert capped_budget(64, times, times.get, 1.0) == 64
    assert capped_budget(96, times, times.get, 0.01) == 32
    assert capped_budget(0, times, times.get, 1.0) == 0
    assert capped_budget(16, times, times.get, 0.001) == 0


def _gate_sees(engine: GtpEngine, colour: int, seconds, t0_seconds: float):
    """The engine's position, `colour` to move, with sudden-death clocks of `seconds` (black's,
    white's) and T0 converted at the engine's seconds per tick: a batch of one."""
    state = engine._ready(engine.states[-1], colour)
    ticks = [int(s / engine.tick_s) for s in seconds]
    by_id = ticks if engine.black_id == 0 else ticks[::-1]
    inner = state.inner.replace(
        clocks=jnp.asarray(by_id, jnp.int32),
        initial_time=jnp.asarray(int(t0_seconds / engine.tick_s), jnp.int32),
    )
    return jax.tree.map(lambda x: x[None], state.replace(inner=inner))


def test_the_gate_manager_picks_what_the_gate_picks(engine, files):
    """Per genmove, the engine's gate option is the one `clock_gate_player` chooses on the
    same position and the clocks converted to ticks, each colour with its own state."""
    planner = engine._fns.options.planner
    gate, params, _ = load_clock_gate(files[1], planner)
    player = clock_gate_player(gate, params)
    choose, evaluate = jax.jit(player.choose), jax.jit(planner.evaluate)
    carries = [player.init(1), player.init(1)]
    # A round rate instead of this machine's: the same ticks, hence options, on any machine.
    engine.tick_s, measured = 0.001, engine.tick_s
    try:
        _compare(engine, gate, choose, evaluate, carries)
    finally:
        engine.tick_s = measured


def _compare(engine, gate, choose, evaluate, carries):
    ok(engine, "clear_board")
    ok(engine, "time_settings 30 0 0")
    options, capped = [], 0
    for ply, seconds in enumerate(CLOCKS):
        colour = ply % 2
        for c in (0, 1):
            ok(engine, f"time_left {'bw'[c]} {seconds[c]} 0")
        states = _gate_sees(engine, colour, seconds, 30.0)
        out = evaluate(engine.params, states)
        carry, option = choose(carries[colour], states, out, jax.random.split(jax.random.key(0), 1))
        ok(engine, f"genmove {'bw'[colour]}")
        choice = engine.last_choice
        ticks = [int(s / engine.tick_s) for s in seconds]
        assert choice.ticks == (ticks[colour], ticks[1 - colour], int(30.0 / engine.tick_s))
        assert choice.option == int(option[0]), ply
        np.testing.assert_allclose(engine.gate_states[-1][colour].h, carry.h[0], atol=1e-5)
        # The state remembers the option played (the cap may have lowered the gate's).
        played = gate.options.index(choice.k)
        assert int(engine.gate_states[-1][colour].last) == played
        carries[colour] = carry.replace(last=jnp.full((1,), played, jnp.int32))
        options.append(choice.option)
        capped += choice.option != played
    assert set(options) == {0, 1, 2}, options  # each option asked for: the check bites
    assert capped, "no move of the test's clocks was capped"


def test_the_gate_state_resets_with_the_board_and_undo_takes_it_back(engine):
    zero = engine.gate.zero()

    def same(a, b) -> bool:
        return bool(np.array_equal(a.h, b.h)) and int(a.last) == int(b.last)

    ok(engine, "clear_board")
    ok(engine, "time_settings 30 0 0")
    ok(engine, "time_left b 20 0")
    ok(engine, "genmove b")
    black = engine.gate_states[-1][0]
    assert not same(black, zero) and same(engine.gate_states[-1][1], zero)
    ok(engine, "play w e5")  # the opponent's move leaves both states alone
    assert same(engine.gate_states[-1][0], black) and same(engine.gate_states[-1][1], zero)
    ok(engine, "rtplan-budget")  # asks the gate without stepping it
    assert same(engine.gate_states[-1][0], black)
    # undo pops the state with the move: the same move again steps it the same way.
    ok(engine, "time_left b 20 0")
    first = ok(engine, "genmove b")
    after = engine.gate_states[-1][0]
    ok(engine, "undo")
    assert same(engine.gate_states[-1][0], black)
    ok(engine, "time_left b 20 0")
    assert ok(engine, "genmove b") == first
    assert same(engine.gate_states[-1][0], after)
    for reset in ("clear_board", "boardsize 9"):
        ok(engine, "genmove w")
        ok(engine, reset)
        assert len(engine.gate_states) == 1
        assert all(same(s, zero) for s in engine.gate_states[0]), reset


def test_a_sudden_death_game_through_gtp_never_loses_on_time(engine):
    """`time_settings 1 0 0`: genmove both colours until two passes, with a referee's clocks
    (the measured time of each genmove, sent as `time_left` before the next): never below 0
    and never an opening pass. 1 s over ~40 own moves leaves nothing for a search at first
    (80% of 1/81 s is less than the 10 ms lag), so the cap overrides the gate there."""
    ok(engine, "clear_board")
    ok(engine, "komi 7.5")
    ok(engine, "time_settings 1 0 0")
    left, moves, capped = [1.0, 1.0], [], 0
    while not engine.over:
        assert len(moves) < 300, "the game did not end"
        colour = len(moves) % 2
        ok(engine, f"time_left {'bw'[colour]} {left[colour]:.6f} 0")
        start = time.perf_counter()
        moves.append(ok(engine, f"genmove {'bw'[colour]}").lower())
        left[colour] -= time.perf_counter() - start
        assert left[colour] > 0, f"{'BW'[colour]} lost on time at ply {len(moves)}: {left}"
        choice = engine.last_choice
        capped += choice.option != engine.gate.options.index(choice.k)
    assert moves[-2:] == ["pass", "pass"]
    assert "pass" not in moves[:2]  # neither colour opens with a pass
    assert capped, "the cap never overrode the gate"
    assert ok(engine, "final_score")


def test_the_gate_manager_without_a_gate_names_the_missing_file(files, tmp_path):
    missing = tmp_path / "no-gate.msgpack"
    with pytest.raises(CheckpointError) as raised:
        GtpEngine(files[0], time_manager="gate", clock_gate=missing)
    assert str(missing) in str(raised.value)
    assert f"rtplan train-gate --game {GAME}" in str(raised.value)
    with pytest.raises(ValueError, match="no time manager"):
        GtpEngine(files[0], time_manager="gate", budget=2)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--time-manager", "gate"], "train-gate --game speed-go-v0"),
        (["--time-manager", "proportional", "--clock-gate", "g.msgpack"], "needs --time-manager"),
        (["--time-manager", "gate", "--budget", "2"], "takes no time manager"),
    ],
)
def test_cli_refuses_a_gate_it_cannot_use(flags, message, files, tmp_path):
    """Without a gate beside the planner, `--time-manager gate` names the file it looked for."""
    planner = tmp_path / GAME / "planner.msgpack"
    planner.parent.mkdir()
    shutil.copyfile(files[0], planner)
    cmd = [sys.executable, "-m", "rtplan", "gtp", "--planner", str(planner), *flags]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    if flags == ["--time-manager", "gate"]:
        assert str(tmp_path / GAME / "gate.msgpack") in result.stderr
