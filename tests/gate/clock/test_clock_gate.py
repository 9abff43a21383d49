"""The recurrent clock gate: per-side GAE, GRU resets inside chunks, the opponent-independent
hidden state, the masked recurrent PPO loss by hand, and a tiny `train-gate` run with resume."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rtplan.cli import main
from rtplan.games import tree_where as where
from rtplan.gate.clock.config import ClockGateConfig
from rtplan.gate.clock.gate import ClockGate, clock_gate_player, load_clock_gate
from rtplan.gate.clock.network import MASKED_LOGIT, ClockGateInputs, unroll
from rtplan.gate.clock.ppo import ClockChunks, clock_ppo_loss
from rtplan.gate.gae import side_gae
from rtplan.gate.ppo import Batch, ppo_terms
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.checkpoint import planner_path
from rtplan.planner import Planner
from rtplan.planner.store import save_planner
from support import tiny_config

GAME = "speed-hex-v0"
SMALL = ClockGateConfig(encoder=8, time_hidden=8, hidden=6, head_hidden=8)


@pytest.fixture(scope="module")
def planner():
    cfg = dataclasses.replace(tiny_config(GAME), budgets=(2, 8), simulations=(2, 8))
    return Planner(cfg)


@pytest.fixture(scope="module")
def gate(planner):
    return ClockGate(planner, SMALL)


def _inputs(gate, key, shape):
    """Random `ClockGateInputs` of leading `shape`."""
    h, w, c = gate.planner.input_shape
    f = gate.planner.config.network.features
    k = jax.random.split(key, 5)
    return ClockGateInputs(
        obs=jax.random.bernoulli(k[0], 0.3, (*shape, h, w, c)).astype(jnp.bfloat16),
        features=jax.random.normal(k[1], (*shape, f)),
        value=jax.random.uniform(k[2], shape, minval=-1, maxval=1),
        time=jax.random.uniform(k[3], (*shape, 5)),
        last=jax.random.randint(k[4], shape, -1, gate.num_options),
        prior=jnp.zeros((*shape, gate.num_options), jnp.float32),
        stats=jax.random.uniform(k[4], (*shape, 2)),
    )


# ---- per-side GAE ------------------------------------------------------------------------------


def _side_gae_loop(reward, value, done, mover, decides, bootstrap, gamma, lam):
    """Plain Python: each (game, side) sequence of own decisions, standard GAE over it."""
    t_len, b_len = value.shape
    adv = np.zeros((t_len, b_len))
    for b in range(b_len):
        for side in (0, 1):
            # (ply, reward collected until the next own decision, ends before it)
            decisions = []
            for t in range(t_len):
                if decides[t, b] and mover[t, b] == side:
                    decisions.append([t, 0.0, False])
                if decisions and not decisions[-1][2]:
                    decisions[-1][1] += reward[t, b, side]
                if done[t, b] and decisions:
                    decisions[-1][2] = True
            next_a, next_v = 0.0, bootstrap[b, side]
            for i in reversed(range(len(decisions))):
                t, r, ended = decisions[i]
                live = 0.0 if ended else 1.0
                delta = r + gamma * live * next_v - value[t, b]
                a = delta + gamma * lam * live * next_a
                adv[t, b] = a
                next_a, next_v = a, value[t, b]
    return adv


def test_side_gae_matches_a_plain_loop():
    rng = np.random.default_rng(0)
    t_len, b_len = 17, 4
    done = rng.random((t_len, b_len)) < 0.15
    # Movers alternate inside an episode; a new episode starts with a random side.
    mover = np.zeros((t_len, b_len), np.int32)
    for b in range(b_len):
        p = rng.integers(2)
        for t in range(t_len):
            mover[t, b] = p
            p = rng.integers(2) if done[t, b] else 1 - p
    reward = np.zeros((t_len, b_len, 2), np.float32)
    winner = rng.integers(2, size=(t_len, b_len))
    reward[..., 0] = np.where(done, np.where(winner == 0, 1.0, -1.0), 0.0)
    reward[..., 1] = -reward[..., 0]
    value = rng.uniform(-1, 1, (t_len, b_len)).astype(np.float32)
    decides = rng.random((t_len, b_len)) < 0.8  # some plies are another player's
    bootstrap = rng.uniform(-1, 1, (b_len, 2)).astype(np.float32)
    adv, target = side_gae(
        jnp.asarray(reward),
        jnp.asarray(value),
        jnp.asarray(done),
        jnp.asarray(mover),
        jnp.asarray(decides),
        jnp.asarray(bootstrap),
        gamma=0.9,
        lam=0.8,
    )
    want = _side_gae_loop(reward, value, done, mover, decides, bootstrap, 0.9, 0.8)
    np.testing.assert_allclose(np.asarray(adv), want, atol=1e-5)
    np.testing.assert_allclose(np.asarray(target), np.where(decides, want + value, 0), atol=1e-5)


def test_side_gae_terminal_reward_reaches_the_loser():
    # One game, four plies, sides 0, 1, 0, 1; side 1 wins on the last ply.
    reward = np.zeros((4, 1, 2), np.float32)
    reward[3, 0] = (-1.0, 1.0)
    adv, target = side_gae(
        jnp.asarray(reward),
        jnp.zeros((4, 1)),
        jnp.asarray([[False], [False], [False], [True]]),
        jnp.asarray([[0], [1], [0], [1]]),
        jnp.ones((4, 1), bool),
        jnp.full((1, 2), 7.0),  # never used: the episode ends
        gamma=0.5,
        lam=1.0,
    )
    # Side 0: ply 2 gets -1 (the opponent's winning reply), ply 0 gets 0.5 * -1.
    np.testing.assert_allclose(np.asarray(target)[:, 0], [-0.5, 0.5, -1.0, 1.0])


# ---- the GRU state: resets inside chunks, one state per side ------------------------------------


def test_chunk_spanning_a_reset_equals_two_separate_runs(gate):
    params = gate.init_params(jax.random.PRNGKey(0))
    t_len, b_len, cut = 7, 3, 4
    xs = _inputs(gate, jax.random.PRNGKey(1), (t_len, b_len))
    mover = jnp.asarray(np.arange(t_len)[:, None] % 2 * np.ones((1, b_len), np.int32))
    start = np.zeros((t_len, b_len), bool)
    start[cut] = True  # a new episode at ply 4 in every game
    decides = jnp.ones((t_len, b_len), bool)
    carry0 = jax.random.normal(jax.random.PRNGKey(2), (b_len, 2, SMALL.hidden))
    _, logits, values = unroll(gate.net, params, carry0, xs, mover, jnp.asarray(start), decides)

    def part(sl, carry):
        x = jax.tree.map(lambda a: a[sl], xs)
        no = jnp.zeros((sl.stop - (sl.start or 0), b_len), bool)
        return unroll(gate.net, params, carry, x, mover[sl], no, decides[sl])

    _, l1, v1 = part(slice(0, cut), carry0)
    _, l2, v2 = part(slice(cut, t_len), jnp.zeros_like(carry0))
    np.testing.assert_allclose(logits, jnp.concatenate([l1, l2]), atol=1e-6)
    np.testing.assert_allclose(values, jnp.concatenate([v1, v2]), atol=1e-6)
    # Without the reset flag the second part would differ (the state carries over).
    _, l_no, _ = unroll(gate.net, params, carry0, xs, mover, jnp.zeros_like(start), decides)
    assert not np.allclose(l_no[cut:], l2)


def test_gate_choices_do_not_depend_on_the_opponent(gate, planner):
    """The player steps its state on its own plies only: the same boards and clocks at its
    plies give the same choices whatever moved in between (another gate, or nothing)."""
    pparams = planner.init_params(jax.random.PRNGKey(0))
    params = gate.init_params(jax.random.PRNGKey(3))
    other = gate.init_params(jax.random.PRNGKey(4))
    game = planner.game
    states = jax.vmap(game.init)(jax.random.split(jax.random.PRNGKey(5), 2))
    states = jax.vmap(game.set_initial_time, (0, None))(states, 20)
    # Jitted: one program each, not one per operation at every ply.
    step, evaluate = jax.jit(jax.vmap(game.step)), jax.jit(planner.evaluate)
    inputs, apply = jax.jit(gate.inputs), jax.jit(gate.apply)
    seq, rng = [], np.random.default_rng(1)
    for _ in range(8):  # random legal moves, each charged a random cost
        seq.append(states)
        legal = np.asarray(states.legal_action_mask)
        actions = jnp.asarray([rng.choice(np.flatnonzero(row)) for row in legal])
        states = step(states, actions, jnp.asarray(rng.integers(0, 4, 2)))
    me = seq[0].current_player  # the gate is the first mover in both games
    player = clock_gate_player(gate, params)
    choose = jax.jit(player.choose)
    carry, mine = player.init(2), []
    for s in seq:
        out = evaluate(pparams, s)
        new, option = choose(carry, s, out, jax.random.split(jax.random.PRNGKey(0), 2))
        turn = s.current_player == me
        carry = where(turn, new, carry)
        mine.append(np.where(np.asarray(turn), np.asarray(option), -1))
    # Self-play replay: both sides are gates (the opponent with other params) in one unroll.
    carry2 = jnp.zeros((2, 2, SMALL.hidden))
    last = -np.ones((2, 2), np.int32)
    for t, s in enumerate(seq):
        out = evaluate(pparams, s)
        p = np.asarray(s.current_player)
        x = inputs(s, out, jnp.asarray(last[np.arange(2), p]))
        h = carry2[jnp.arange(2), p]
        use = np.where(p == np.asarray(me), 0, 1)
        outs = [apply(w, h, x, gate.mask(s)) for w in (params, other)]
        h_new = jnp.where(use[:, None] == 0, outs[0][0], outs[1][0])
        logits = jnp.where(use[:, None] == 0, outs[0][1], outs[1][1])
        option = np.asarray(jnp.argmax(logits, -1))
        carry2 = carry2.at[jnp.arange(2), p].set(h_new)
        last[np.arange(2), p] = option
        want = mine[t]
        got = np.where(p == np.asarray(me), option, -1)
        np.testing.assert_array_equal(got, want)


def test_unaffordable_options_are_masked(gate, planner):
    pparams = planner.init_params(jax.random.PRNGKey(0))
    params = gate.init_params(jax.random.PRNGKey(1))
    states = jax.vmap(planner.game.init)(jax.random.split(jax.random.PRNGKey(2), 3))
    # Clocks of 0, 5 and 100 ticks: budgets cost 2 and 8 ticks.
    clocks = jnp.asarray([[0, 0], [5, 5], [100, 100]], jnp.int32)
    states = states.replace(inner=states.inner.replace(clocks=clocks))
    out = planner.evaluate(pparams, states)
    carry, _, logits, _, mask = gate.step(params, gate.zero_carry(3), states, out)
    np.testing.assert_array_equal(mask, [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    keys = jax.random.split(jax.random.PRNGKey(3), 3)
    player = clock_gate_player(gate, params, greedy=False)
    choose = jax.jit(player.choose)  # one program, not one per operation of 20 choices
    for i in range(20):
        _, option = choose(gate.zero_carry(3), states, out, jax.random.split(keys[i % 3], 3))
        assert np.all(np.asarray(mask)[np.arange(3), np.asarray(option)])
    assert int(jnp.argmax(logits[0])) == 0  # an empty clock plays policy-only


def test_a_prior_adds_its_scaled_choice_to_the_logits(gate, planner):
    """With prior proportional the logits are the same network's plus `prior_scale` x the
    one-hot of proportional's choice (so a fresh gate plays it), masked as before; a prior
    that reads the planner or draws at random is refused."""
    from rtplan.gate.clock.heuristics import clock_inputs, proportional

    pparams = planner.init_params(jax.random.PRNGKey(0))
    params = gate.init_params(jax.random.PRNGKey(1))
    with_prior = ClockGate(planner, dataclasses.replace(SMALL, prior="proportional"))
    states = jax.vmap(planner.game.init)(jax.random.split(jax.random.PRNGKey(2), 4))
    clocks = jnp.asarray([[0, 0], [5, 5], [200, 200], [900, 900]], jnp.int32)
    states = states.replace(inner=states.inner.replace(clocks=clocks))
    out = planner.evaluate(pparams, states)
    _, _, plain, _, mask = gate.step(params, gate.zero_carry(4), states, out)
    _, x, logits, _, _ = with_prior.step(params, with_prior.zero_carry(4), states, out)
    choice = proportional(gate.options)(clock_inputs(states), None)
    assert len(set(np.asarray(choice).tolist())) > 1  # the clocks give different choices
    want = jnp.where(mask, plain + 3.0 * jax.nn.one_hot(choice, gate.num_options), MASKED_LOGIT)
    np.testing.assert_allclose(logits, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(x.prior, jax.nn.one_hot(choice, gate.num_options))
    np.testing.assert_array_equal(jnp.argmax(logits, -1), choice)  # a fresh gate plays it
    for name in ("uncertainty", "random", "nobody"):
        with pytest.raises(ValueError, match=f"clock gate prior '{name}'"):
            ClockGate(planner, dataclasses.replace(SMALL, prior=name))


def test_a_bar_prior_and_the_planners_uncertainty_are_inputs_that_travel_in_the_gate_file(
    planner, tmp_path
):
    """`prior="bar-nearest"` with the bar's table recorded in the config adds the bar's choice
    at each clock; `stats` feeds `planner_stats` to the network (they change the logits, and a
    gate without `stats` ignores them); the file round-trips both, and a bar prior without its
    table, or the bar's planner-reading rule as a prior, is refused."""
    from rtplan.gate.clock.heuristics import bar_nearest, clock_inputs
    from rtplan.gate.files import save_gate
    from rtplan.gate.stats import planner_stats

    cfg = dataclasses.replace(SMALL, prior="bar-nearest", stats=True, bar=[[300, 2], [2300, 8]])
    assert cfg.bar == ((300, 2), (2300, 8))  # JSON's lists read back as pairs
    gate = ClockGate(planner, cfg)
    pparams = planner.init_params(jax.random.PRNGKey(0))
    params = gate.init_params(jax.random.PRNGKey(1))
    states = jax.vmap(planner.game.init)(jax.random.split(jax.random.PRNGKey(2), 4))
    states = states.replace(
        inner=states.inner.replace(
            clocks=jnp.asarray([[300, 300], [300, 300], [2300, 2300], [5, 5]], jnp.int32),
            initial_time=jnp.asarray([300, 250, 2300, 2300], jnp.int32),
        )
    )
    out = planner.evaluate(pparams, states)
    _, x, logits, _, mask = gate.step(params, gate.zero_carry(4), states, out)
    choice = bar_nearest(gate.options, {300: 2, 2300: 8})(clock_inputs(states), None)
    assert gate.options.budget(choice).tolist() == [2, 2, 8, 2]  # the last clock pays only 2
    np.testing.assert_array_equal(x.prior, jax.nn.one_hot(choice, gate.num_options))
    np.testing.assert_allclose(x.stats, planner_stats(out.logits, states.legal_action_mask))
    np.testing.assert_array_equal(jnp.argmax(logits, -1), choice)  # a fresh gate plays the bar
    flipped = x.replace(stats=1.0 - x.stats)
    assert not np.allclose(gate.apply(params, gate.zero_carry(4).h, flipped, mask)[1], logits)
    blind = ClockGate(planner, SMALL)
    bparams = blind.init_params(jax.random.PRNGKey(1))
    h = blind.zero_carry(4).h
    np.testing.assert_array_equal(
        blind.apply(bparams, h, flipped, mask)[1], blind.apply(bparams, h, x, mask)[1]
    )
    path = tmp_path / "gate.msgpack"
    save_gate(path, params, {"kind": "clock-gate", **gate.metadata()})
    loaded, lparams, _ = load_clock_gate(path, planner)
    assert loaded.config == cfg
    np.testing.assert_array_equal(
        loaded.step(lparams, loaded.zero_carry(4), states, out)[2], logits
    )
    with pytest.raises(ValueError, match="needs the clock-aware bar's table"):
        ClockGate(planner, dataclasses.replace(SMALL, prior="bar-nearest"))
    with pytest.raises(ValueError, match="clock gate prior 'bar-uncertainty'"):
        ClockGate(planner, dataclasses.replace(cfg, prior="bar-uncertainty"))


