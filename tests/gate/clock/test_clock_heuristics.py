"""The clock baselines (gate/clock/heuristics.py) pick what their rules say, on hand-made inputs."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtplan import games
from rtplan.gate.clock import heuristics as ch
from rtplan.gtp import LAG_S, MAX_PLIES, Clock, TimeSettings, choose_budget, move_allowance
from rtplan.planner.configs import default_config
from rtplan.planner.options import Planner

HEX = ch.ClockOptions(budgets=(2, 8, 32, 128), simulations=(2, 8, 32, 128), max_plies=122)
GO = ch.ClockOptions(budgets=(16, 32, 64, 96), simulations=(16, 32, 64, 96), max_plies=162)
GO_STRICT = ch.ClockOptions(GO.budgets, GO.simulations, GO.max_plies, strict=True)
B = 16  # every test batch: one compile per chooser
#: Clock-aware bars (T0 -> k) as `rtplan eval --tune-fixed` picks them (Go's is the shipped one).
BARS = {
    HEX.budgets: {300: 8, 1200: 32, 2300: 32},
    GO.budgets: {300: 16, 1200: 16, 2300: 32, 3500: 64, 4100: 64},
}


def inputs(my_time, *, t0=300, ply=0, opp_time=None, logits=None) -> ch.ClockInputs:
    """`[B]` inputs broadcast from scalars or lists (logits: `[A]` or `[B, A]`, all legal)."""

    def col(x):
        return jnp.broadcast_to(jnp.asarray(x, jnp.int32), (B,))

    legal = None
    if logits is not None:
        logits = jnp.broadcast_to(jnp.asarray(logits, jnp.float32), (B, np.shape(logits)[-1]))
        legal = jnp.ones(logits.shape, bool)
    return ch.ClockInputs(
        my_time=col(my_time),
        opp_time=col(my_time if opp_time is None else opp_time),
        initial_time=col(t0),
        ply=col(ply),
        logits=logits,
        legal=legal,
    )


@functools.cache
def jitted(name: str, options: ch.ClockOptions):
    return jax.jit(ch.baselines(options, bar=BARS[options.budgets])[name])


def pick(name, options, x, seed=0) -> np.ndarray:
    keys = jax.random.split(jax.random.PRNGKey(seed), B)
    return np.asarray(jitted(name, options)(x, keys))


def test_options_of_the_clock_planners():
    for game_id, max_plies in (("speed-hex-v0", 122), ("speed-go-v0", MAX_PLIES)):
        options = ch.ClockOptions.of(Planner(default_config(game_id)))
        assert options.max_plies == max_plies
        assert options.costs.tolist() == [0, *options.simulations]
        assert not options.strict
    strict = Planner(
        default_config("speed-hex-v0"), game=games.make("speed-hex-v0", timeout="strict")
    )
    assert ch.ClockOptions.of(strict).strict
    assert HEX.budget(np.array([0, 1, 4])).tolist() == [0, 2, 128]
    assert [HEX.index(k) for k in (0, 2, 128)] == [0, 1, 4]
    with pytest.raises(ValueError, match="ascending"):
        ch.ClockOptions((1, 2), (8, 4), 10)


def test_clock_inputs_read_the_mover():
    game = games.make("speed-hex-v0")
    state = game.set_initial_time(game.init(jax.random.PRNGKey(0)), 500)
    state = game.step(state, 60, 40)  # the first mover thinks 40 ticks
    states = jax.tree.map(lambda x: x[None], state)
    x = ch.clock_inputs(states)
    assert (int(x.my_time[0]), int(x.opp_time[0])) == (500, 460)
    assert (int(x.initial_time[0]), int(x.ply[0]), int(x.move[0])) == (500, 1, 0)
    assert x.logits is None


def test_always_k_falls_back_to_the_largest_budget_that_fits():
    clocks = [500, 128, 127, 31, 8, 2, 1, 0]
    x = inputs(clocks * 2)
    got = pick("k128", HEX, x)[:8]
    assert got.tolist() == [4, 4, 3, 2, 2, 1, 0, 0]
    assert pick("k8", HEX, x)[:8].tolist() == [2, 2, 2, 2, 2, 1, 0, 0]
    # Strict: spending down to 0 loses, so a budget fits only below the clock.
    strict = pick("k64", GO_STRICT, inputs([65, 64, 33, 32, 17, 16, 1, 0] * 2))[:8]
    assert strict.tolist() == [3, 2, 2, 1, 1, 0, 0, 0]


def test_greedy_and_policy_only():
    x = inputs([1000, 96, 95, 64, 40, 16, 15, 0] * 2)
    assert pick("greedy", GO, x)[:8].tolist() == [4, 4, 3, 3, 2, 1, 0, 0]
    assert pick("policy-only", GO, x).tolist() == [0] * B


def test_random_picks_only_affordable_options_and_covers_them():
    x = inputs([40] * B)  # Go: policy-only, 16 and 32 fit; 64 and 96 do not
    seen = np.concatenate([pick("random", GO, x, seed=s) for s in range(20)])
    assert set(seen.tolist()) == {0, 1, 2}
    assert np.bincount(seen, minlength=5)[:3].min() > 60  # 320 draws, ~107 each
    # Per-game keys: a game's draw does not depend on its batch.
    keys = jax.random.split(jax.random.PRNGKey(3), B)
    alone = jax.jit(ch.random_option(GO))(jax.tree.map(lambda a: a[:1], x), keys[:1])
    assert int(alone[0]) == int(jitted("random", GO)(x, keys)[0])


def test_proportional_is_the_gtp_rule_on_ticks():
    # Hand: T0-independent; 2000 ticks at ply 100: 0.8 * 2000 / ((162 - 100 + 1) // 2 = 31).
    allowance = ch.proportional_allowance(2000, ch.own_moves_left(100, max_plies=162))
    assert float(allowance) == pytest.approx(0.8 * 2000 / 31)
    assert ch.own_moves_left(160, max_plies=162) == ch.MIN_MOVES_LEFT
    rng = np.random.default_rng(0)
    clocks, plies = rng.integers(0, 5000, B), rng.integers(0, 200, B)
    got = pick("proportional", GO, inputs(clocks, t0=5000, ply=plies))
    for my, ply, index in zip(clocks, plies, got, strict=True):
        # The GTP engine's allowance for the same clock in seconds, its lag added back.
        gtp = move_allowance(TimeSettings(main=5000.0), Clock(float(my), 0), int(ply))
        expect = ch.proportional_allowance(my, ch.own_moves_left(ply, max_plies=MAX_PLIES))
        assert gtp == pytest.approx(max(float(expect) - LAG_S, 0.0), rel=1e-5, abs=1e-5)
        # ... and the budget GTP would choose for it, with a search costing k seconds per k.
        k = choose_budget(GO.budgets, float, float(expect))
        assert GO.budget(index) == k, (my, ply)


def test_midpeak_plan_matches_the_hand_computed_one():
    # T0 = 300, Hex: ideal_i = 300 w_i / sum(w) runs 9.5 .. 18.8 .. 2.8; snapped down, moves 0-17
    # get 8 and moves 18-24 get 2 (158 ticks, 142 left). By weight (centre at move 8.4: moves
    # 8, 9, 7, 10, 6, then 11, 5, ...) five moves go 8 -> 32 (24 each, 22 left), then the
    # heaviest 2-moves, 18, 19 and 20, go 2 -> 8 (6 each, 4 left), and nothing else fits.
    expect = [2] * 6 + [3] * 5 + [2] * 10 + [1] * 4
    plan = ch.midpeak_plan(300, HEX.simulations)
    assert plan.tolist() == expect
    assert int(HEX.costs[np.asarray(plan)].sum()) == 296
    assert plan.tolist() == _plan_by_hand(300, HEX.simulations)
    # Too little time: every move snaps up to the smallest budget (the plan overspends T0).
    assert ch.midpeak_plan(30, HEX.simulations).tolist() == [1] * 25
    # Traced T0, centre and width: one compile for every clock and shape.
    plans = jax.jit(jax.vmap(lambda t, c, s: ch.midpeak_plan(t, HEX.simulations, c, s)))(
        jnp.array([300, 1200, 4100]), jnp.array([0.35, 0.35, 0.6]), jnp.array([0.3, 0.3, 0.15])
    )
    for row, (t0, c, s) in zip(plans, [(300, 0.35, 0.3), (1200, 0.35, 0.3), (4100, 0.6, 0.15)]):
        assert row.tolist() == _plan_by_hand(t0, HEX.simulations, c, s)


def _plan_by_hand(t0, sims, c=0.35, s=0.3, n=25, floor=0.15):
    """Reference-notes section 7, step by step in float64."""
    w = [max(math.exp(-0.5 * ((i / (n - 1) - c) / s) ** 2), floor) for i in range(n)]
    ideal = [t0 * wi / sum(w) for wi in w]
    plan = [max([j for j, v in enumerate(sims) if v <= d] or [0]) for d in ideal]
    left = t0 - sum(sims[j] for j in plan)
    order = sorted(range(n), key=lambda i: -w[i])
    changed = True
    while changed:
        changed = False
        for m in order:
            j = plan[m]
            if j < len(sims) - 1 and sims[j + 1] - sims[j] <= left:
                left -= sims[j + 1] - sims[j]
                plan[m] += 1
                changed = True
    return [j + 1 for j in plan]


def test_midpeak_plays_its_plan_then_the_smallest_budget():
    plan = ch.midpeak_plan(300, HEX.simulations).tolist()
    moves = np.arange(B) * 2  # own moves 0, 2, ..., 30 (plies 0, 4, ...)
    got = pick("midpeak", HEX, inputs(300, t0=300, ply=2 * moves))
    assert got.tolist() == [plan[m] if m < 25 else 1 for m in moves]
    # A planned 32 with 20 ticks left plays 8; with 1 tick left policy-only.
    assert pick("midpeak", HEX, inputs([20, 1] * 8, t0=300, ply=16))[:2].tolist() == [2, 0]
    # Tuned per T0: T0 = 300 uses its own shape, other clocks the defaults.
    tuned = jax.jit(ch.midpeak(HEX, tuned={300: (0.9, 0.1)}))
    keys = jax.random.split(jax.random.PRNGKey(0), B)
    x = inputs(5000, t0=[300, 1200] * 8, ply=2 * (np.arange(B) % 8))
    got = np.asarray(tuned(x, keys))
    shaped = ch.midpeak_plan(300, HEX.simulations, 0.9, 0.1).tolist()
    default = ch.midpeak_plan(1200, HEX.simulations).tolist()
    assert got[0::2].tolist() == shaped[0:8:2] * 2
    assert got[1::2].tolist() == default[1:8:2] * 2


def test_midpeak_grid_holds_the_reference_shape():
    grid = ch.midpeak_grid()
    assert (ch.MIDPEAK_CENTRE, ch.MIDPEAK_WIDTH) in grid
    assert len(grid) == len(set(grid)) == 20
    assert ch.midpeak_grid((0.3,), (0.2, 0.4)) == ((0.3, 0.2), (0.3, 0.4))


def test_uncertainty_spends_more_on_a_flat_policy():
    flat = np.zeros(82)
    peaked = np.full(82, -10.0)
    peaked[3] = 10.0
    close = np.full(82, -10.0)
    close[[3, 4]] = 10.0  # two equal favourites: no gap, low entropy
    u = ch.uncertainty_of(jnp.asarray(np.stack([flat, peaked, close])), jnp.ones((3, 82), bool))
    assert u[0] == pytest.approx(1.0)
    assert u[1] == pytest.approx(0.0, abs=1e-3)
    assert 0.5 < float(u[2]) < 0.7
    # Go, 2000 ticks at ply 100: base allowance 0.8 * 2000 / 31 = 51.6 ticks.
    x = inputs(2000, t0=3000, ply=100, logits=np.stack([flat, peaked] * 8))
    got = pick("uncertainty", GO, x)
    assert got[:2].tolist() == [4, 1]  # 2 x 51.6 = 103 -> 96; 0.5 x 51.6 = 25.8 -> 16
    assert pick("proportional", GO, x)[0] == 2  # between the two: 51.6 -> 32
    # Illegal moves do not count: a flat policy over two legal moves is fully unsure.
    legal = jnp.zeros((1, 82), bool).at[0, :2].set(True)
    assert float(ch.uncertainty_of(jnp.asarray(peaked)[None], legal)[0]) == pytest.approx(1.0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([HEX, GO, GO_STRICT]),
    st.lists(st.integers(0, 6000), min_size=B, max_size=B),
    st.lists(st.integers(0, 250), min_size=B, max_size=B),
    st.sampled_from([100, 300, 1200, 4100]),
    st.integers(0, 2**16),
)
def test_no_baseline_overspends(options, clocks, plies, t0, seed):
    logits = np.random.default_rng(seed).normal(size=(B, 82)) * (seed % 5)
    x = inputs(clocks, t0=t0, ply=plies, logits=logits)
    clocks = np.asarray(clocks)
    for name in ch.baselines(options, bar=BARS[options.budgets]):
        index = pick(name, options, x, seed)
        cost = options.costs[index]
        assert np.all((index == 0) | (cost < clocks if options.strict else cost <= clocks)), name
        if name == "greedy":  # the largest that fits
            fits = np.asarray(ch.affordable(options, x.my_time))
            assert index.tolist() == [np.flatnonzero(f).max() for f in fits]


def test_the_bar_plays_the_budget_tuned_at_the_nearest_clock():
    assert set(ch.baselines(GO)) & {"bar-nearest", "bar-uncertainty"} == set()  # none tuned
    # By ratio: 2600 is nearer 2300 (x1.13) than 3500 (x1.35); 1800 nearer 2300 than 1200.
    t0 = [300, 1200, 2300, 3500, 4100, 100, 2600, 1800, 7000, 700, 1, 0, 300, 300, 300, 300]
    got = pick("bar-nearest", GO, inputs(5000, t0=t0))
    assert GO.budget(got).tolist() == [16, 16, 32, 64, 64, 16, 32, 32, 64, 16, 16, 16] + [16] * 4
    # A clock that cannot pay the bar's budget plays the largest that fits, else policy-only.
    x = inputs([5000, 40, 20, 10] * 4, t0=4100)
    assert GO.budget(pick("bar-nearest", GO, x))[:4].tolist() == [64, 32, 16, 0]
    with pytest.raises(ValueError, match="needs a table"):
        ch.bar_nearest(GO, {})


def test_the_bar_spent_by_uncertainty_steps_one_budget_from_the_bars():
    flat, peaked, close = np.zeros(82), np.full(82, -10.0), np.full(82, -10.0)
    peaked[3] = 10.0
    close[[3, 4]] = 10.0  # u about 0.6: unsure enough
    mid = np.full(82, -10.0)
    mid[3], mid[4] = 10.0, 9.0  # u between the thresholds: the bar's own budget
    u = ch.uncertainty_of(jnp.asarray(np.stack([mid])), jnp.ones((1, 82), bool))
    assert ch.BAR_CONFIDENT < float(u[0]) < ch.BAR_UNSURE
    rows = [flat, peaked, mid, flat, peaked, mid, flat, peaked] * 2
    t0s = [2300, 2300, 2300, 300, 300, 300, 4100, 4100] * 2
    got = GO.budget(pick("bar-uncertainty", GO, inputs(5000, t0=t0s, logits=np.stack(rows))))
    # The bar: 32 at 2300, 16 at 300, 64 at 4100; one up, one down, never below the smallest.
    assert got[:8].tolist() == [64, 16, 32, 32, 16, 16, 96, 32]
