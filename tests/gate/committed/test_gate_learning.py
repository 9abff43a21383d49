"""Gate PPO pieces: SMDP-GAE against a plain loop, the loss against a hand computation, a toy
SMDP whose best budget the PPO update learns."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rtplan.gate import Batch, GateConfig, GateInputs, GateNet, make_update, ppo_terms, smdp_gae


def gae_loop(reward, value, next_value, frames, term, trunc, gamma, lam):
    """Variable-duration GAE as a plain Python loop over each game's steps."""
    steps, games = reward.shape
    adv = np.zeros((steps, games))
    for b in range(games):
        nxt = 0.0
        for t in reversed(range(steps)):
            d = gamma ** frames[t, b]
            boot = 0.0 if term[t, b] else d * next_value[t, b]
            delta = reward[t, b] + boot - value[t, b]
            cont = 0.0 if (term[t, b] or trunc[t, b]) else d * lam
            nxt = delta + cont * nxt
            adv[t, b] = nxt
    return adv


@pytest.mark.parametrize("case", ["k>1", "terminations", "truncations", "mixed"])
def test_smdp_gae_scan_equals_plain_loop(case):
    rng = np.random.default_rng(hash(case) % 2**32)
    steps, games = 13, 5
    reward = rng.normal(size=(steps, games))
    value = rng.normal(size=(steps, games))
    next_value = rng.normal(size=(steps, games))
    frames = rng.integers(2 if case == "k>1" else 1, 5, size=(steps, games))
    term = np.zeros((steps, games), bool)
    trunc = np.zeros((steps, games), bool)
    if case in ("terminations", "mixed"):
        term = rng.random((steps, games)) < 0.25
    if case in ("truncations", "mixed"):
        trunc = (rng.random((steps, games)) < 0.25) & ~term
    adv, target = smdp_gae(
        *map(jnp.asarray, (reward, value, next_value, frames, term, trunc)), gamma=0.97, lam=0.9
    )
    want = gae_loop(reward, value, next_value, frames, term, trunc, 0.97, 0.9)
    np.testing.assert_allclose(adv, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(target, want + value, rtol=1e-5, atol=1e-5)


def test_smdp_gae_hand_values():
    """Two games, two steps: k=2 then a truncation (bootstraps, cuts) vs a termination."""
    g, lam = 0.5, 0.5
    reward = jnp.array([[1.0, 1.0], [2.0, 2.0]])
    value = jnp.array([[0.5, 0.5], [1.0, 1.0]])
    next_value = jnp.array([[1.0, 1.0], [4.0, 4.0]])
    frames = jnp.array([[2, 2], [1, 1]])
    term = jnp.array([[False, False], [False, True]])
    trunc = jnp.array([[False, False], [True, False]])
    adv, _ = smdp_gae(reward, value, next_value, frames, term, trunc, gamma=g, lam=lam)
    a1 = np.array([2.0 + 0.5 * 4.0 - 1.0, 2.0 - 1.0])  # truncation bootstraps; termination not
    a0 = 1.0 + 0.25 * 1.0 - 0.5 + 0.25 * lam * a1
    np.testing.assert_allclose(adv, np.stack([a0, a1]), rtol=1e-6)


def test_ppo_terms_against_hand_computation():
    logits = jnp.array([[0.0, np.log(3.0)], [np.log(2.0), 0.0]])  # probs [.25,.75], [2/3,1/3]
    batch = Batch(
        inputs=None,
        action=jnp.array([1, 0]),
        log_prob=jnp.log(jnp.array([0.5, 0.5])),  # ratios 1.5 and 4/3
        advantage=jnp.array([1.0, -1.0]),  # normalises to [1, -1]
        target=jnp.array([1.0, 0.0]),
    )
    baseline = jnp.array([0.0, 2.0])
    loss, aux = ppo_terms(logits, baseline, batch, clip=0.2, vf_coef=0.5, ent_coef=0.1)
    # Game 0: min(1.5 * 1, 1.2 * 1) = 1.2. Game 1: min(4/3 * -1, 1.2 * -1) = -4/3.
    policy = -(1.2 - 4.0 / 3.0) / 2
    value = 0.5 * (1.0 + 4.0) / 2
    h = lambda p: -sum(x * np.log(x) for x in p)  # noqa: E731
    entropy = (h([0.25, 0.75]) + h([2 / 3, 1 / 3])) / 2
    np.testing.assert_allclose(aux["policy_loss"], policy, rtol=1e-5)
    np.testing.assert_allclose(aux["value_loss"], value, rtol=1e-5)
    np.testing.assert_allclose(aux["entropy"], entropy, rtol=1e-5)
    np.testing.assert_allclose(aux["clip_frac"], 1.0)
    np.testing.assert_allclose(loss, policy + 0.5 * value - 0.1 * entropy, rtol=1e-5)


def test_ppo_learns_the_best_budget_of_a_toy_smdp():
    """Two contexts, told apart by the planner features; each has its own best budget (option 1
    in context 0, option 0 in context 1). An option of k frames pays its reward over k frames.
    Rollouts, GAE and update go through the gate's code."""
    budgets = np.array([1, 2, 3])
    pay = jnp.array([[0.2, 1.0, 0.1], [1.0, 0.1, 0.3]])  # [context, option]
    net = GateNet(GateConfig(channels=8, head_hidden=16), num_budgets=3)
    update = jax.jit(
        make_update(
            net, optax.adam(3e-3), epochs=4, minibatches=4, clip=0.2, vf_coef=0.5, ent_coef=0.0
        )
    )
    steps, games = 8, 16

    def inputs(ctx):
        n = ctx.shape[0]
        return GateInputs(
            obs=jnp.zeros((n, 2, 2, 1), jnp.bfloat16),
            time=jnp.zeros((n, 2)),
            features=jax.nn.one_hot(ctx, 2),
            value=jnp.zeros((n,)),
        )

    def policy(params, ctx):
        x = inputs(ctx)
        return net.apply(params, x.obs.astype(jnp.float32), x.time, x.features, x.value)

    @jax.jit
    def rollout(params, key):
        ctx = jax.random.bernoulli(key, shape=(steps, games)).astype(jnp.int32)
        logits, value = policy(params, ctx.reshape(-1))
        action = jax.random.categorical(jax.random.fold_in(key, 1), logits)
        log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], -1)[:, 0]
        reward = pay[ctx.reshape(-1), action]
        frames = jnp.asarray(budgets)[action]
        shape = (steps, games)
        adv, target = smdp_gae(
            reward.reshape(shape),
            value.reshape(shape),
            jnp.zeros(shape),
            frames.reshape(shape),
            jnp.ones(shape, bool),  # every option ends its episode
            jnp.zeros(shape, bool),
            gamma=0.99,
            lam=0.95,
        )
        batch = Batch(
            inputs=inputs(ctx.reshape(-1)),
            action=action,
            log_prob=log_prob,
            advantage=adv.reshape(-1),
            target=target.reshape(-1),
        )
        return batch

    key = jax.random.PRNGKey(0)
    x0 = inputs(jnp.zeros((1,), jnp.int32))
    params = net.init(key, x0.obs.astype(jnp.float32), x0.time, x0.features, x0.value)
    opt_state = optax.adam(3e-3).init(params)
    for i in range(40):
        batch = rollout(params, jax.random.fold_in(key, i))
        params, opt_state, _ = update(params, opt_state, batch, jax.random.fold_in(key, 1000 + i))
    probs = jax.nn.softmax(policy(params, jnp.array([0, 1]))[0])
    assert int(probs[0].argmax()) == 1 and int(probs[1].argmax()) == 0
    assert probs[0, 1] > 0.9 and probs[1, 0] > 0.9