def test_with_bar_records_the_table_for_the_bars_rules_only_and_the_config_needs_no_jax():
    """`with_bar` records the bar's table where the prior is one of `BAR_RULES` (the names
    live in the JAX-free config module, which `heuristics` re-exports), and nowhere else."""
    import subprocess
    import sys

    from rtplan.gate.clock import heuristics
    from rtplan.gate.clock.config import BAR_RULES

    assert heuristics.BAR_RULES is BAR_RULES
    table = {2300: 8, 300: 2}
    assert dataclasses.replace(SMALL, prior="bar-nearest").with_bar(table).bar == (
        (300, 2),
        (2300, 8),
    )
    for prior in ("none", "proportional", "bar-like"):  # a look-alike name is not a bar rule
        assert dataclasses.replace(SMALL, prior=prior).with_bar(table).bar == ()
    assert dataclasses.replace(SMALL, prior="bar-nearest").with_bar(None).bar == ()
    code = "import sys, rtplan.gate.clock.config; assert 'jax' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_runner_mixes_clock_budgets_in_one_batch(planner):
    """Clock options play one move whatever the budget, so groups of different budgets fit one
    output (the runner once padded them to the largest budget's width)."""
    from rtplan.planner.batching import OptionRunner

    params = planner.init_params(jax.random.PRNGKey(0))
    states = jax.vmap(planner.game.init)(jax.random.split(jax.random.PRNGKey(1), 3))
    keys = jax.random.split(jax.random.PRNGKey(2), 3)
    out = OptionRunner(planner, max_batch=4)(params, keys, states, np.array([2, 8, 0]))
    assert out.actions.shape == (3, 1)
    np.testing.assert_array_equal(np.asarray(out.cost), [2, 8, 0])


