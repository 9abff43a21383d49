"""The planner's losses equal plain-loop computations of the same definitions."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rtplan.planner.losses import l2_loss, planner_loss, policy_loss, value_loss
from rtplan.planner.network import AZNet, NetOutput, NetworkConfig, h_inverse
from rtplan.planner.replay import Sample

CATEGORICAL = NetworkConfig(
    torso="mlp", channels=8, blocks=1, features=4, value_hidden=4, value_bins=11, value_max=20.0
)


# Plain-loop references -------------------------------------------------------------------------


def _policy_ref(logits, target, legal, valid) -> float:
    """Mean over valid rows of -sum_{a legal} target[a] * log softmax_{legal}(logits)[a]."""
    total, count = 0.0, 0
    for i in range(logits.shape[0]):
        if not valid[i]:
            continue
        acts = [a for a in range(logits.shape[1]) if legal[i, a]]
        top = max(logits[i, a] for a in acts)
        log_z = top + math.log(sum(math.exp(logits[i, a] - top) for a in acts))
        total -= sum(target[i, a] * (logits[i, a] - log_z) for a in acts)
        count += 1
    return total / max(count, 1)


def _h(x: float) -> float:
    return math.copysign(math.sqrt(abs(x) + 1.0) - 1.0, x) + 1e-3 * x


def _two_hot_ref(value: float, support: np.ndarray) -> np.ndarray:
    """Weights on the two support points around h(value) (clipped to the support's ends)."""
    y = min(max(_h(value), support[0]), support[-1])
    out = np.zeros(len(support))
    for j in range(len(support) - 1):
        if support[j] <= y <= support[j + 1]:
            w = (y - support[j]) / (support[j + 1] - support[j])
            out[j], out[j + 1] = 1.0 - w, w
            return out
    raise AssertionError(y)


def _value_ce_ref(value_logits, targets, support) -> float:
    total = 0.0
    for i in range(len(targets)):
        row = value_logits[i]
        log_z = max(row) + math.log(sum(math.exp(x - max(row)) for x in row))
        total -= sum(t * (x - log_z) for t, x in zip(_two_hot_ref(targets[i], support), row))
    return total / len(targets)


def _l2_ref(params) -> float:
    return 0.5 * sum(
        float((np.asarray(x, np.float64) ** 2).sum()) for x in jax.tree.leaves(params) if x.ndim > 1
    )


def _policy_batch(rng, n=7, a=5):
    logits = rng.normal(size=(n, a)).astype(np.float32) * 3
    legal = rng.random((n, a)) < 0.6
    legal[np.arange(n), rng.integers(0, a, n)] = True  # never an empty mask
    target = np.where(legal, rng.random((n, a)), 0.0).astype(np.float32)
    target /= target.sum(-1, keepdims=True)
    valid = rng.random(n) < 0.7
    valid[0], valid[1] = True, False
    return logits, target, legal, valid


# Terms -----------------------------------------------------------------------------------------


def test_policy_loss_is_masked_by_legal_and_valid():
    logits, target, legal, valid = _policy_batch(np.random.default_rng(0))
    got = float(policy_loss(*map(jnp.asarray, (logits, target, legal, valid))))
    assert got == pytest.approx(_policy_ref(logits, target, legal, valid), rel=1e-5)
    # Illegal logits take no probability mass: changing them changes nothing.
    noisy = np.where(legal, logits, 1e4).astype(np.float32)
    same = float(policy_loss(*map(jnp.asarray, (noisy, target, legal, valid))))
    assert same == pytest.approx(got, rel=1e-6)
    # Invalid rows count for nothing, even with a garbage target; none valid: 0.
    junk = target.copy()
    junk[~valid] = 1e3
    assert float(policy_loss(logits, junk, legal, valid)) == pytest.approx(got, rel=1e-6)
    assert float(policy_loss(logits, target, legal, np.zeros_like(valid))) == 0.0


def test_categorical_value_loss_is_cross_entropy_against_two_hot():
    rng = np.random.default_rng(1)
    support = CATEGORICAL.support
    # In range, on a support point, at zero, and beyond both ends of the support (clipped).
    on_point = float(h_inverse(support[2]))
    targets = np.array([3.7, -12.0, 0.0, on_point, 50.0, -80.0], np.float32)
    logits = rng.normal(size=(len(targets), CATEGORICAL.value_bins)).astype(np.float32)
    out = NetOutput(logits=None, value=None, value_logits=jnp.asarray(logits), features=None)
    got = float(value_loss(out, jnp.asarray(targets), CATEGORICAL))
    assert got == pytest.approx(_value_ce_ref(logits, targets, support), rel=1e-5)


def test_scalar_value_loss_is_the_mean_squared_error():
    scalar = dataclasses.replace(CATEGORICAL, value_bins=0)
    value = np.array([0.5, -0.25, 0.9], np.float32)
    target = np.array([1.0, -1.0, 0.0], np.float32)
    out = NetOutput(logits=None, value=jnp.asarray(value), value_logits=None, features=None)
    want = sum((v - t) ** 2 for v, t in zip(value, target)) / 3
    assert float(value_loss(out, jnp.asarray(target), scalar)) == pytest.approx(want, rel=1e-6)


def test_l2_counts_kernels_not_biases_or_scales():
    params = {
        "dense": {"kernel": jnp.full((2, 3), 2.0), "bias": jnp.full((3,), 100.0)},
        "conv": {"kernel": jnp.ones((3, 3, 1, 2))},
        "ln": {"scale": jnp.full((3,), 100.0)},
    }
    assert float(l2_loss(params)) == pytest.approx(0.5 * (6 * 4.0 + 18 * 1.0))


# The whole loss --------------------------------------------------------------------------------


@pytest.mark.parametrize("landing", [False, True])
@pytest.mark.parametrize("value_bins", [0, 11])
def test_planner_loss_combines_the_terms_on_the_right_states(landing, value_bins):
    """Value at the decision state, policy at the landing state (k > 1), plus weighted L2."""
    rng = np.random.default_rng(2)
    cfg = dataclasses.replace(CATEGORICAL, value_bins=value_bins)
    net = AZNet(cfg, num_actions=5)
    n, obs_shape = 7, (3, 3, 2)
    obs = rng.random((n, *obs_shape)).astype(np.float32)
    params = net.init(jax.random.PRNGKey(0), jnp.asarray(obs))
    logits, target, legal, valid = _policy_batch(rng, n, 5)
    values = rng.normal(size=n).astype(np.float32) * (5.0 if value_bins else 0.5)
    land = rng.random((n, *obs_shape)).astype(np.float32) if landing else None
    batch = Sample(
        obs=jnp.asarray(obs, jnp.bfloat16),
        time=jnp.zeros((n, 2)),
        value_target=jnp.asarray(values),
        policy_target=jnp.asarray(target),
        legal=jnp.asarray(legal),
        policy_valid=jnp.asarray(valid),
        landing_obs=None if land is None else jnp.asarray(land, jnp.bfloat16),
        landing_time=None if land is None else jnp.zeros((n, 2)),
    )
    loss, terms = planner_loss(net, params, batch, value_weight=0.7, l2=0.01)

    # What the network sees: the bfloat16-stored planes.
    def seen(x):
        return np.asarray(jnp.asarray(x, jnp.bfloat16).astype(jnp.float32))

    at_obs = net.apply(params, jnp.asarray(seen(obs)))
    at_policy = net.apply(params, jnp.asarray(seen(land))) if landing else at_obs
    want_p = _policy_ref(np.asarray(at_policy.logits), target, legal, valid)
    if value_bins:
        want_v = _value_ce_ref(np.asarray(at_obs.value_logits), values, cfg.support)
    else:
        want_v = float(np.mean((np.asarray(at_obs.value, np.float64) - values) ** 2))
    want_l2 = _l2_ref(params)
    assert float(terms["policy_loss"]) == pytest.approx(want_p, rel=1e-4)
    assert float(terms["value_loss"]) == pytest.approx(want_v, rel=1e-4)
    assert float(terms["l2_loss"]) == pytest.approx(want_l2, rel=1e-5)
    assert float(loss) == pytest.approx(want_p + 0.7 * want_v + 0.01 * want_l2, rel=1e-4)


def test_augment_moves_planes_policy_and_mask_together():
    from rtplan.games import make
    from rtplan.planner.replay import augment

    go = make("speed-go-v0")
    rng = np.random.default_rng(0)
    obs = jnp.asarray(rng.random((1, 9, 9, 19)), jnp.bfloat16)
    policy = jnp.asarray(rng.dirichlet(np.ones(82))[None], jnp.float32)
    one = Sample(
        obs=obs,
        time=jnp.array([[0.3, 0.7]]),
        value_target=jnp.array([0.5]),
        policy_target=policy,
        legal=policy > 0.01,
        policy_valid=jnp.array([True]),
        landing_obs=obs[..., ::-1],
        landing_time=jnp.array([[0.4, 0.6]]),
    )
    batch = jax.tree.map(lambda x: jnp.repeat(x, 64, axis=0), one)
    out = augment(go, batch, jax.random.key(0))
    sym = jax.jit(go.symmetry)
    images = [sym(i, obs[0], policy[0], one.legal[0]) for i in range(8)]
    landings = [sym(i, one.landing_obs[0])[0] for i in range(8)]
    seen = set()
    for j in range(64):
        (i,) = [i for i, im in enumerate(images) if bool((im[0] == out.obs[j]).all())]
        seen.add(i)
        # The policy, mask and landing planes of sample j went through the same symmetry.
        np.testing.assert_array_equal(out.policy_target[j], images[i][1])
        np.testing.assert_array_equal(out.legal[j], images[i][2])
        np.testing.assert_array_equal(out.landing_obs[j], landings[i])
    assert seen == set(range(8))  # 64 uniform draws of 8 symmetries
    for name in ("time", "value_target", "policy_valid", "landing_time"):
        np.testing.assert_array_equal(getattr(out, name), getattr(batch, name))
    # A game without symmetries leaves the batch alone.
    assert augment(make("snake-rt-v0"), batch, jax.random.key(0)) is batch
