"""Compiled options: padded batches equal unpadded ones, and the executables stay bounded."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax import monitoring

from rtplan.planner import CompiledOptions, Planner, PlannerConfig
from rtplan.planner.batching import bucket_ladder
from rtplan.planner.network import NetworkConfig

TINY = NetworkConfig(
    channels=4, blocks=1, features=8, value_hidden=8, value_bins=11, value_max=20.0, time_input=True
)
MAX_BATCH = 12
#: Compiles faster, runs slower: these tests count executables, not time them.
FAST = {"xla_backend_optimization_level": 0}


@pytest.fixture(scope="module")
def setup():
    cfg = PlannerConfig(
        game_id="snake-rt-v0",
        network=TINY,
        budgets=(1, 2),
        simulations=(2, 4),
        gumbel_scale=0.0,
        game_params=(("num_rows", 6), ("num_cols", 6)),
    )
    planner = Planner(cfg)
    params = planner.init_params(jax.random.PRNGKey(0))
    states = jax.device_get(
        jax.vmap(planner.game.init)(jax.random.split(jax.random.PRNGKey(1), MAX_BATCH))
    )
    keys = np.asarray(jax.random.split(jax.random.PRNGKey(2), MAX_BATCH))
    return planner, params, states, keys


def _rows(tree, n: int):
    return jax.tree.map(lambda x: x[:n], tree)


def _compiles(fn) -> int:
    """How many XLA compiles `fn()` triggers (JAX reports each to its monitoring listeners)."""
    seen: list[str] = []

    def count(event: str, duration: float, **kwargs) -> None:
        if "backend_compile" in event:
            seen.append(event)

    monitoring.register_event_duration_secs_listener(count)
    try:
        fn()
    finally:
        monitoring.unregister_event_duration_listener(count)
    return len(seen)


def test_many_batch_sizes_compile_one_executable_per_bucket(setup):
    """A long-lived service sees every batch size; each rung of the ladder compiles once, so
    the executables (and their memory mappings) stay bounded."""
    planner, params, states, _ = setup
    options = CompiledOptions(planner, params, max_batch=MAX_BATCH, compiler_options=FAST)
    ladder = bucket_ladder(MAX_BATCH)
    assert len(ladder) < MAX_BATCH  # the ladder skips sizes: fewer executables than sizes

    def serve_every_size():
        return [options.evaluate(_rows(states, n)) for n in range(1, MAX_BATCH + 1)]

    first = _compiles(serve_every_size)
    assert options.executables == len(ladder) == first
    for _ in range(3):  # the same sizes again, in another order: nothing new
        assert _compiles(serve_every_size) == 0
    assert options.executables == len(ladder)

    # Padded rows do not leak into the answer: each batch equals its rows at batch 1.
    whole = options.evaluate(_rows(states, 9))  # runs at the rung of 10
    for i in (0, 4, 8):
        one = options.evaluate(jax.tree.map(lambda x, i=i: x[i : i + 1], states))
        assert whole.reflex[i] == one.reflex[0]
        np.testing.assert_allclose(whole.value[i], one.value[0], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="exceeds the largest bucket"):
        options.evaluate(jax.tree.map(lambda x: np.concatenate([x, x]), states))


def test_a_padded_option_equals_its_rows_one_by_one(setup):
    planner, params, states, keys = setup
    options = CompiledOptions(planner, params, max_batch=MAX_BATCH, compiler_options=FAST)
    out = options.option(2, keys[:3], _rows(states, 3))
    assert out.actions.shape == (3, 2) and isinstance(out.actions, np.ndarray)
    for i in range(3):
        one = options.option(2, keys[i : i + 1], jax.tree.map(lambda x, i=i: x[i : i + 1], states))
        np.testing.assert_array_equal(out.actions[i], one.actions[0])
        np.testing.assert_array_equal(out.visit_counts[i], one.visit_counts[0])
        np.testing.assert_allclose(out.search_value[i], one.search_value[0], atol=1e-4)
    assert options.executables == 2  # option 2 at the rungs 3 and 1
    with pytest.raises(ValueError, match="k=3 is not one of the budgets"):
        options.option(3, keys[:1], _rows(states, 1))


def test_warm_jobs_compile_every_kind_and_measure_times_an_option(setup):
    planner, params, states, _ = setup
    options = CompiledOptions(planner, params, compiler_options=FAST)
    state = jax.tree.map(lambda x: x[0], states)
    jobs = options.warm_jobs(state)
    assert len(jobs) == len(options.kinds()) == 3  # the value and options 1 and 2
    for job in jobs:
        job()
    assert options.executables == 3
    assert _compiles(lambda: options.measure(1, state)) == 0
    assert options.measure(2, state, repeats=1) > 0