# ---- recurrent PPO loss by hand -----------------------------------------------------------------


def test_clock_ppo_loss_matches_a_hand_computation(gate):
    params = gate.init_params(jax.random.PRNGKey(0))
    n, length = 2, 3
    rng = np.random.default_rng(2)
    xs = _inputs(gate, jax.random.PRNGKey(6), (n, length))
    carry = jax.random.normal(jax.random.PRNGKey(7), (n, 2, SMALL.hidden))
    mover = np.array([[0, 1, 0], [1, 0, 1]], np.int32)
    start = np.array([[False, False, True], [False, False, False]])
    decides = np.array([[True, True, True], [True, False, True]])
    mask = np.ones((n, length, gate.num_options), bool)
    mask[0, 1, 1:] = False  # no choice there: out of the policy terms, in the value term
    mask[1, 2, 2] = False
    action = np.array([[1, 0, 2], [0, 1, 1]], np.int32)
    chunks = ClockChunks(
        inputs=xs,
        carry=carry,
        mover=jnp.asarray(mover),
        start=jnp.asarray(start),
        decides=jnp.asarray(decides),
        mask=jnp.asarray(mask),
        action=jnp.asarray(action),
        log_prob=jnp.asarray(rng.normal(-1.0, 0.3, (n, length)), jnp.float32),
        advantage=jnp.asarray(rng.normal(size=(n, length)), jnp.float32),
        target=jnp.asarray(rng.normal(size=(n, length)), jnp.float32),
    )
    coefs = dict(clip=0.2, vf_coef=0.5, ent_coef=0.01)
    loss, aux = clock_ppo_loss(params, gate.net, chunks, **coefs)

    # By hand: step the network ply by ply per chunk, one state per side.
    logits, values = np.zeros((n, length, gate.num_options)), np.zeros((n, length))
    for i in range(n):
        h = np.array(carry[i])
        for t in range(length):
            if start[i, t]:
                h[:] = 0
            x = jax.tree.map(lambda a, i=i, t=t: a[i, t][None], xs)
            h_new, lg, v = gate.net.apply(params, jnp.asarray(h[mover[i, t]])[None], x)
            logits[i, t], values[i, t] = np.asarray(lg[0]), float(v[0])
            if decides[i, t]:
                h[mover[i, t]] = np.asarray(h_new[0])
    logits = np.where(mask, logits, MASKED_LOGIT)
    top = logits.max(-1, keepdims=True)
    log_p = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
    new_lp = np.take_along_axis(log_p, action[..., None], -1)[..., 0]
    ratio = np.exp(new_lp - np.asarray(chunks.log_prob))
    pol = decides & (mask.sum(-1) > 1)
    adv = np.asarray(chunks.advantage)
    m = adv[pol].mean()
    a = (adv - m) / (np.sqrt(((adv[pol] - m) ** 2).mean()) + 1e-8)
    surr = np.minimum(ratio * a, np.clip(ratio, 0.8, 1.2) * a)
    policy_loss = -surr[pol].mean()
    value_loss = 0.5 * ((values - np.asarray(chunks.target)) ** 2)[decides].mean()
    p = np.exp(log_p)
    entropy = (-(p * log_p).sum(-1))[pol].mean()
    want = policy_loss + 0.5 * value_loss - 0.01 * entropy
    assert float(aux["policy_loss"]) == pytest.approx(policy_loss, abs=1e-5)
    assert float(aux["value_loss"]) == pytest.approx(value_loss, abs=1e-5)
    assert float(aux["entropy"]) == pytest.approx(entropy, abs=1e-5)
    assert float(loss) == pytest.approx(want, abs=1e-5)


