"""Semantics of the budgeted options: search, reflex, landing masks, batching."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest
from flax import struct

from rtplan import games
from rtplan.games._core import Game, State
from rtplan.planner.network import NetworkConfig
from rtplan.planner.options import Planner, PlannerConfig, _Node

TINY_NET = NetworkConfig(
    channels=4, blocks=1, features=8, value_hidden=8, value_bins=11, value_max=20.0, time_input=True
)


# A tiny deterministic single-agent game --------------------------------------------------------


@struct.dataclass
class _Line:
    pos: jax.Array  # [] int32


class TinyLine(Game):
    """Frames on a line of 5 cells. Actions: 0 left, 1 right, 2 stay, 3 jump.

    Reward +1 for reaching cell 4 (terminal). "jump" is legal only on frame 0 and moves 2 cells
    right; played later (illegal) it ends the game with reward -5.
    """

    id = "tiny-line-v0"
    num_actions = 4
    action_names = ("left", "right", "stay", "jump")
    observation_shape = (1, 5, 1)
    horizon = 12

    def init(self, key):
        del key
        return State(
            inner=_Line(pos=jnp.int32(0)),
            legal_action_mask=self._mask(jnp.int32(0), jnp.int32(0)),
            reward=jnp.float32(0),
            terminated=jnp.bool_(False),
            truncated=jnp.bool_(False),
            frame=jnp.int32(0),
            current_player=jnp.int32(0),
        )

    def _mask(self, pos, frame):
        return jnp.array([pos > 0, True, True, frame == 0])

    def _step(self, state, action):
        pos = state.inner.pos
        illegal = ~state.legal_action_mask[action]
        move = jnp.array([-1, 1, 0, 2])[action]
        new = jnp.clip(pos + move, 0, 4)
        goal = new == 4
        reward = jnp.where(illegal, -5.0, jnp.where(goal, 1.0, 0.0))
        frame = state.frame + 1
        return state.replace(
            inner=_Line(pos=new),
            legal_action_mask=self._mask(new, frame),
            reward=reward.astype(jnp.float32),
            terminated=goal | illegal,
            frame=frame,
        )

    def observe(self, state):
        return jax.nn.one_hot(state.inner.pos, 5)[None, :, None]

    def fallback_action(self, state):
        return jnp.int32(2)

    def rekey(self, state, key):
        return state


def _tiny_planner(sims_per_frame=8, **kw) -> Planner:
    cfg = PlannerConfig(
        game_id="tiny-line-v0",
        network=TINY_NET,
        simulations=tuple(sims_per_frame * k for k in (1, 2, 3, 4)),
        gamma=0.9,
        **kw,
    )
    return Planner(cfg, game=TinyLine())


def _batch(states):
    return jax.tree.map(lambda *x: jnp.stack(x), *states)


def _index(tree, i):
    return jax.tree.map(lambda x: x[i], tree)


def _zero_value(params):
    """A network whose value is exactly 0, so only rewards drive the search."""
    head = params["params"]["value"]
    zeroed = jax.tree.map(jnp.zeros_like, head)
    return {"params": {**params["params"], "value": zeroed}}


@functools.cache
def _line():
    planner = _tiny_planner(sims_per_frame=32)
    params = _zero_value(planner.init_params(jax.random.PRNGKey(0)))
    option = jax.jit(planner.option, static_argnums=3)
    state = planner.game.init(jax.random.PRNGKey(0))
    return planner, params, option, state


def test_search_finds_the_best_action():
    planner, params, option, state = _line()
    # From cell 2 (jump now illegal) "right" twice reaches the goal: a depth-2 plan.
    s = planner.game.step(planner.game.step(state, 1), 1)
    for seed in range(3):
        out = option(params, jax.random.PRNGKey(seed)[None], _batch([s]), 1)
        assert int(out.actions[0, -1]) == 1
        assert float(out.search_value[0]) > 0.1  # the root mean includes the gamma * 1 found
    s3 = planner.game.step(s, 1)  # cell 3: "right" wins at once
    for seed in range(3):
        out = option(params, jax.random.PRNGKey(seed)[None], _batch([s3]), 1)
        assert int(out.actions[0, -1]) == 1 and float(out.reward[0]) == 1.0
        assert float(out.search_value[0]) > 0.5


def test_option_advances_exactly_k_frames_and_plans_the_last():
    planner, params, option, state = _line()
    game = planner.game
    for k in (1, 2, 3):
        out = option(params, jax.random.PRNGKey(k)[None], _batch([state]), k)
        assert out.actions.shape == (1, k)
        np.testing.assert_array_equal(out.planned[0], [False] * (k - 1) + [True])
        # Replay: reflex frames are the masked argmax at each intermediate state.
        s = state
        for j in range(k - 1):
            expected = planner.reflex_action(params, _batch([s]))[0]
            assert int(out.actions[0, j]) == int(expected)
            assert bool(s.legal_action_mask[expected])
            s = game.step(s, expected)
        s = game.step(s, out.actions[0, -1])
        if not bool(out.done[0]):
            assert int(out.next_state.frame[0]) == int(state.frame) + k
        assert int(out.next_state.inner.pos[0]) == int(s.inner.pos)
        assert float(out.reward[0]) == pytest.approx(0.0 if not bool(s.done) else float(s.reward))


def test_landing_state_mask_is_used():
    """Jump is legal at s_t (frame 0) but not where a k=2 action lands (frame 1)."""
    planner, params, option, state = _line()
    assert bool(state.legal_action_mask[3])
    for seed in range(4):
        out = option(params, jax.random.PRNGKey(seed)[None], _batch([state]), 2)
        assert int(out.actions[0, -1]) != 3
        assert float(out.action_weights[0, 3]) == 0.0
        assert int(out.visit_counts[0, 3]) == 0
    # With k=1 the action lands on frame 0, where jump (2 cells) is legal and is searched.
    out = option(params, jax.random.PRNGKey(0)[None], _batch([state]), 1)
    assert float(out.action_weights[0, 3]) > 0.0


def test_k1_option_equals_plain_mcts():
    planner, params, option, state = _line()
    game = planner.game
    key = jax.random.PRNGKey(5)
    out = option(params, key[None], _batch([state]), 1)

    def recurrent_fn(params, rng, action, s):
        child = jax.vmap(game.step)(s, action)
        net = planner.evaluate(params, child)
        logits = jnp.where(
            child.legal_action_mask,
            net.logits - net.logits.max(-1, keepdims=True),
            jnp.finfo(jnp.float32).min,
        )
        return mctx.RecurrentFnOutput(
            reward=child.reward,
            discount=jnp.where(child.done, 0.0, planner.config.gamma),
            prior_logits=logits,
            value=jnp.where(child.done, 0.0, net.value),
        ), child

    root_net = planner.evaluate(params, _batch([state]))
    mask = state.legal_action_mask[None]
    logits = jnp.where(
        mask, root_net.logits - root_net.logits.max(-1, keepdims=True), jnp.finfo(jnp.float32).min
    )
    plain = mctx.gumbel_muzero_policy(
        params,
        key,
        mctx.RootFnOutput(prior_logits=logits, value=root_net.value, embedding=_batch([state])),
        recurrent_fn,
        num_simulations=planner.config.sims(1),
        invalid_actions=~mask,
        max_num_considered_actions=16,
        gumbel_scale=0.0,
    )
    assert int(plain.action[0]) == int(out.actions[0, 0])
    np.testing.assert_allclose(plain.action_weights, out.action_weights, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(plain.search_tree.summary().visit_counts, out.visit_counts)


def test_batched_equals_unbatched_with_sampling():
    planner = _tiny_planner(gumbel_scale=1.0)
    params = planner.init_params(jax.random.PRNGKey(3))
    option = jax.jit(planner.option, static_argnums=3)
    game = planner.game
    s0 = game.init(jax.random.PRNGKey(0))
    states = [s0, game.step(s0, 1), game.step(game.step(s0, 1), 2)]
    keys = jax.random.split(jax.random.PRNGKey(9), 3)
    batched = option(params, keys, _batch(states), 2)
    for i, s in enumerate(states):
        single = option(params, keys[i][None], _batch([s]), 2)
        np.testing.assert_array_equal(single.actions[0], batched.actions[i])
        np.testing.assert_allclose(single.action_weights[0], batched.action_weights[i], atol=1e-4)
        np.testing.assert_allclose(single.search_value[0], batched.search_value[i], atol=1e-4)


# A real game: reflex legality over Snake options ------------------------------------------------


def test_snake_reflex_actions_are_legal_and_frames_add_up():
    cfg = PlannerConfig(
        game_id="snake-rt-v0",
        network=TINY_NET,
        simulations=(4, 8, 12, 16),
        game_params=(("num_rows", 6), ("num_cols", 6)),
    )
    planner = Planner(cfg)
    params = planner.init_params(jax.random.PRNGKey(0))
    option = jax.jit(planner.option, static_argnums=3)
    game = planner.game
    states = jax.vmap(game.init)(jax.random.split(jax.random.PRNGKey(1), 4))
    keys = jax.random.split(jax.random.PRNGKey(2), 4)
    step = jax.jit(jax.vmap(game.step))
    for _ in range(3):
        out = option(params, keys, states, 3)
        # Replay the three frames and check legality and the landing state.
        s = states
        for j in range(3):
            a = out.actions[:, j]
            running = ~s.done
            legal = jnp.take_along_axis(s.legal_action_mask, a[:, None], 1)[:, 0]
            assert bool(jnp.all(legal | ~running))
            s = step(s, a)
        np.testing.assert_array_equal(s.frame, out.next_state.frame)
        np.testing.assert_array_equal(s.inner.env.body, out.next_state.inner.env.body)
        running = ~states.done & ~out.done
        np.testing.assert_array_equal(out.next_state.frame[running], states.frame[running] + 3)
        states = out.next_state


# Two-player sign flip on a tiny game ------------------------------------------------------------


@struct.dataclass
class _Nim:
    pile: jax.Array  # [] int32
    clocks: jax.Array  # [2] int32


class TinyNim(Game):
    """Take 1 or 2 from a pile; whoever takes the last wins. Clock like the clock games."""

    id = "tiny-nim-v0"
    num_actions = 2
    action_names = ("take1", "take2")
    observation_shape = (1, 5, 3)  # pile one-hot + 2 clock planes (stripped by the planner)
    kind = games.Kind.CLOCK
    num_players = 2

    def init(self, key, pile=4):
        return State(
            inner=_Nim(pile=jnp.int32(pile), clocks=jnp.array([100, 100], jnp.int32)),
            legal_action_mask=jnp.array([True, pile >= 2]),
            reward=jnp.float32(0),
            terminated=jnp.bool_(False),
            truncated=jnp.bool_(False),
            frame=jnp.int32(0),
            current_player=jnp.int32(0),
        )

    def step(self, state, action, cost=0):
        nxt = self._step(state, action)
        p = state.current_player
        clocks = state.inner.clocks.at[p].add(-cost)
        nxt = nxt.replace(inner=nxt.inner.replace(clocks=jnp.maximum(clocks, 0)))
        return self._absorb(state, nxt)

    def _step(self, state, action):
        pile = state.inner.pile - (action + 1)
        win = pile <= 0
        return state.replace(
            inner=state.inner.replace(pile=jnp.maximum(pile, 0)),
            legal_action_mask=jnp.array([True, pile >= 2]),
            reward=jnp.where(win, 1.0, 0.0).astype(jnp.float32),
            terminated=win,
            frame=state.frame + 1,
            current_player=1 - state.current_player,
        )

    def needs_reflex(self, state):
        return state.inner.clocks[state.current_player] <= 0

    def observe(self, state):
        pile = jax.nn.one_hot(state.inner.pile, 5)[None, :, None]
        return jnp.concatenate([pile, jnp.zeros((1, 5, 2))], -1)

    def fallback_action(self, state):
        return jnp.int32(0)

    def rekey(self, state, key):
        return state


def test_clock_search_flips_value_sign():
    net = NetworkConfig(channels=4, blocks=1, features=8, value_hidden=8)
    cfg = PlannerConfig(
        game_id="tiny-nim-v0",
        network=net,
        budgets=(8, 32),
        simulations=(8, 32),
        max_considered_actions=2,
    )
    game = TinyNim()
    planner = Planner(cfg, game=game)
    params = planner.init_params(jax.random.PRNGKey(0))
    option = jax.jit(planner.option, static_argnums=3)
    # Pile 4: taking 1 leaves 3, a lost position for the opponent; taking 2 leaves 2 (they win).
    out = option(params, jax.random.PRNGKey(0)[None], _batch([game.init(None, 4)]), 32)
    assert int(out.actions[0, 0]) == 0
    assert int(out.cost[0]) == 32
    assert int(out.next_state.inner.clocks[0, 0]) == 100 - 32
    # Pile 2: take both and win at once.
    out = option(params, jax.random.PRNGKey(0)[None], _batch([game.init(None, 2)]), 8)
    assert int(out.actions[0, 0]) == 1 and float(out.reward[0]) == 1.0


def test_clock_option_with_empty_clock_plays_reflex_for_free():
    net = NetworkConfig(channels=4, blocks=1, features=8, value_hidden=8)
    cfg = PlannerConfig(
        game_id="speed-hex-v0",
        network=net,
        budgets=(2, 8),
        simulations=(2, 8),
        game_params=(("initial_time", 5),),
    )
    planner = Planner(cfg)
    params = planner.init_params(jax.random.PRNGKey(0))
    option = jax.jit(planner.option, static_argnums=3)
    # Jitted: one program each, not one per operation of Hex's init, step and the network.
    init, step = jax.jit(jax.vmap(planner.game.init)), jax.jit(jax.vmap(planner.game.step))
    state = init(jax.random.split(jax.random.PRNGKey(0), 1))
    out = option(params, jax.random.PRNGKey(1)[None], state, 8)
    mover = int(state.current_player[0])
    assert int(out.cost[0]) == 8 and int(out.next_state.inner.clocks[0, mover]) == 0
    assert bool(out.planned[0, 0])
    # The opponent moves; then the first mover has an empty clock: reflex, cost 0.
    s = step(out.next_state, out.next_state.legal_action_mask.argmax(-1))
    out = option(params, jax.random.PRNGKey(2)[None], s, 8)
    assert int(out.cost[0]) == 0 and not bool(out.planned[0, 0])
    assert int(out.actions[0, 0]) == int(jax.jit(planner.reflex_action)(params, s)[0])
    assert not bool(out.done[0])


def test_unknown_budget_is_a_clear_error():
    planner = _tiny_planner()
    with pytest.raises(ValueError, match="budget k=5 not in"):
        planner.config.sims(5)


@pytest.mark.parametrize("torso", ["conv", "mlp"])
def test_planner_builds_every_registered_game(torso):
    for game_id in games.registered_games():
        net = NetworkConfig(torso=torso, channels=4, blocks=1, features=8, value_hidden=8)
        planner = Planner(PlannerConfig(game_id=game_id, network=net))
        # Jitted: one program each, not one per operation of the initialisers.
        params = jax.jit(planner.init_params)(jax.random.PRNGKey(0))
        states = jax.jit(jax.vmap(planner.game.init))(jax.random.split(jax.random.PRNGKey(0), 2))
        out = jax.jit(planner.evaluate)(params, states)
        assert out.logits.shape == (2, planner.game.num_actions)
        assert out.features.shape == (2, 8)


def _edge_discounts(planner, params, state, k, tree_k):
    """Option k's search tree at `state` under `tree_k`: the distinct discounts of the expanded,
    non-terminal edges leaving the root, and of those leaving deeper nodes."""
    p = Planner(dataclasses.replace(planner.config, tree_k=tree_k), game=planner.game)
    states = _batch([state])
    out0 = p.evaluate(params, states)
    landing, out_l, _, _, disc = p._advance(params, states, out0, k - 1)
    root = _Node(
        landing=landing,
        pre_reward=disc,
        root=jnp.ones((1,), bool),
        delay=jnp.full((1,), k - 1, jnp.int32),
    )
    tree = p._search(params, jax.random.PRNGKey(1)[None], root, out0, out_l, k).search_tree
    expanded = np.asarray(tree.children_index[0]) >= 0
    d = np.asarray(tree.children_discounts[0])
    live = expanded & (d > 0)
    assert live[0].any() and live[1:].any()  # the search went deeper than the root
    distinct = lambda xs: {round(float(x), 5) for x in xs}  # noqa: E731
    return distinct(d[0][live[0]]), distinct(d[1:][live[1:]])


def test_tree_k_sets_the_frames_of_every_edge_below_the_root():
    """tree_k 0: every edge of an option-k tree spans k frames (discount gamma^k). tree_k m:
    the root's edges still span k frames (the option's k-1 reflex frames, then the action),
    every deeper edge m frames. tree_k = k is the default tree exactly."""
    planner, params, _, state = _line()
    gamma, k = planner.config.gamma, 3
    s = planner.game.step(state, 2)  # frame 1, cell 0: the goal is 4 cells away

    def run(tree_k):
        p = Planner(dataclasses.replace(planner.config, tree_k=tree_k), game=planner.game)
        return jax.jit(p.option, static_argnums=3)(
            params, jax.random.PRNGKey(1)[None], _batch([s]), k
        )

    default, same = run(0), run(k)
    for field in ("actions", "visit_counts", "action_weights", "search_value", "reward"):
        np.testing.assert_array_equal(getattr(default, field), getattr(same, field))
    g = lambda n: round(gamma**n, 5)  # noqa: E731
    assert _edge_discounts(planner, params, s, k, 0) == ({g(k)}, {g(k)})
    assert _edge_discounts(planner, params, s, k, 1) == ({g(k)}, {g(1)})
    assert _edge_discounts(planner, params, s, k, 2) == ({g(k)}, {g(2)})
    with pytest.raises(ValueError, match="tree_k must be >= 0"):
        dataclasses.replace(planner.config, tree_k=-1)


@dataclasses.dataclass(frozen=True)
class _FrameFuture:
    """A `Future` that answers `even` on even frames and `odd` on odd ones (its params: none)."""

    even: int
    odd: int

    def choose(self, future_params, states, out):
        del future_params, out
        return jnp.where(states.frame % 2 == 0, self.even, self.odd).astype(jnp.int32)


# ~35 s of compiles; test_tree_k_sets_the_frames_of_every_edge_below_the_root and the
# gate-tree service test cover the tree.
@pytest.mark.slow
def test_a_future_sets_each_deeper_edge_to_the_budget_it_picks():
    """With a `Future`, every edge below the root spans the budget the future picks at the
    decision state it leaves: a future that always answers k is the "always k" tree exactly,
    and a state-dependent one gives each node the delay of its own decision state."""
    from rtplan.planner.batching import OptionRunner

    planner, params, _, state = _line()
    gamma, k = planner.config.gamma, 3
    s = planner.game.step(state, 2)
    key = jax.random.PRNGKey(1)[None]

    def run(p, future=None):
        fn = functools.partial(p.option, k=k, future=future)
        return jax.jit(fn)(params, key, _batch([s]), future_params=0 if future else None)

    fields = ("actions", "visit_counts", "action_weights", "search_value", "reward")
    want, got = run(planner), run(planner, _FrameFuture(k, k))
    for field in fields:
        np.testing.assert_array_equal(getattr(want, field), getattr(got, field), err_msg=field)

    # Frame parity: a decision state on an even frame waits 0 reflex frames, an odd one 2.
    future = _FrameFuture(1, 3)
    states = _batch([s])
    out0 = planner.evaluate(params, states)
    landing, out_l, _, _, disc = planner._advance(params, states, out0, k - 1)
    root = _Node(
        landing=landing, pre_reward=disc, root=jnp.ones((1,), bool), delay=jnp.full((1,), k - 1)
    )
    tree = planner._search(params, key, root, out0, out_l, k, future, 0).search_tree
    delay = np.asarray(tree.embeddings.delay[0])
    frame = np.asarray(tree.embeddings.landing.frame[0])
    expanded = np.asarray(tree.children_index[0]) >= 0
    discounts = np.asarray(tree.children_discounts[0])
    nodes = np.flatnonzero(np.asarray(tree.node_visits[0]) > 0)[1:]  # below the root
    assert len(nodes) > 3
    for n in nodes:
        decided_at = frame[n] - delay[n]
        assert delay[n] == (0 if decided_at % 2 == 0 else 2)
        live = expanded[n] & (discounts[n] > 0)
        np.testing.assert_allclose(discounts[n][live], gamma ** (delay[n] + 1), rtol=1e-6)
    assert set(delay[nodes]) == {0, 2}

    # Grouped by k through an OptionRunner, a future's options are the one-by-one options.
    runner = OptionRunner(planner, max_batch=2, future=future)
    batch = _batch([s, planner.game.step(s, 1)])
    keys = jax.random.split(jax.random.PRNGKey(2), 2)
    grouped = runner(params, keys, batch, np.array([3, 2]), future_params=0)
    for i, kk in enumerate((3, 2)):
        one = jax.jit(functools.partial(planner.option, k=kk, future=future))(
            params, keys[i : i + 1], _index_batch(batch, i), future_params=0
        )
        np.testing.assert_array_equal(grouped.actions[i, :kk], one.actions[0])
        np.testing.assert_allclose(grouped.search_value[i], one.search_value[0], atol=1e-6)
    with pytest.raises(ValueError, match="needs its future's parameters"):
        runner(params, keys, batch, np.array([3, 2]))
    with pytest.raises(ValueError, match="has no future"):
        OptionRunner(planner, max_batch=4)(
            params, keys, batch, np.array([1, 1, 1]), future_params=0
        )


def _index_batch(tree, i):
    return jax.tree.map(lambda x: x[i : i + 1], tree)
