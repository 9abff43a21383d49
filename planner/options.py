"""Budgeted options o_k: reflex frames while MCTS plans for the frame where its action lands.

Every later component (training, the gate, evaluation, the services) acts through this module.
It runs past ~650 lines on purpose: the option, the committed frames it plays and the tree it
searches are one algorithm, and its math reads in one file (STYLE.md).

Committed-action games (Pac-Man, Tetris, Snake): option k started at s_t plays k-1 reflex
actions (masked argmax of the raw policy, recomputed at each frame), then the MCTS action on
frame k. MCTS runs `sims(k)` simulations with the root at s_t, and inside the tree every edge is
a k-frame macro: k-1 reflex frames, then the edge action. An edge's prior and legal mask are
those of the *landing* state, where its action is applied (the reference masked with the state
the edge leaves, so a Snake plan could land on an illegal move).

With `committed="plan"` (beyond the paper; issue 44) the k-1 committed frames play the
*previous* option's plan instead of the reflex: the principal variation of its search below the
action it chose (the most visited child at each depth), expanded into frame actions exactly as
its tree modelled them (each macro edge's reflex frames, then the edge action), as far as its
visits reach, and the reflex beyond. The plan is aligned on the frames after the planned action
lands: its first action is the first committed frame of the next option. The search replays
those committed actions to reach its root's landing state, so the model lands where the world
does; the edges below the root model the reflex as before. Receding-horizon control.

A `Future` replaces that model of the future: deeper in the tree, each decision state's edge
waits the budget the future picks there (the deployed gate's argmax), so an option whose
successors run at other budgets plans against the future that will happen (docs/gate.md,
"Switching k is costly").

Clock games (Speed Hex, Speed Go): the reflex is a no-op on the board; option k runs `sims(k)`
simulations of ordinary two-player MCTS (board-only dynamics, value sign flips per ply) and
charges `sims(k)` clock ticks on the move. With an empty clock in `reflex` mode the move is the
reflex move (masked argmax) at cost 0.

Every game in a batch carries its own PRNG key, so a game's result never depends on which other
games share its batch: batched, unbatched and grouped-by-k runs agree exactly.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Protocol

import jax
import jax.numpy as jnp
import mctx
from flax import struct

from rtplan import games
from rtplan.planner.network import AZNet, NetOutput, NetworkConfig

_NEG = jnp.finfo(jnp.float32).min
#: What an option's k-1 committed frames play (`PlannerConfig.committed`): the reflex, or the
#: previous option's plan where it reaches (then the reflex).
COMMITMENTS = ("reflex", "plan")
#: What a frame plays when its planned action missed the deadline: the game's fallback action
#: or the reflex (the env server's session `fallback` values, `server._config.FALLBACKS`).
FALLBACKS = ("game", "reflex")


def no_plan(batch: int, horizon: int) -> tuple[jax.Array, jax.Array]:
    """No plan for `batch` games (committed="plan"): (`[B, H]` -1, `[B]` length 0), so every
    committed frame plays the reflex (an episode's first option). `Planner.empty_plan` is this
    at its config's `plan_horizon` H."""
    return jnp.full((batch, horizon), -1, jnp.int32), jnp.zeros((batch,), jnp.int32)


def landing_frame(decision_frame: int, k: int, *, kind: games.Kind) -> int:
    """The frame where option k started at `decision_frame` applies its planned action.

    Committed-action games: k-1 reflex frames, then the planned action on frame t+k-1.
    Clock games: one ply, the planned move itself (k labels the search budget).
    """
    return decision_frame + (0 if kind is games.Kind.CLOCK else k - 1)


@dataclasses.dataclass(frozen=True)
class PlannerConfig:
    """Everything static about a game's planner."""

    #: Registered game id.
    game_id: str
    #: Network shape.
    network: NetworkConfig
    #: Budgets k the gate chooses among (committed: frames; clock: option index labels).
    budgets: tuple[int, ...] = (1, 2, 3, 4)
    #: Simulations per option, aligned with `budgets` (committed default: 32k).
    simulations: tuple[int, ...] = (32, 64, 96, 128)
    #: Discount per frame (committed games). Two-player games use -1 per ply in the tree.
    gamma: float = 0.99
    #: Game settings passed to `games.make`.
    game_params: tuple[tuple[str, object], ...] = ()
    #: mctx Gumbel scale: 1.0 samples actions (training), 0.0 is deterministic (evaluation).
    gumbel_scale: float = 0.0
    #: Root actions mctx's sequential halving considers.
    max_considered_actions: int = 16
    #: Scale of Q-values in the Gumbel policy improvement. 0: mctx's default, which min-max
    #: rescales each node's Q-values to [0, 1]. >0: Q / q_scale in return units, no rescaling.
    #: With sparse rewards (Snake) min-max stretches value noise into sharp, arbitrary policy
    #: targets; a fixed scale keeps tiny Q differences tiny.
    q_scale: float = 0.0
    #: Committed games: the frames of every edge below the root's (its k-1 reflex frames, then
    #: the edge action). 0: the option's own k, so the tree models "always k" for the whole
    #: future (the paper and its reference code). m > 0: every option models the future at the
    #: same m, so consecutive options of different k plan against the same future (switching k
    #: is costly under 0; docs/gate.md). The root's own delay is always the option's k-1.
    tree_k: int = 0
    #: Committed games: what the k-1 frames before an option's planned action play
    #: (`COMMITMENTS`). "reflex": the masked argmax of the raw policy, recomputed each frame (the
    #: paper). "plan": the previous option's plan (its search's principal variation below the
    #: action it chose) where it reaches, then the reflex. Clock games: "reflex" only.
    committed: str = "reflex"

    def __post_init__(self) -> None:
        if self.tree_k < 0:
            raise ValueError(f"tree_k must be >= 0, got {self.tree_k}")
        if self.committed not in COMMITMENTS:
            raise ValueError(f"committed must be one of {COMMITMENTS}, got {self.committed!r}")

    @property
    def plan_horizon(self) -> int:
        """H, the frames of an option's plan (committed="plan"): up to max(budgets) edges of the
        longest macro edge. The next option reads at most max(budgets) - 1 of them."""
        return max(self.budgets) * max(max(self.budgets), self.tree_k)

    def sims(self, k: int) -> int:
        """Simulations of the option with budget `k`."""
        if k not in self.budgets:
            raise ValueError(f"budget k={k} not in {self.budgets} for {self.game_id}")
        return self.simulations[self.budgets.index(k)]


@struct.dataclass
class OptionOutput:
    """Result of one option per game of a batch (leading axis B; K is the option's k)."""

    actions: jax.Array  # [B, K] int32 frame actions, in play order
    planned: jax.Array  # [B, K] bool: True where the action came from MCTS, False for reflex
    reward: jax.Array  # [B] raw sum of the frame rewards (mover's reward in clock games)
    discounted_reward: jax.Array  # [B] sum_j gamma^j r_j
    discount: jax.Array  # [B] gamma^k, times 0 if the game terminated (clock games: 1 or 0)
    terminated: jax.Array  # [B] bool: the game ended by its rules during the option
    truncated: jax.Array  # [B] bool: the game hit its horizon during the option
    next_state: games.State  # [B] state after the option
    root_value: jax.Array  # [B] network value at the decision state s_t
    search_value: jax.Array  # [B] MCTS value of the root after search
    visit_counts: jax.Array  # [B, A] root visit counts
    action_weights: jax.Array  # [B, A] improved policy at the root (training target)
    cost: jax.Array  # [B] int32 clock ticks charged (0 in committed games)
    features: jax.Array  # [B, F] trunk features at s_t (the gate's input)
    decision_logits: jax.Array  # [B, A] raw policy logits at s_t
    # committed="plan" only (None under "reflex"): the frame actions the search's principal
    # variation models after the landing frame, plan[:, j] on frame next_state.frame + j
    # (`Planner.plan_of`); -1 past plan_len. The next option commits to its first k-1.
    plan: jax.Array | None = None  # [B, H] int32, H = config.plan_horizon
    plan_len: jax.Array | None = None  # [B] int32 valid frames of plan (0: no plan)

    @property
    def done(self) -> jax.Array:
        return self.terminated | self.truncated


class Future(Protocol):
    """The budgets the tree expects at its decision states (a committed game's gate).

    `choose(future_params, states, out)` returns the `[B]` int32 budget of the option that
    `[B]` decision states will start, given the planner's output `out` at them (so a gate
    needs no second planner forward). It is traced inside the search: pure, jittable.
    """

    def choose(self, future_params, states: games.State, out: NetOutput) -> jax.Array: ...


@struct.dataclass
class _Node:
    """A search node's embedding: the state where its children's actions land."""

    landing: games.State  # state after the node's k-1 reflex frames
    pre_reward: jax.Array  # [] sum_{j<k-1} gamma^j r_j of those reflex frames
    root: jax.Array  # [] bool: the root (its delay is the option's k-1; deeper: tree_k - 1)
    delay: jax.Array  # [] int32 the node's reflex frames (read with a `Future` only)
    # committed="plan" only: the reflex actions of the edge into this node, which the plan
    # replays (-1 at the root, whose committed frames are not part of any plan).
    frames: jax.Array | None = None  # [m-1] int32


class Planner:
    """AlphaZero planner for one game: network, reflex, search, and budgeted options.

    Holds static settings only; parameters and states are arguments, so every method is a pure
    function that callers may jit (with `k` static) and vmap.
    """

    def __init__(self, config: PlannerConfig, *, game: games.Game | None = None) -> None:
        self.config = config
        self.game = (
            game if game is not None else games.make(config.game_id, **dict(config.game_params))
        )
        #: The game's kind (`games.kind_of`): a clock game's option is one ply of two-player MCTS.
        self.kind = games.kind_of(self.game)
        self.net = AZNet(config.network, self.game.num_actions)
        obs_shape = self.game.observation_shape
        # Clock games: the base network sees the board only (see docs/decisions in README).
        clock = self.kind is games.Kind.CLOCK
        if clock and config.committed != "reflex":
            raise ValueError(
                f"{config.game_id} is a clock game: its options have no committed frames, so "
                f'committed="{config.committed}" means nothing there (use "reflex")'
            )
        self._obs_channels = obs_shape[-1] - 2 if clock else obs_shape[-1]
        self.input_shape = (*obs_shape[:-1], self._obs_channels)

    # Network -----------------------------------------------------------------------------------

    def init_params(self, key: jax.Array):
        """Fresh network parameters (jitted: one compile instead of one per initialiser op)."""
        obs = jnp.zeros((1, *self.input_shape), jnp.float32)
        return jax.jit(self.net.init)(key, obs, jnp.zeros((1, 2), jnp.float32))

    def inputs(self, state: games.State) -> tuple[jax.Array, jax.Array]:
        """Network inputs of one state: planes `[H, W, C]` and time `[2]`."""
        obs = self.game.observe(state)[..., : self._obs_channels]
        if self.game.horizon:
            frac = jnp.clip(state.frame / self.game.horizon, 0.0, 1.0).astype(jnp.float32)
        else:
            frac = jnp.zeros((), jnp.float32)
        return obs, jnp.stack([frac, 1.0 - frac])

    def evaluate(self, params, states: games.State) -> NetOutput:
        """Network outputs for a batch of states `[B]`."""
        obs, time = jax.vmap(self.inputs)(states)
        return self.net.apply(params, obs, time)

    # Reflex ------------------------------------------------------------------------------------

    @staticmethod
    def masked_argmax(logits: jax.Array, mask: jax.Array) -> jax.Array:
        """`[B]` int32 argmax over legal actions only."""
        return jnp.argmax(jnp.where(mask, logits, _NEG), axis=-1).astype(jnp.int32)

    def reflex_action(self, params, states: games.State) -> jax.Array:
        """`[B]` int32 reflex actions: argmax of the raw policy over the legal actions (served
        in real time, over `Game.served_state`'s)."""
        return self.masked_argmax(self.evaluate(params, states).logits, states.legal_action_mask)

    def _advance(self, params, states: games.State, out: NetOutput, frames: int):
        """Plays `frames` reflex frames from `states` whose network output is `out`.

        Returns:
            (landing states, network output at them, reflex actions `[B, frames]`,
            raw reward sum `[B]`, discounted reward sum `[B]`).
        """
        gamma = self.config.gamma
        zeros = jnp.zeros(states.reward.shape, jnp.float32)
        if frames == 0:
            return states, out, jnp.zeros((*zeros.shape, 0), jnp.int32), zeros, zeros

        def body(carry, j):
            s, o, raw, disc = carry
            a = self.masked_argmax(o.logits, s.legal_action_mask)
            s = jax.vmap(self.game.step)(s, a)
            o = self.evaluate(params, s)
            return (s, o, raw + s.reward, disc + gamma**j * s.reward), a

        (s, o, raw, disc), acts = jax.lax.scan(
            body, (states, out, zeros, zeros), jnp.arange(frames, dtype=jnp.float32)
        )
        return s, o, jnp.moveaxis(acts, 0, 1), raw, disc

    def _commit(self, params, states: games.State, out: NetOutput, frames: int, plan, plan_len):
        """`_advance`, except that frame j plays the plan's action `plan[:, j]` while
        j < `plan_len` and every plan action so far was legal where it was played (a world that
        left the plan's model drops the plan), and the reflex after that.

        Returns:
            As `_advance`; its actions `[B, frames]` are the committed ones.
        """
        if frames == 0:
            return self._advance(params, states, out, 0)
        gamma = self.config.gamma
        zeros = jnp.zeros(states.reward.shape, jnp.float32)

        def body(carry, x):
            s, o, raw, disc, follow = carry
            j, wanted = x
            reflex = self.masked_argmax(o.logits, s.legal_action_mask)
            legal = jnp.take_along_axis(s.legal_action_mask, jnp.maximum(wanted, 0)[:, None], 1)
            follow = follow & (j.astype(jnp.int32) < plan_len) & legal[:, 0]
            a = jnp.where(follow, wanted, reflex)
            s = jax.vmap(self.game.step)(s, a)
            o = self.evaluate(params, s)
            return (s, o, raw + s.reward, disc + gamma**j * s.reward, follow), a

        xs = (jnp.arange(frames, dtype=jnp.float32), jnp.moveaxis(plan[:, :frames], 0, 1))
        follow = jnp.ones(plan_len.shape, bool)
        (s, o, raw, disc, _), acts = jax.lax.scan(body, (states, out, zeros, zeros, follow), xs)
        return s, o, jnp.moveaxis(acts, 0, 1), raw, disc

    def empty_plan(self, batch: int) -> tuple[jax.Array, jax.Array]:
        """No plan for `batch` games (committed="plan"): `no_plan` of this config's horizon."""
        return no_plan(batch, self.config.plan_horizon)

    def plan_of(self, tree: mctx.Tree, action: jax.Array, m: int) -> tuple[jax.Array, jax.Array]:
        """The plan that a committed="plan" search leaves for the frames after its action lands.

        From the root's child along `action`, each depth adds the frames of one macro edge as
        the tree modelled them: the m-1 reflex frames stored in the node (`_Node.frames`), then
        the node's most visited child action (lowest index on ties). It stops at the first node
        with no visited child, or at H // m edges.

        Args:
            tree: the search tree `[B, N, ...]` (`policy.search_tree`), with `_Node` embeddings
                that hold their edge's reflex frames.
            action: `[B]` the action the search chose at the root.
            m: the frames of every edge below the root (`tree_k` or the option's k).

        Returns:
            (plan `[B, H]` int32 frame actions, -1 past its length; length `[B]` int32).
        """
        horizon = self.config.plan_horizon
        rows = jnp.arange(action.shape[0])
        node = tree.children_index[rows, tree.ROOT_INDEX, action]

        def edge(carry, _):
            node, live = carry
            here = jnp.maximum(node, 0)
            visits = tree.children_visits[rows, here]  # [B, A]
            best = jnp.argmax(visits, axis=-1).astype(jnp.int32)
            live = live & (visits[rows, best] > 0)
            frames = tree.embeddings.frames[rows, here].astype(jnp.int32)  # [B, m-1]
            segment = jnp.concatenate([frames, best[:, None]], axis=1)
            return (tree.children_index[rows, here, best], live), (segment, live)

        depth = horizon // m
        _, (segments, live) = jax.lax.scan(edge, (node, node != tree.UNVISITED), None, depth)
        length = (m * live.sum(0)).astype(jnp.int32)
        plan = jnp.moveaxis(segments, 0, 1).reshape(action.shape[0], depth * m)
        plan = jnp.pad(plan, ((0, 0), (0, horizon - depth * m)), constant_values=-1)
        return self._cut(plan, length), length

    @staticmethod
    def _cut(plan: jax.Array, length: jax.Array) -> jax.Array:
        """`plan` `[B, H]` with -1 from each game's `length` `[B]` on."""
        return jnp.where(jnp.arange(plan.shape[1]) < length[:, None], plan, -1)

    def _advance_by(self, params, states: games.State, out: NetOutput, frames: jax.Array):
        """`_advance` by a traced `[B]` number of frames (each game stops at its own count).

        Returns:
            (landing states, network output at them, discounted reward sum `[B]`).
        """
        gamma = self.config.gamma

        def body(carry):
            j, s, o, disc = carry
            live = j < frames
            a = self.masked_argmax(o.logits, s.legal_action_mask)
            nxt = jax.vmap(self.game.step)(s, a)
            s = games.tree_where(live, nxt, s)
            o = games.tree_where(live, self.evaluate(params, s), o)
            disc = disc + jnp.where(live, gamma ** j.astype(jnp.float32) * nxt.reward, 0.0)
            return j + 1, s, o, disc

        zeros = jnp.zeros(states.reward.shape, jnp.float32)
        _, s, o, disc = jax.lax.while_loop(
            lambda c: jnp.any(c[0] < frames), body, (jnp.int32(0), states, out, zeros)
        )
        return s, o, disc

    # Search ------------------------------------------------------------------------------------

    def _prior(self, out: NetOutput, mask: jax.Array) -> jax.Array:
        logits = out.logits - out.logits.max(-1, keepdims=True)
        return jnp.where(mask, logits, _NEG)

    def _recurrent_fn(self, k: int, future: Future | None = None):
        gamma = self.config.gamma

        m = self.config.tree_k or k  # the frames of every edge below the root's
        keep_frames = self.config.committed == "plan"  # a plan replays each edge's reflex

        def committed(params, rng, action, node: _Node):
            del rng
            child = jax.vmap(self.game.step)(node.landing, action)
            # An edge leaving the root waits the option's k-1 reflex frames, a deeper one m-1.
            lead = jnp.where(node.root, gamma ** (k - 1), gamma ** (m - 1))
            reward = node.pre_reward + lead * child.reward
            discount = jnp.where(child.done, 0.0, jnp.where(node.root, gamma**k, gamma**m))
            out = self.evaluate(params, child)
            value = jnp.where(child.done, 0.0, out.value)
            landing, out_l, frames, _, pre = self._advance(params, child, out, m - 1)
            prior = self._prior(out_l, landing.legal_action_mask)
            emb = _Node(
                landing=landing,
                pre_reward=pre,
                root=jnp.zeros_like(node.root),
                delay=node.delay,
                frames=frames if keep_frames else None,
            )
            out = mctx.RecurrentFnOutput(
                reward=reward, discount=discount, prior_logits=prior, value=value
            )
            return out, emb

        def committed_future(params, rng, action, node: _Node):
            del rng
            params, future_params = params
            child = jax.vmap(self.game.step)(node.landing, action)
            # gamma^j as the fixed-k tree computes it (f32 of a Python power), so a future that
            # always answers k plans exactly as the option's own "always k" tree.
            powers = jnp.asarray([gamma**j for j in range(max(self.config.budgets) + 1)])
            reward = node.pre_reward + powers[node.delay] * child.reward
            discount = jnp.where(child.done, 0.0, powers[node.delay + 1])
            out = self.evaluate(params, child)
            value = jnp.where(child.done, 0.0, out.value)
            # The option the child's decision state will start: its k-1 reflex frames.
            wait = jnp.where(child.done, 0, future.choose(future_params, child, out) - 1)
            wait = wait.astype(jnp.int32)
            landing, out_l, pre = self._advance_by(params, child, out, wait)
            prior = self._prior(out_l, landing.legal_action_mask)
            emb = _Node(landing=landing, pre_reward=pre, root=jnp.zeros_like(node.root), delay=wait)
            out = mctx.RecurrentFnOutput(
                reward=reward, discount=discount, prior_logits=prior, value=value
            )
            return out, emb

        def clock(params, rng, action, node: _Node):
            del rng
            child = jax.vmap(self.game.step)(node.landing, action)  # cost 0: board only
            out = self.evaluate(params, child)
            discount = jnp.where(child.terminated, 0.0, -1.0)
            value = jnp.where(child.terminated, 0.0, out.value)
            prior = self._prior(out, child.legal_action_mask)
            emb = _Node(
                landing=child,
                pre_reward=jnp.zeros_like(child.reward),
                root=jnp.zeros_like(node.root),
                delay=node.delay,
            )
            out = mctx.RecurrentFnOutput(
                reward=child.reward, discount=discount, prior_logits=prior, value=value
            )
            return out, emb

        if self.kind is games.Kind.CLOCK:
            return clock
        return committed if future is None else committed_future

    def _qtransform(self):
        if self.config.q_scale <= 0:
            return mctx.qtransform_completed_by_mix_value
        # mctx's sigma(q) = (maxvisit_init + max N) * value_scale * q; its default value_scale
        # 0.1 is meant for q in [0, 1], so q / q_scale in return units gets 0.1 / q_scale.
        return functools.partial(
            mctx.qtransform_completed_by_mix_value,
            value_scale=0.1 / self.config.q_scale,
            rescale_values=False,
        )

    def _search(
        self, params, keys, root: _Node, out_root, out_l, k: int, future=None, future_params=None
    ):
        """Runs MCTS for one game per key; `root.landing` and `out_l` are batched `[B]`."""
        cfg = self.config
        mask = root.landing.legal_action_mask
        recurrent_fn = self._recurrent_fn(k, future)
        if future is not None:
            params = (params, future_params)

        def one(key, node, value, prior, mask):
            # A batch of one per game, so each game's search depends on its own key only.
            add = functools.partial(jax.tree.map, lambda x: x[None])
            return mctx.gumbel_muzero_policy(
                params=params,
                rng_key=key,
                root=mctx.RootFnOutput(
                    prior_logits=prior[None], value=value[None], embedding=add(node)
                ),
                recurrent_fn=recurrent_fn,
                num_simulations=cfg.sims(k),
                invalid_actions=~mask[None],
                max_num_considered_actions=cfg.max_considered_actions,
                gumbel_scale=cfg.gumbel_scale,
                qtransform=self._qtransform(),
            )

        prior = self._prior(out_l, mask)
        value = out_root.value
        policy = jax.vmap(one)(keys, root, value, prior, mask)
        policy = jax.tree.map(lambda x: x[:, 0], policy)
        return policy

    # Options -----------------------------------------------------------------------------------

    def option(
        self,
        params,
        keys: jax.Array,
        states: games.State,
        k: int,
        *,
        future: Future | None = None,
        future_params=None,
        miss: jax.Array | None = None,
        fallback: str = "game",
        plan: jax.Array | None = None,
        plan_len: jax.Array | None = None,
    ) -> OptionOutput:
        """Runs option k on every game of a batch.

        Args:
            params: network parameters.
            keys: `[B]` PRNG keys, one per game.
            states: `[B]` decision states s_t.
            k: the budget (static).
            future: committed games: the budgets the tree expects at its deeper decision
                states (None: `tree_k`, or always k). Overrides `tree_k`.
            future_params: `future`'s parameters (traced).
            miss: committed games: `[B]` bool, True where the planned action missed its
                landing frame's deadline (a simulated deployment, `gate.committed.latency`): that
                frame plays the `fallback` instead, as the env server does; the k-1 reflex frames
                before it are unchanged. None: every planned action lands (the simulated clock).
            fallback: what a missed landing frame plays (static): "game" (the game's
                `fallback_action`, the env server's default) or "reflex" (the masked argmax of
                the raw policy, a session's fallback "reflex").
            plan: committed="plan" only: `[B, H]` int32, the previous option's `plan` (its
                first action is this option's first frame); None: no plan (the reflex).
            plan_len: `[B]` int32, its valid frames (with `plan`).

        Returns:
            The option's outcome per game; see `OptionOutput`. A missed landing frame's action
            is the fallback, with `planned` False (and under "plan" no plan: the world left
            the tree). Under "plan", `actions[:, :k-1]` are the committed frames and
            `plan`/`plan_len` the plan for the next option.
        """
        if fallback not in FALLBACKS:
            raise ValueError(f"fallback {fallback!r} is not one of {FALLBACKS}")
        by_plan = self.config.committed == "plan"
        if (plan is None) != (plan_len is None):
            raise ValueError("plan and plan_len come together")
        if plan is not None and not by_plan:
            raise ValueError('a plan is followed under committed="plan" only')
        if by_plan and future is not None:
            raise ValueError('a Future under committed="plan" is not supported yet (issue 44)')
        if self.kind is games.Kind.CLOCK:
            if future is not None or miss is not None:
                raise ValueError("a Future and a miss model committed-action games only")
            return self._clock_option(params, keys, states, k)
        return self._committed_option(
            params, keys, states, k, future, future_params, miss, fallback, plan, plan_len
        )[0]

    def _committed_option(
        self, params, keys, states, k, future, future_params, miss, fallback, plan, plan_len
    ) -> tuple[OptionOutput, mctx.PolicyOutput]:
        """`option` in a committed-action game, and its search's `policy` (its tree `[B, ...]`)."""
        cfg = self.config
        by_plan = cfg.committed == "plan"
        m = cfg.tree_k or k
        out0 = self.evaluate(params, states)
        batch = states.reward.shape[0]
        if by_plan:
            if plan is None:
                plan, plan_len = self.empty_plan(batch)
            committed = self._commit(params, states, out0, k - 1, plan, plan_len)
        else:
            committed = self._advance(params, states, out0, k - 1)
        landing, out_l, reflex, raw, disc = committed
        root = _Node(
            landing=landing,
            pre_reward=disc,
            root=jnp.ones(disc.shape, bool),
            delay=jnp.full(disc.shape, k - 1, jnp.int32),
            # The root's embedding has its children's shapes; no plan reads its frames.
            frames=jnp.full((batch, m - 1), -1, jnp.int32) if by_plan else None,
        )
        policy = self._search(params, keys, root, out0, out_l, k, future, future_params)
        planned_action = policy.action.astype(jnp.int32)
        landed = jnp.ones(planned_action.shape, bool)
        if miss is not None:
            if fallback == "game":
                instead = jax.vmap(self.game.fallback_action)(landing).astype(jnp.int32)
            else:
                instead = self.masked_argmax(out_l.logits, landing.legal_action_mask)
            planned_action = jnp.where(miss, instead, planned_action)
            landed = ~miss
        final = jax.vmap(self.game.step)(landing, planned_action)
        # Absorbing states pay 0 after the end, so plain sums are already cut at termination.
        raw = raw + final.reward
        disc = disc + cfg.gamma ** (k - 1) * final.reward
        actions = jnp.concatenate([reflex, planned_action[:, None]], axis=1)
        planned = jnp.concatenate([jnp.zeros((batch, k - 1), bool), landed[:, None]], 1)
        extra = {}
        if by_plan:
            new_plan, new_len = self.plan_of(policy.search_tree, policy.action, m)
            new_len = jnp.where(landed, new_len, 0)  # a missed action leaves the tree
            extra = dict(plan=self._cut(new_plan, new_len), plan_len=new_len)
        return self._output(
            out0,
            policy,
            final,
            actions=actions,
            planned=planned,
            reward=raw,
            discounted_reward=disc,
            discount=jnp.where(final.terminated, 0.0, cfg.gamma**k),
            cost=jnp.zeros((batch,), jnp.int32),
            **extra,
        ), policy

    @staticmethod
    def _output(out0: NetOutput, policy, final: games.State, **fields) -> OptionOutput:
        """An `OptionOutput` whose search, network and outcome fields come from the option."""
        return OptionOutput(
            terminated=final.terminated,
            truncated=final.truncated,
            next_state=final,
            root_value=out0.value,
            search_value=policy.search_tree.node_values[:, 0],
            visit_counts=policy.search_tree.summary().visit_counts,
            action_weights=policy.action_weights,
            features=out0.features,
            decision_logits=out0.logits,
            **fields,
        )

    def _clock_option(self, params, keys, states, k: int) -> OptionOutput:
        cfg = self.config
        out0 = self.evaluate(params, states)
        root = _Node(
            landing=states,
            pre_reward=jnp.zeros_like(states.reward),
            root=jnp.ones(states.reward.shape, bool),
            delay=jnp.zeros(states.reward.shape, jnp.int32),
        )
        policy = self._search(params, keys, root, out0, out0, k)
        reflex = jax.vmap(self.game.needs_reflex)(states)
        action = jnp.where(
            reflex,
            self.masked_argmax(out0.logits, states.legal_action_mask),
            policy.action.astype(jnp.int32),
        )
        cost = jnp.where(reflex, 0, cfg.sims(k)).astype(jnp.int32)
        final = jax.vmap(self.game.step)(states, action, cost)
        return self._output(
            out0,
            policy,
            final,
            actions=action[:, None],
            planned=~reflex[:, None],
            reward=final.reward,
            discounted_reward=final.reward,
            discount=jnp.where(final.terminated, 0.0, 1.0),
            cost=cost,
        )