def test_ppo_terms_without_masks_are_unchanged():
    rng = np.random.default_rng(3)
    logits = jnp.asarray(rng.normal(size=(6, 4)), jnp.float32)
    batch = Batch(
        inputs=None,
        action=jnp.asarray(rng.integers(0, 4, 6), jnp.int32),
        log_prob=jnp.asarray(rng.normal(-1.4, 0.2, 6), jnp.float32),
        advantage=jnp.asarray(rng.normal(size=6), jnp.float32),
        target=jnp.asarray(rng.normal(size=6), jnp.float32),
    )
    baseline = jnp.asarray(rng.normal(size=6), jnp.float32)
    coefs = dict(clip=0.2, vf_coef=0.5, ent_coef=0.01)
    plain, _ = ppo_terms(logits, baseline, batch, **coefs)
    ones = jnp.ones(6, bool)
    masked, _ = ppo_terms(logits, baseline, batch, policy_mask=ones, value_mask=ones, **coefs)
    assert float(masked) == pytest.approx(float(plain), abs=1e-5)


# ---- train-gate on a clock game: harness, resume, export, player --------------------------------

TINY = [
    "--num-envs", "2", "--plies", "6", "--chunk", "3", "--epochs", "1", "--minibatches", "2",
    "--eval-every", "0", "--checkpoint-every", "1", "--gate-encoder", "8", "--gate-hidden", "8",
    "--gate-head", "8", "--eval-opponent", "2", "--no-progress",
]  # fmt: skip


