"""Expert iteration (committed-action games) and self-play (clock games) for the planner network.

One iteration, all inside one jitted `shard_map` over a 1-D device mesh (batch axis sharded,
parameters replicated, gradients `pmean`'d), in purejaxrl style:

1. Collect: `unroll` decisions on `batch` auto-reset games (`lax.scan`). Each decision is one
   budgeted option `planner.option(params, keys, states, k)` with Gumbel noise (`gumbel_scale`
   1.0), so the search samples its action. A finished game is reset at once from a fresh key split
   from that game's carried key.
2. Targets: bootstrapped n-step returns over option steps (`nstep_targets`). Trajectories roll
   across iterations: the decisions of iteration i are emitted to the replay buffer during
   iteration i+1, when their n-step windows (n <= unroll) are complete, so every sample gets a
   target bootstrapped from the MCTS root value (`search_value`) of a later decision. Discounts
   are per step (`step_discounts`): committed games gamma^k, and 0 when the option terminated
   *or* truncated (the networks see the time input t/T, so the horizon is a true end of the
   time-augmented task whose value there is 0); clock games -1 per ply (the mover's view
   alternates) and 0 at the end. A done step has discount 0, so an auto-reset cuts the return.
3. Replay: a circular buffer of samples per device (uniform sampling); `learner_steps` Adam steps
   on minibatches from it. Loss: masked policy cross-entropy against the search's improved
   policy (`action_weights`) + value loss (categorical cross-entropy against `two_hot(target)`,
   or MSE for a tanh head) + small L2, with global-norm clipping.

Policy samples belong to the *landing* state of the option's root: for k > 1 the search's prior
and mask are those of the state after the k-1 reflex frames, so `landing_states` replays the
option's reflex actions from the decision state (exact: the game's randomness is in the state).
Value samples are the decision state s_t.

Clock games are trained on the board game with effectively unlimited clocks (the base network
sees the board only), so self-play never falls back to reflex moves; evaluation uses the same.

XLA:CPU runs convolution gradients ~15x slower inside control flow (while, scan, cond), so the
learner's steps are unrolled and no `lax.cond` wraps an update or a buffer write.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import functools
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import games
from planner import checkpoint as ckpt
from planner.configs import config_from_dict, config_to_dict, default_config
from planner.evaluate import (
    EVAL_OPENING_PLIES,
    RANDOM,
    REFLEX,
    make_committed_eval,
    make_match_eval,
    to_result,
)
from planner.network import two_hot
from planner.options import Planner, PlannerConfig

_NEG = jnp.finfo(jnp.float32).min
#: Clock games train and evaluate with this many ticks per player: the clock never runs out.
UNLIMITED_CLOCK = 2**30
#: The replay buffer is saved in the checkpoint when smaller than this; otherwise it is
#: refilled after a resume.
REPLAY_SAVE_LIMIT = 50 * 2**20
_AXIS = "d"
CHECKPOINT = "checkpoint.msgpack"
BEST = "best.msgpack"
EXPORT = "planner.msgpack"
LOG = "log.csv"
LOG_FIELDS = (
    "iteration",
    "frames",
    "wall_time",
    "iter_seconds",
    "frames_per_s",
    "loss",
    "policy_loss",
    "value_loss",
    "l2_loss",
    "grad_norm",
    "replay_size",
    "option_reward",
    "episodes",
    "episode_return",
    "episode_frames",
    "eval_mean",
    "eval_se",
    "eval_vs_random",
    "eval_vs_reflex",
)


# Config ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Settings of one training run (planner shape overrides included)."""

    #: Registered game id.
    game_id: str
    #: Training iterations (collect + learn) of the whole run.
    iterations: int = 1000
    #: Games played in parallel (split across devices).
    batch: int = 64
    #: Decisions per game per iteration.
    unroll: int = 16
    #: Option budget of the collected decisions; None: 1 (committed), the budget nearest 32
    #: simulations (clock).
    train_k: int | None = None
    #: Committed games: simulations per frame (option k runs k * this); None: the planner's.
    sims_per_frame: int | None = None
    #: mctx Gumbel scale during collection (1.0 samples the searched action).
    gumbel_scale: float = 1.0
    #: Option steps per value target before bootstrapping (<= unroll).
    n_step: int = 10
    #: Samples the replay buffer holds (split across devices).
    replay_capacity: int = 50_000
    #: Adam steps per iteration.
    learner_steps: int = 4
    #: Samples per Adam step (split across devices).
    minibatch: int = 256
    #: Adam learning rate; None: 3e-4 (committed), 1e-3 (clock).
    lr: float | None = None
    #: Weight of 0.5 * sum of squared kernel weights in the loss.
    l2: float = 1e-4
    #: Weight of the value loss against the policy loss.
    value_weight: float = 1.0
    #: Global gradient-norm clip.
    max_grad_norm: float = 1.0
    #: Evaluate every this many iterations (and after the last); 0: never.
    eval_every: int = 10
    #: Evaluation episodes (committed) or games per opponent (clock).
    eval_episodes: int = 32
    #: Budget of the evaluated option; None: train_k (committed), the largest budget (clock).
    eval_k: int | None = None
    #: Cap on decisions (committed) or plies (clock) per evaluation; None: horizon / 400.
    eval_max_decisions: int | None = None
    #: Write the checkpoint every this many iterations (and after the last).
    checkpoint_every: int = 10
    #: Seed of parameters, games and search.
    seed: int = 0
    #: Devices of the mesh; None: the most visible devices that divide the batch sizes.
    devices: int | None = None
    #: Network overrides; None keeps the game's default.
    torso: str | None = None
    channels: int | None = None
    blocks: int | None = None
    features: int | None = None
    value_hidden: int | None = None
    #: Game settings added to the planner config's (e.g. (("num_rows", 6), ("num_cols", 6))).
    game_params: tuple[tuple[str, Any], ...] = ()
    #: A new run starts from these planner params (e.g. a shipped `planner.msgpack`) instead of
    #: a random init; the optimizer state starts fresh. None: random init.
    init_from: str | None = None
    #: Two-player games: each self-play game starts from a uniform number in [0, this] of
    #: uniformly random moves, so self-play also sees positions its own policy avoids (a
    #: self-play-only net can misjudge a random opponent's moves).
    opening_plies: int = 0

    def __post_init__(self) -> None:
        positive = ("iterations", "batch", "unroll", "n_step", "replay_capacity", "minibatch")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.opening_plies and not self.two_player:
            raise ValueError(
                f"opening_plies is for two-player games; {self.game_id} has chance of its own"
            )
        for name in ("learner_steps", "eval_every", "checkpoint_every", "opening_plies"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.n_step > self.unroll:
            raise ValueError(
                f"n_step={self.n_step} must be <= unroll={self.unroll}: a decision's n-step "
                "window must be complete one iteration later"
            )
        # Unknown games, budgets and clock-game simulation overrides fail here, not mid-run.
        self.planner_config, self.k, self.eval_budget  # noqa: B018

    @property
    def planner_config(self) -> PlannerConfig:
        """The game's default planner config with this run's overrides."""
        base = default_config(self.game_id)
        over = {
            f: getattr(self, f)
            for f in ("torso", "channels", "blocks", "features", "value_hidden")
            if getattr(self, f) is not None
        }
        net = dataclasses.replace(base.network, **over)
        params = tuple({**dict(base.game_params), **dict(self.game_params)}.items())
        cfg = dataclasses.replace(base, network=net, game_params=params)
        if self.sims_per_frame is not None:
            if self.two_player:
                raise ValueError(
                    f"{self.game_id} is a clock game: its budgets are simulation counts "
                    f"{base.budgets}; choose one with train_k instead of sims_per_frame"
                )
            cfg = dataclasses.replace(
                cfg, simulations=tuple(self.sims_per_frame * k for k in cfg.budgets)
            )
        return cfg

    @property
    def two_player(self) -> bool:
        return games.game_class(self.game_id).num_players == 2

    @property
    def k(self) -> int:
        """The option budget of the collected decisions."""
        budgets = default_config(self.game_id).budgets
        if self.train_k is not None:
            k = self.train_k
        elif self.two_player:
            k = min(budgets, key=lambda b: abs(b - 32))
        else:
            k = 1
        if k not in budgets:
            raise ValueError(f"train_k={k} is not a budget of {self.game_id}: {budgets}")
        return k

    @property
    def eval_budget(self) -> int:
        budgets = default_config(self.game_id).budgets
        k = (
            self.eval_k
            if self.eval_k is not None
            else (max(budgets) if self.two_player else self.k)
        )
        if k not in budgets:
            raise ValueError(f"eval_k={k} is not a budget of {self.game_id}: {budgets}")
        return k

    @property
    def learning_rate(self) -> float:
        if self.lr is not None:
            return self.lr
        return 1e-3 if self.two_player else 3e-4


def train_config_to_dict(cfg: TrainConfig) -> dict:
    """JSON-able form of a `TrainConfig`."""
    return dataclasses.asdict(cfg)


def train_config_from_dict(d: dict) -> TrainConfig:
    """Inverse of `train_config_to_dict` (unknown keys are an error)."""
    d = dict(d)
    d["game_params"] = tuple(tuple(p) for p in d.get("game_params", ()))
    return TrainConfig(**d)


# Value targets ---------------------------------------------------------------------------------


def step_discounts(
    discount: jax.Array, terminated: jax.Array, truncated: jax.Array, *, two_player: bool
) -> jax.Array:
    """Per-option-step discounts of the value targets.

    Args:
        discount: `[...]` the option's `discount` (gamma^k, 0 if terminated).
        terminated, truncated: `[...]` bool flags of the option.
        two_player: clock games use -1 per ply (the next value is the opponent's).

    Returns:
        `[...]` float32: 0 where the option ended the game by its rules or by the horizon (the
        networks take t/T, so the horizon is a true end of the time-augmented task), else gamma^k
        (committed) or -1 (clock).
    """
    done = terminated | truncated
    live = jnp.full_like(discount, -1.0) if two_player else discount
    return jnp.where(done, 0.0, live).astype(jnp.float32)


def nstep_targets(rewards: jax.Array, discounts: jax.Array, values: jax.Array, n: int) -> jax.Array:
    """Bootstrapped n-step returns over option steps (time-major).

    G_t = sum_{j<n} (prod_{i<j} d_{t+i}) r_{t+j} + (prod_{i<n} d_{t+i}) v_{t+n}.

    Args:
        rewards: `[T, ...]` reward of option step t (committed: discounted over its frames;
            clock: the mover's reward).
        discounts: `[T, ...]` discount after step t (`step_discounts`).
        values: `[T, ...]` bootstrap value of the decision state of step t (MCTS root value,
            from the view of the player to move there).
        n: steps before bootstrapping (static).

    Returns:
        `[T - n, ...]` targets for the steps whose windows are complete.
    """
    m = rewards.shape[0] - n
    if m < 1:
        raise ValueError(f"need more than n={n} steps, got {rewards.shape[0]}")
    g = jnp.zeros_like(rewards[:m])
    disc = jnp.ones_like(discounts[:m])
    for j in range(n):
        g = g + disc * rewards[j : j + m]
        disc = disc * discounts[j : j + m]
    return g + disc * values[n : n + m]


def landing_states(game: games.Game, states: games.State, actions: jax.Array) -> games.State:
    """States after playing `actions` `[B, J]` frame by frame from `states` `[B]`.

    With J = k-1 reflex actions of an option this is where its searched action lands (the state
    whose prior and mask the search used). Exact because a game's randomness is in its state.
    """
    for j in range(actions.shape[1]):
        states = jax.vmap(game.step)(states, actions[:, j])
    return states


# Data ------------------------------------------------------------------------------------------


@struct.dataclass
class Sample:
    """Training samples (leading axes: one per sample)."""

    # Planes are stored as bfloat16 (exact for the 0/1 and small-count planes, ~3 digits for the
    # fractional ones) to halve the buffer: Pac-Man's planes are 20 KB in float32.
    obs: jax.Array  # [N, H, W, C] bfloat16 planes of the decision state s_t (value input)
    time: jax.Array  # [N, 2] time input of s_t
    value_target: jax.Array  # [N] n-step return from s_t
    policy_target: jax.Array  # [N, A] improved policy of the search (action_weights)
    legal: jax.Array  # [N, A] bool legal mask where the searched action lands
    policy_valid: jax.Array  # [N] bool False where the game ended during the reflex frames
    landing_obs: jax.Array | None = None  # [N, H, W, C] planes of the landing state (k > 1)
    landing_time: jax.Array | None = None  # [N, 2] its time input (k > 1)


@struct.dataclass
class Replay:
    """Circular replay buffer; under `shard_map` each device holds its own slice of `data`."""

    data: Sample  # [C]
    ptr: jax.Array  # [] int32 next slot to write (the same on every device)
    size: jax.Array  # [] int32 filled slots (the same on every device)


@struct.dataclass
class Trajectory:
    """`unroll` decisions of every game, time-major `[U, B]`, waiting for their targets."""

    sample: Sample  # [U, B] (value_target not yet filled)
    reward: jax.Array  # [U, B] option reward for the targets
    discount: jax.Array  # [U, B] `step_discounts`
    search_value: jax.Array  # [U, B] MCTS root value at the decision state


@struct.dataclass
class Actors:
    """The running games of the batch `[B]`."""

    states: games.State  # [B]
    keys: jax.Array  # [B, 2] per-game PRNG keys
    episode_return: jax.Array  # [B] raw return of the running episode
    episode_frames: jax.Array  # [B] frames of the running episode


def _sample_shapes(planner: Planner, k: int) -> Sample:
    a = planner.game.num_actions
    sd = jax.ShapeDtypeStruct
    obs = sd(planner.input_shape, jnp.bfloat16)
    two = sd((2,), jnp.float32)
    return Sample(
        obs=obs,
        time=two,
        value_target=sd((), jnp.float32),
        policy_target=sd((a,), jnp.float32),
        legal=sd((a,), jnp.bool_),
        policy_valid=sd((), jnp.bool_),
        landing_obs=obs if k > 1 else None,
        landing_time=two if k > 1 else None,
    )


def _zeros(shapes, lead: tuple[int, ...]):
    return jax.tree.map(lambda s: jnp.zeros((*lead, *s.shape), s.dtype), shapes)


def replay_nbytes(planner: Planner, k: int, capacity: int) -> int:
    """Bytes of a replay buffer's data."""
    leaves = jax.tree.leaves(_sample_shapes(planner, k))
    return capacity * sum(math.prod(s.shape) * np.dtype(s.dtype).itemsize for s in leaves)


def _where(mask: jax.Array, a, b):
    def pick(x, y):
        return jnp.where(mask.reshape(mask.shape + (1,) * (x.ndim - mask.ndim)), x, y)

    return jax.tree.map(pick, a, b)


def _replay_add(replay: Replay, samples: Sample, valid: jax.Array) -> Replay:
    """Writes `samples` `[n]` at the write pointer if `valid` (a traced bool), else nothing."""
    cap = replay.data.value_target.shape[0]
    n = samples.value_target.shape[0]
    idx = (replay.ptr + jnp.arange(n)) % cap

    def put(buf, x):
        # Rewrites the old rows when not valid: no lax.cond (XLA:CPU control flow is slow).
        return buf.at[idx].set(jnp.where(valid, x.astype(buf.dtype), buf[idx]))

    n = n * valid.astype(jnp.int32)
    return Replay(
        data=jax.tree.map(put, replay.data, samples),
        ptr=(replay.ptr + n) % cap,
        size=jnp.minimum(replay.size + n, cap),
    )


# The jitted iteration --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Fns:
    """Compiled entry points of one (config, mesh) pair."""

    planner: Planner
    eval_planner: Planner
    optimizer: optax.GradientTransformation
    mesh: Mesh
    iteration: Any
    evaluate: Any
    init_params: Any
    init_actors: Any
    empty_replay: Any
    empty_pending: Any


def _compile_key(cfg: TrainConfig) -> TrainConfig:
    """`cfg` with the fields that do not change the compiled functions reset (cache key)."""
    return dataclasses.replace(cfg, iterations=1, eval_every=0, checkpoint_every=0, seed=0)


def _training_game(cfg: TrainConfig, pcfg: PlannerConfig) -> games.Game:
    params = dict(pcfg.game_params)
    if cfg.two_player:
        params["initial_time"] = UNLIMITED_CLOCK
    return games.make(pcfg.game_id, **params)


@functools.lru_cache(maxsize=8)
def _build(cfg: TrainConfig, ndev: int) -> _Fns:
    pcfg = cfg.planner_config
    game = _training_game(cfg, pcfg)
    planner = Planner(dataclasses.replace(pcfg, gumbel_scale=cfg.gumbel_scale), game=game)
    eval_planner = Planner(dataclasses.replace(pcfg, gumbel_scale=0.0), game=game)
    two_player = planner.two_player
    net_cfg = pcfg.network
    k = cfg.k
    unroll, n_step = cfg.unroll, cfg.n_step
    mb_local = cfg.minibatch // ndev
    optimizer = optax.chain(
        optax.clip_by_global_norm(cfg.max_grad_norm), optax.adam(cfg.learning_rate)
    )
    mesh = Mesh(np.array(jax.devices()[:ndev]), (_AXIS,))
    shard = P(_AXIS)

    # ---- collection ----
    def reset(keys):
        states = jax.vmap(game.init)(keys)
        if not cfg.opening_plies:
            return states
        # Fresh keys derived from the init keys (init only draws the first player from them).
        sub = jax.vmap(lambda key: jax.random.split(jax.random.fold_in(key, 1)))(keys)
        plies = jax.vmap(lambda key: jax.random.randint(key, (), 0, cfg.opening_plies + 1))(
            sub[:, 0]
        )
        opening = functools.partial(games.random_opening, game, max_plies=cfg.opening_plies)
        return jax.vmap(opening)(states, sub[:, 1], plies)

    def collect(params, actors: Actors):
        def decide(actors: Actors, _):
            states = actors.states
            keys = jax.vmap(lambda key: jax.random.split(key, 3))(actors.keys)
            out = planner.option(params, keys[:, 1], states, k)
            obs, tin = jax.vmap(planner.inputs)(states)
            if k > 1:
                landing = landing_states(game, states, out.actions[:, : k - 1])
                l_obs, l_time = jax.vmap(planner.inputs)(landing)
                legal, valid = landing.legal_action_mask, ~landing.done
            else:
                l_obs = l_time = None
                legal, valid = states.legal_action_mask, jnp.ones(obs.shape[:1], bool)
            sample = Sample(
                obs=obs.astype(jnp.bfloat16),
                time=tin,
                value_target=jnp.zeros_like(out.reward),
                policy_target=out.action_weights,
                legal=legal,
                policy_valid=valid,
                landing_obs=None if l_obs is None else l_obs.astype(jnp.bfloat16),
                landing_time=l_time,
            )
            reward = out.reward if two_player else out.discounted_reward
            discount = step_discounts(
                out.discount, out.terminated, out.truncated, two_player=two_player
            )
            step = Trajectory(
                sample=sample, reward=reward, discount=discount, search_value=out.search_value
            )
            frames = out.next_state.frame - states.frame
            ret = actors.episode_return + out.reward
            length = actors.episode_frames + frames
            done = out.done
            nxt = _where(done, reset(keys[:, 2]), out.next_state)
            stats = dict(
                option_reward=out.reward.mean(),
                frames=frames.sum(),
                episodes=done.sum(),
                return_sum=jnp.where(done, ret, 0.0).sum(),
                frames_sum=jnp.where(done, length, 0).sum(),
            )
            actors = Actors(
                states=nxt,
                keys=keys[:, 0],
                episode_return=jnp.where(done, 0.0, ret),
                episode_frames=jnp.where(done, 0, length),
            )
            return actors, (step, stats)

        actors, (traj, stats) = jax.lax.scan(decide, actors, None, length=unroll)
        return actors, traj, stats

    # ---- learner ----
    def loss_fn(params, batch: Sample):
        obs = batch.obs.astype(jnp.float32)
        if batch.landing_obs is None:
            out = planner.net.apply(params, obs, batch.time)
            out_p = out
        else:
            m = obs.shape[0]
            both = planner.net.apply(
                params,
                jnp.concatenate([obs, batch.landing_obs.astype(jnp.float32)]),
                jnp.concatenate([batch.time, batch.landing_time]),
            )
            out = jax.tree.map(lambda x: x[:m], both)
            out_p = jax.tree.map(lambda x: x[m:], both)
        logp = jax.nn.log_softmax(jnp.where(batch.legal, out_p.logits, _NEG), axis=-1)
        ce = -jnp.sum(jnp.where(batch.legal, batch.policy_target * logp, 0.0), axis=-1)
        valid = batch.policy_valid.astype(jnp.float32)
        policy_loss = jnp.sum(ce * valid) / jnp.maximum(valid.sum(), 1.0)
        if net_cfg.value_bins:
            target = two_hot(batch.value_target, net_cfg)
            value_loss = -jnp.mean(
                jnp.sum(target * jax.nn.log_softmax(out.value_logits, axis=-1), axis=-1)
            )
        else:
            value_loss = jnp.mean((out.value - batch.value_target) ** 2)
        kernels = [x for x in jax.tree.leaves(params) if x.ndim >= 2]
        l2_loss = 0.5 * sum(jnp.sum(x**2) for x in kernels)
        loss = policy_loss + cfg.value_weight * value_loss + cfg.l2 * l2_loss
        return loss, dict(policy_loss=policy_loss, value_loss=value_loss, l2_loss=l2_loss)

    def learn(params, opt_state, replay: Replay, key):
        def one(carry, key):
            params, opt_state = carry
            idx = jax.random.randint(key, (mb_local,), 0, jnp.maximum(replay.size, 1))
            batch = jax.tree.map(lambda x: x[idx], replay.data)
            (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, batch)
            grads = jax.lax.pmean(grads, _AXIS)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
            stats = dict(loss=loss, grad_norm=optax.tree.norm(grads), **aux)
            return (params, opt_state), jax.lax.pmean(stats, _AXIS)

        # No lax.cond around the update: XLA:CPU runs conv gradients ~15x slower inside any
        # control flow (cond, while, scan), so the steps are unrolled and an empty buffer is
        # handled by discarding the update.
        keys = jax.random.split(key, cfg.learner_steps)
        (new_params, new_opt), stats = jax.lax.scan(one, (params, opt_state), keys, unroll=True)
        ready = replay.size > 0
        params, opt_state = _where(ready, (new_params, new_opt), (params, opt_state))
        stats = jax.tree.map(lambda x: jnp.where(ready, x.mean(), jnp.nan), stats)
        return params, opt_state, stats

    # ---- one iteration (per device) ----
    def iteration(params, opt_state, actors, pending, pending_valid, replay, key):
        key, learn_key = jax.random.split(key)
        learn_key = jax.random.fold_in(learn_key, jax.lax.axis_index(_AXIS))
        actors, traj, stats = collect(params, actors)

        both = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), pending, traj)
        targets = nstep_targets(both.reward, both.discount, both.search_value, n_step)
        samples = pending.sample.replace(value_target=targets[:unroll])
        flat = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), samples)
        replay = _replay_add(replay, flat, pending_valid)
        params, opt_state, lstats = learn(params, opt_state, replay, learn_key)
        total = jax.lax.psum(
            {n: stats[n].sum() for n in ("frames", "episodes", "return_sum", "frames_sum")}, _AXIS
        )
        episodes = total["episodes"]
        metrics = dict(
            lstats,
            frames=total["frames"],
            episodes=episodes,
            episode_return=total["return_sum"] / jnp.maximum(episodes, 1),
            episode_frames=total["frames_sum"] / jnp.maximum(episodes, 1),
            option_reward=jax.lax.pmean(stats["option_reward"].mean(), _AXIS),
            replay_size=jax.lax.psum(replay.size, _AXIS),
        )
        return params, opt_state, actors, traj, jnp.bool_(True), replay, key, metrics

    replay_spec = Replay(data=shard, ptr=P(), size=P())
    traj_spec = P(None, _AXIS)
    iteration_fn = jax.jit(
        jax.shard_map(
            iteration,
            mesh=mesh,
            in_specs=(P(), P(), shard, traj_spec, P(), replay_spec, P()),
            out_specs=(P(), P(), shard, traj_spec, P(), replay_spec, P(), P()),
            check_vma=False,
        ),
        donate_argnums=(2, 3, 5),
    )

    # ---- state constructors (sharded like the iteration's inputs) ----
    def init_params(key):
        params = planner.init_params(key)
        return params, optimizer.init(params)

    def init_actors(key):
        keys = jax.random.split(key, cfg.batch)
        init_keys = jax.vmap(lambda key: jax.random.split(key))(keys)
        return Actors(
            states=reset(init_keys[:, 0]),
            keys=init_keys[:, 1],
            episode_return=jnp.zeros((cfg.batch,), jnp.float32),
            episode_frames=jnp.zeros((cfg.batch,), jnp.int32),
        )

    shapes = _sample_shapes(planner, k)

    def empty_replay():
        return Replay(
            data=_zeros(shapes, (cfg.replay_capacity,)),
            ptr=jnp.int32(0),
            size=jnp.int32(0),
        )

    def empty_pending():
        lead = (unroll, cfg.batch)
        zero = jnp.zeros(lead, jnp.float32)
        return Trajectory(
            sample=_zeros(shapes, lead), reward=zero, discount=zero, search_value=zero
        )

    def named(spec):
        return lambda tree: jax.tree.map(lambda _: NamedSharding(mesh, spec), tree)

    init_actors_fn = jax.jit(
        init_actors, out_shardings=named(shard)(jax.eval_shape(init_actors, jax.random.key(0)))
    )
    rep_shape = jax.eval_shape(empty_replay)
    empty_replay_fn = jax.jit(
        empty_replay,
        out_shardings=Replay(
            data=named(shard)(rep_shape.data),
            ptr=NamedSharding(mesh, P()),
            size=NamedSharding(mesh, P()),
        ),
    )
    empty_pending_fn = jax.jit(
        empty_pending, out_shardings=named(traj_spec)(jax.eval_shape(empty_pending))
    )

    # ---- evaluation (episodes split across devices) ----
    e_local = cfg.eval_episodes // ndev
    ek = cfg.eval_budget
    if two_player:
        plies = cfg.eval_max_decisions or 400
        vs_random = make_match_eval(
            eval_planner,
            ("option", ek),
            RANDOM,
            episodes=e_local,
            max_plies=plies,
            opening_plies=EVAL_OPENING_PLIES,
        )
        vs_reflex = make_match_eval(
            eval_planner,
            ("option", ek),
            REFLEX,
            episodes=e_local,
            max_plies=plies,
            opening_plies=EVAL_OPENING_PLIES,
        )

        def evaluate(params, keys):
            key_r, key_x = jax.random.split(keys[0])
            return vs_random(params, params, key_r), vs_reflex(params, params, key_x)

    else:
        max_dec = cfg.eval_max_decisions or game.horizon or 10_000
        committed = make_committed_eval(eval_planner, ek, episodes=e_local, max_decisions=max_dec)

        def evaluate(params, keys):
            return committed(params, keys[0])

    evaluate_fn = jax.jit(
        jax.shard_map(evaluate, mesh=mesh, in_specs=(P(), shard), out_specs=shard, check_vma=False)
    )
    return _Fns(
        planner=planner,
        eval_planner=eval_planner,
        optimizer=optimizer,
        mesh=mesh,
        iteration=iteration_fn,
        evaluate=evaluate_fn,
        init_params=jax.jit(init_params),
        init_actors=init_actors_fn,
        empty_replay=empty_replay_fn,
        empty_pending=empty_pending_fn,
    )