@pytest.fixture(scope="module")
def planner_file(planner, tmp_path_factory):
    path = planner_path(tmp_path_factory.mktemp("ck"), GAME)
    save_planner(path, planner.config, planner.init_params(jax.random.PRNGKey(0)))
    return str(path)


@pytest.mark.slow  # ~3-4 min on this 2-core box: three runs, each compiling its own steps
def test_train_gate_on_a_clock_game_resumes_exactly(planner_file, planner, tmp_path):
    straight, split = tmp_path / "straight", tmp_path / "split"
    base = ["train-gate", "--game", GAME, "--planner", planner_file, *TINY]
    assert main([*base, "--out", str(straight), "--iterations", "2"]) == 0
    assert main([*base, "--out", str(split), "--iterations", "1"]) == 0
    assert main([*base, "--out", str(split), "--iterations", "2", "--resume"]) == 0
    a, meta = ckpt.load(straight / "checkpoint.msgpack", _template(straight))
    b, _ = ckpt.load(split / "checkpoint.msgpack", _template(split))
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert meta["iteration"] == 2
    log = (split / "log.csv").read_text().splitlines()
    assert len(log) == 3 and "mean_budget" in log[0] and "option_cost_ratio" in log[0]
    exported = json.loads((split / "gate.msgpack.json").read_text())
    assert exported["kind"] == "clock-gate" and exported["game"] == GAME
    gate, params, _ = load_clock_gate(split / "gate.msgpack", planner, planner_file=planner_file)
    player = clock_gate_player(gate, params)
    states = jax.vmap(planner.game.init)(jax.random.split(jax.random.PRNGKey(0), 3))
    pparams = ckpt.load(planner_file, {"params": _pparams(planner)})[0]["params"]
    out = planner.evaluate(pparams, states)
    carry, option = jax.jit(player.choose)(
        player.init(3), states, out, jnp.zeros((3, 2), jnp.uint32)
    )
    assert option.shape == (3,) and option.dtype == jnp.int32
    assert carry.last.tolist() == option.tolist()


def test_train_gate_refuses_the_other_kinds_flags(planner_file, tmp_path):
    argv = ["train-gate", "--game", GAME, "--planner", planner_file, "--out", str(tmp_path)]
    assert main([*argv, "--meta-steps", "4", *TINY]) != 0


def _pparams(planner):
    return jax.eval_shape(planner.init_params, jax.random.PRNGKey(0))


def _template(run):
    """The checkpoint template of a run folder, from its own metadata."""
    from rtplan.gate.clock.config import ClockGateTrainConfig
    from rtplan.gate.clock.train import ClockGatePPO
    from rtplan.harness.config import from_dict

    meta = ckpt.load_metadata(run / "checkpoint.msgpack")
    algo = ClockGatePPO(from_dict(ClockGateTrainConfig, meta["train_config"]))
    return algo.template(meta)


@pytest.mark.slow  # ~40 s; test_clock_eval covers play_match's pairing
def test_in_training_evaluation_plays_the_gate_through_play_match(planner_file, planner):
    """The trainer's evaluation is the one clock-match path (`planner.matches.play_match`): the
    greedy gate against always-k on the tuning openings, colours swapped, at each clock."""
    from rtplan.gate.clock.config import ClockGateTrainConfig
    from rtplan.gate.clock.train import ClockGatePPO

    cfg = ClockGateTrainConfig(
        game_id=GAME, planner=planner_file, num_envs=2, plies=6, chunk=3, minibatches=2,
        gate_encoder=8, gate_hidden=8, gate_head=8, eval_seeds=2, eval_clocks="0,8",
        eval_opponent=2,
    )  # fmt: skip
    algo = ClockGatePPO(cfg)
    state = algo.init()
    score, columns = algo.evaluate(state, 0)
    assert set(columns) == {"eval_t0", "eval_t8", "eval_score", "eval_budget"}
    assert all(0.0 <= columns[c] <= 1.0 for c in ("eval_t0", "eval_t8"))
    assert score == columns["eval_score"] == (columns["eval_t0"] + columns["eval_t8"]) / 2
    # A clock of 0 ticks affords no search: every move of the gate is policy-only (budget 0).
    gate = clock_gate_player(algo.gate, state.params)
    from rtplan.gate.clock.heuristics import always as always_k
    from rtplan.gate.clock.players import chooser_player
    from rtplan.planner.episodes import seeds_of
    from rtplan.planner.matches import play_match

    played = play_match(
        planner, algo.planner_params, gate, chooser_player("k2", always_k(algo.options, 2)),
        seeds_of("tuning", 2), max_plies=algo.game.max_plies, opening_plies=cfg.opening_plies,
        initial_time=0,
    )  # fmt: skip
    assert float(played.returns.mean()) == columns["eval_t0"]
    assert all((ks == 0).all() for ks in played.ks)
    # The opponent may be a heuristic by name (an old run's budget, an int, still reads).
    from rtplan.gate.clock.heuristics import proportional

    named = ClockGatePPO(dataclasses.replace(cfg, eval_clocks="8", eval_opponent="proportional"))
    _, columns = named.evaluate(state, 0)
    played = play_match(
        planner, algo.planner_params, gate,
        chooser_player("proportional", proportional(algo.options)), seeds_of("tuning", 2),
        max_plies=algo.game.max_plies, opening_plies=cfg.opening_plies, initial_time=8,
    )  # fmt: skip
    assert float(played.returns.mean()) == columns["eval_t8"]
    with pytest.raises(ValueError, match="eval_opponent='nobody' is not 0, a budget of"):
        ClockGatePPO(dataclasses.replace(cfg, eval_opponent="nobody"))