def _device_count(cfg: TrainConfig) -> int:
    available = len(jax.devices())
    sizes = (cfg.batch, cfg.minibatch, cfg.replay_capacity, cfg.eval_episodes)
    if cfg.devices is None:
        return max(n for n in range(1, available + 1) if all(s % n == 0 for s in sizes))
    if cfg.devices > available:
        raise ValueError(
            f"devices={cfg.devices} but JAX sees {available} device(s); on CPU set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={cfg.devices} before jax is "
            "imported (the CLI's --devices does this)"
        )
    for name, size in zip(("batch", "minibatch", "replay_capacity", "eval_episodes"), sizes):
        if size % cfg.devices:
            raise ValueError(f"{name}={size} is not divisible by devices={cfg.devices}")
    return cfg.devices


# Host loop -------------------------------------------------------------------------------------


@functools.cache
def _git_commit() -> str:
    return ckpt.git_commit()


class Trainer:
    """Runs a `TrainConfig` into an output folder: checkpoints, logs, evaluation.

    Files in `out_dir`: `checkpoint.msgpack` (params, optimizer state, key, and the replay buffer
    when under `REPLAY_SAVE_LIMIT`; written every `checkpoint_every` iterations and after the
    last), `best.msgpack` (params of the best evaluation so far; ties go to the later one),
    `planner.msgpack` (the exported params: best, else latest), each with a `.json` metadata
    file; `log.csv`, and TensorBoard events in `tb/`.

    A resumed run continues the iteration numbering of its checkpoint and drops the log rows
    written after it; a killed run loses at most `checkpoint_every` iterations. The games in
    flight and the last iteration's decisions awaiting targets are not saved (new games start),
    and a replay buffer too large to save (or saved with another device count) refills.
    """

    def __init__(
        self,
        cfg: TrainConfig,
        out_dir: str | Path,
        *,
        resume: bool = False,
        argv: list[str] | None = None,
        progress: bool = False,
        tensorboard: bool = True,
    ) -> None:
        self.cfg = cfg
        self.out = Path(out_dir)
        self.argv = list(sys.argv if argv is None else argv)
        self.progress = progress
        self.ckpt_path = self.out / CHECKPOINT
        self.ndev = _device_count(cfg)
        if cfg.batch // self.ndev * cfg.unroll > cfg.replay_capacity // self.ndev:
            raise ValueError(
                f"replay_capacity={cfg.replay_capacity} is smaller than one iteration's "
                f"{cfg.batch * cfg.unroll} samples"
            )
        if resume and not self.ckpt_path.exists():
            raise ckpt.CheckpointError(
                f"cannot resume: no checkpoint at {self.ckpt_path} (train without resume to "
                "start a new run)"
            )
        if not resume and self.ckpt_path.exists():
            raise ckpt.CheckpointError(
                f"a checkpoint already exists at {self.ckpt_path}; resume it (--resume) or "
                "choose another output folder"
            )
        self.fns = _build(_compile_key(cfg), self.ndev)
        self.planner = self.fns.planner
        self.planner_config = cfg.planner_config
        mesh = self.fns.mesh
        self._replicated = NamedSharding(mesh, P())

        key, init_key = jax.random.split(jax.random.PRNGKey(cfg.seed))
        params, opt_state = jax.device_get(self.fns.init_params(init_key))
        self.iteration = 0
        self.frames = 0
        self.wall_time = 0.0
        self.last_eval: dict | None = None
        self.best_score = -math.inf
        self.best_params = None
        replay = None
        if resume:
            params, opt_state, key, replay = self._load(params, opt_state)
        elif cfg.init_from is not None:
            # Checked against this run's network: a different shape is a CheckpointError.
            params = ckpt.load(cfg.init_from, {"params": params})[0]["params"]
        self.params = jax.device_put(params, self._replicated)
        self.opt_state = jax.device_put(opt_state, self._replicated)
        key, actor_key = jax.random.split(key)
        self.key = jax.device_put(key, self._replicated)
        self.actors = self.fns.init_actors(actor_key)
        self.pending = self.fns.empty_pending()
        self.pending_valid = jax.device_put(jnp.bool_(False), self._replicated)
        self.replay = replay if replay is not None else self.fns.empty_replay()
        self.save_replay = (
            replay_nbytes(self.planner, cfg.k, cfg.replay_capacity) < REPLAY_SAVE_LIMIT
        )

        self.out.mkdir(parents=True, exist_ok=True)
        self._init_log()
        self._tb = None
        if tensorboard:
            from tensorboardX import SummaryWriter

            self._tb = SummaryWriter(str(self.out / "tb"), purge_step=self.iteration + 1)

    # ---- checkpoint I/O ----

    def _template(self, params, opt_state, with_replay: bool):
        tree = {"params": params, "opt_state": opt_state, "key": jax.random.PRNGKey(0)}
        if with_replay:
            shapes = jax.eval_shape(self.fns.empty_replay)
            tree["replay"] = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), shapes)
        return tree

    def _load(self, params, opt_state):
        meta = ckpt.load_metadata(self.ckpt_path)
        saved_cfg = config_from_dict(meta["planner_config"])
        if saved_cfg.network != self.planner_config.network or saved_cfg.game_id != (
            self.planner_config.game_id
        ):
            raise ckpt.CheckpointError(
                f"checkpoint {self.ckpt_path} holds a {saved_cfg.game_id} network "
                f"{saved_cfg.network}, but this run asks for {self.planner_config.game_id} "
                f"{self.planner_config.network}"
            )
        saved_train = meta.get("train_config", {})
        same_replay = meta.get("replay_saved", False) and meta.get("devices") == self.ndev
        same_replay = same_replay and all(
            saved_train.get(f) == json.loads(json.dumps(getattr(self.cfg, f)))
            for f in ("replay_capacity", "train_k", "game_id", "game_params")
        )
        with_replay = bool(meta.get("replay_saved", False))
        tree, meta = ckpt.load(self.ckpt_path, self._template(params, opt_state, with_replay))
        self.iteration = int(meta["iteration"])
        self.frames = int(meta["frames"])
        self.wall_time = float(meta.get("wall_time", 0.0))
        self.last_eval = meta.get("last_eval")
        best_path = self.out / BEST
        if best_path.exists():
            self.best_params, best_meta = ckpt.load(best_path, {"params": params})
            self.best_params = self.best_params["params"]
            self.best_score = float(best_meta["eval"]["score"])
        replay = None
        if with_replay and same_replay:
            replay = self._put_replay(tree["replay"])
        return tree["params"], tree["opt_state"], jnp.asarray(tree["key"]), replay

    def _put_replay(self, rep: Replay) -> Replay:
        shard = NamedSharding(self.fns.mesh, P(_AXIS))
        return Replay(
            data=jax.device_put(rep.data, shard),
            ptr=jax.device_put(jnp.int32(rep.ptr), self._replicated),
            size=jax.device_put(jnp.int32(rep.size), self._replicated),
        )

    def _metadata(self) -> dict:
        return {
            "game": self.cfg.game_id,
            "planner_config": config_to_dict(self.planner_config),
            "train_config": train_config_to_dict(self.cfg),
            "iteration": self.iteration,
            "seed": self.cfg.seed,
            "frames": self.frames,
            "wall_time": self.wall_time,
            "last_eval": self.last_eval,
            "devices": self.ndev,
            "argv": self.argv,
            "git_commit": _git_commit(),
            "timestamp": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }

    def save_checkpoint(self) -> None:
        """Writes `checkpoint.msgpack` (atomically) and refreshes the exported params."""
        tree = {
            "params": jax.device_get(self.params),
            "opt_state": jax.device_get(self.opt_state),
            "key": jax.device_get(self.key),
        }
        if self.save_replay:
            tree["replay"] = jax.device_get(self.replay)
        meta = dict(self._metadata(), kind="train_state", replay_saved=self.save_replay)
        ckpt.save(self.ckpt_path, tree, meta)
        self.export()

    def export(self) -> Path:
        """Writes `planner.msgpack`: the best evaluated params, else the latest."""
        best = self.best_params is not None
        params = self.best_params if best else jax.device_get(self.params)
        meta = dict(self._metadata(), kind="planner", source="best" if best else "latest")
        if best:
            # The params' own provenance: the iteration, frames and evaluation of the best.
            meta["params_from"] = ckpt.load_metadata(self.out / BEST).get("eval")
        ckpt.save(self.out / EXPORT, {"params": params}, meta)
        return self.out / EXPORT

    # ---- logs ----

    def _init_log(self) -> None:
        path = self.out / LOG
        rows = []
        if path.exists():
            with path.open(newline="") as f:
                rows = [r for r in csv.DictReader(f) if int(r["iteration"]) <= self.iteration]
        # Rows past the checkpoint belong to iterations that the resumed run repeats.
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=LOG_FIELDS)
            writer.writeheader()
            writer.writerows({k: r.get(k, "") for k in LOG_FIELDS} for r in rows)

    def _log(self, row: dict) -> None:
        with (self.out / LOG).open("a", newline="") as f:
            csv.DictWriter(f, fieldnames=LOG_FIELDS).writerow(
                {k: _fmt(row.get(k)) for k in LOG_FIELDS}
            )
        if self._tb is not None:
            for k, v in row.items():
                if k != "iteration" and v is not None and np.isfinite(v):
                    self._tb.add_scalar(k, v, self.iteration)
            self._tb.flush()

    # ---- training ----

    def evaluate(self) -> dict:
        """Evaluates the current params (gumbel_scale 0); returns the eval columns + score."""
        key = jax.random.fold_in(jax.random.PRNGKey(self.cfg.seed + 1), self.iteration)
        keys = jax.random.split(key, self.ndev)
        out = jax.device_get(self.fns.evaluate(self.params, keys))
        if self.planner.two_player:
            r, x = to_result(*out[0]), to_result(*out[1])
            scores = np.concatenate([r.returns, x.returns])
            mean = float(scores.mean())
            se = float(scores.std(ddof=1) / np.sqrt(len(scores))) if len(scores) > 1 else 0.0
            return dict(eval_mean=mean, eval_se=se, eval_vs_random=r.mean, eval_vs_reflex=x.mean)
        res = to_result(*out)
        return dict(eval_mean=res.mean, eval_se=res.se)

    def step(self) -> dict:
        """Runs one iteration (with its evaluation and checkpoint when due); returns its row."""
        cfg = self.cfg
        start = time.perf_counter()
        (
            self.params,
            self.opt_state,
            self.actors,
            self.pending,
            self.pending_valid,
            self.replay,
            self.key,
            metrics,
        ) = self.fns.iteration(
            self.params,
            self.opt_state,
            self.actors,
            self.pending,
            self.pending_valid,
            self.replay,
            self.key,
        )
        metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
        seconds = time.perf_counter() - start
        self.iteration += 1
        self.frames += int(metrics["frames"])
        row = dict(
            metrics,
            iteration=self.iteration,
            frames=self.frames,
            iter_seconds=seconds,
            frames_per_s=metrics["frames"] / seconds,
        )
        if metrics["episodes"] == 0:
            row["episode_return"] = row["episode_frames"] = None
        last = self.iteration == cfg.iterations
        if cfg.eval_every and (self.iteration % cfg.eval_every == 0 or last):
            ev = self.evaluate()
            row.update(ev)
            self.last_eval = dict(ev, iteration=self.iteration)
            if ev["eval_mean"] >= self.best_score:
                self._save_best(ev)
        self.wall_time += time.perf_counter() - start
        row["wall_time"] = self.wall_time
        self._log(row)
        if (cfg.checkpoint_every and self.iteration % cfg.checkpoint_every == 0) or last:
            self.save_checkpoint()
        return row

    def _save_best(self, ev: dict) -> None:
        self.best_score = ev["eval_mean"]
        self.best_params = jax.device_get(self.params)
        meta = dict(
            self._metadata(),
            kind="planner",
            source="best",
            eval=dict(ev, score=ev["eval_mean"], iteration=self.iteration),
        )
        ckpt.save(self.out / BEST, {"params": self.best_params}, meta)

    def run(self) -> dict | None:
        """Trains until `cfg.iterations`; returns the last row (None if nothing was left)."""
        from tqdm import tqdm

        row = None
        bar = tqdm(
            total=self.cfg.iterations,
            initial=self.iteration,
            file=sys.stderr,
            disable=not self.progress,
            desc=self.cfg.game_id,
        )
        try:
            while self.iteration < self.cfg.iterations:
                row = self.step()
                bar.update(1)
                post = {"fps": f"{row['frames_per_s']:.0f}", "loss": _fmt(row["loss"])}
                if row.get("episode_return") is not None:
                    post["ret"] = _fmt(row["episode_return"])
                if row.get("eval_mean") is not None:
                    post["eval"] = _fmt(row["eval_mean"])
                bar.set_postfix(post)
        finally:
            bar.close()
            self.close()
        return row

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def load_params(path: str | Path) -> tuple[Planner, Any, dict]:
    """Loads exported planner params (`planner.msgpack`, `best.msgpack` or a checkpoint).

    Returns:
        (a `Planner` built from the saved planner config, its params, the metadata).
    """
    meta = ckpt.load_metadata(path)
    planner = Planner(config_from_dict(meta["planner_config"]))
    template = planner.init_params(jax.random.PRNGKey(0))
    tree, meta = ckpt.load(path, {"params": template})
    return planner, tree["params"], meta