def test_mixed_training_gives_a_baseline_one_side_and_learns_only_from_the_gate(
    planner_file, planner, tmp_path
):
    """`--opponents`: in a mixed game one side (drawn per game) is a baseline; its plies play
    the baseline's option, are not the gate's decisions and leave that side's state alone."""
    from rtplan.gate.clock.config import ClockGateTrainConfig
    from rtplan.gate.clock.train import SELF_PLAY, ClockGatePPO

    def config(**kw):
        return ClockGateTrainConfig(
            game_id=GAME, planner=planner_file, num_envs=2, plies=6, chunk=3, minibatches=2,
            gate_encoder=8, gate_hidden=8, gate_head=8, eval_every=0, eval_opponent=2, **kw,
        )  # fmt: skip

    with pytest.raises(ValueError, match="unknown baseline"):
        ClockGatePPO(config(opponents="k3"))
    # The clock-aware bar's rules are opponents once its table is given (`--bar`).
    with pytest.raises(ValueError, match="unknown baseline"):
        ClockGatePPO(config(opponents="bar-nearest"))
    bar = tmp_path / "fixed-per-t0.json"
    bar.write_text('{"per_t0": {"12": "k8"}}')
    rules = "bar-nearest,bar-uncertainty"
    ClockGatePPO(config(opponents=rules, bar=str(bar)))  # the rules are known now
    # A bar prior records the table in the gate's config; the planner's uncertainty an input.
    barred = ClockGatePPO(config(bar=str(bar), gate_prior="bar-nearest", gate_stats=True))
    assert barred.gate.config.bar == ((12, 8),) and barred.gate.config.stats
    assert ClockGatePPO(config(bar=str(bar))).gate.config.bar == ()  # no bar prior, no table
    with pytest.raises(ValueError, match="needs the clock-aware bar's table"):
        ClockGatePPO(config(gate_prior="bar-nearest"))
    bar.write_text('{"per_t0": {}}')
    with pytest.raises(ValueError, match="the bar's table is empty"):
        ClockGatePPO(config(opponents=rules, bar=str(bar)))
    algo = ClockGatePPO(config(opponents="k8", opponent_share=1.0))
    state = algo.init()
    sp = state.games
    assert (np.asarray(sp.opp_side) != SELF_PLAY).all()
    before = np.asarray(sp.carry)
    _, steps, carries, _, _ = algo.rollout(state.params, sp)
    mover, decides = np.asarray(steps["mover"]), np.asarray(steps["decides"])
    opp_side = np.asarray(sp.opp_side)
    first = mover[0] == opp_side  # the first ply of each game: before any reset
    np.testing.assert_array_equal(decides[0], ~first)
    # always-8 plays 8 (option 2) where its clock pays for it, never a sampled option.
    mask = np.asarray(steps["mask"])[0]
    want = np.where(mask[:, 2], 2, np.where(mask[:, 1], 1, 0))
    np.testing.assert_array_equal(np.asarray(steps["action"])[0][first], want[first])
    # The baseline's side keeps the state it had (zeros) after its first move.
    after = np.asarray(carries[1]) if len(carries) > 1 else None
    if after is not None:
        theirs = after[np.arange(2), opp_side]
        np.testing.assert_array_equal(theirs, before[np.arange(2), opp_side])
    # Without opponents every game is self-play and every ply is the gate's.
    plain = ClockGatePPO(config())
    psp = plain.init().games
    assert (np.asarray(psp.opp_side) == SELF_PLAY).all()


def test_a_shipped_clock_gate_says_how_it_was_evaluated_and_draws_its_curve(tmp_path):
    """`ship-gate` on a clock gate run: gate.md gives its score per clock against the evaluation
    opponent (not the committed gates' eval_mean), and the curve draws the per-clock scores."""
    from rtplan.gate.ship import _describe
    from rtplan.harness.curve import plot_learning_curve

    ev = {"eval_score": 0.672, "eval_t300": 0.5625, "eval_t2300": 0.78125, "eval_budget": 26.7}
    text = _describe({**ev, "iteration": 400}, {"eval_opponent": 64, "eval_seeds": 16})
    assert "score 0.672 (T0 300: 0.562, T0 2300: 0.781) against always-64" in text
    assert "iteration 400" in text and "first 16 tuning openings" in text
    assert "against policy-only" in _describe({**ev, "iteration": 1}, {"eval_opponent": 0})
    assert ") against proportional at" in _describe(ev, {"eval_opponent": "proportional"})
    log = tmp_path / "log.csv"
    log.write_text(
        "iteration,frames,eval_t300,eval_t2300,eval_score\n1,64,,,\n2,128,0.5,0.75,0.625\n"
    )
    plot_learning_curve(log, tmp_path / "curve.png", "clock gate")
    assert (tmp_path / "curve.png").stat().st_size > 1000
