"""The jitted expert-iteration step (collect, targets, replay, learn)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from rtplan import games
from rtplan.planner import actors as ac
from rtplan.planner import replay as rb
from rtplan.planner.actors import Actors
from rtplan.planner.losses import planner_loss
from rtplan.planner.options import Planner, PlannerConfig
from rtplan.planner.replay import Replay, Sample
from rtplan.planner.targets import landing_states, nstep_targets, step_discounts
from rtplan.planner.train_config import TrainConfig

#: Name of the mesh axis (the batch of games and the replay buffer).
AXIS = "d"


@struct.dataclass
class Trajectory:
    """`unroll` decisions of every game, time-major `[U, B]`, waiting for their targets."""

    sample: Sample  # [U, B] (value_target not yet filled)
    reward: jax.Array  # [U, B] option reward for the targets
    discount: jax.Array  # [U, B] `step_discounts`
    search_value: jax.Array  # [U, B] MCTS root value at the decision state


@dataclasses.dataclass(frozen=True)
class Fns:
    """Compiled entry points of one (config, mesh) pair."""

    planner: Planner
    eval_planner: Planner
    optimizer: optax.GradientTransformation
    mesh: Mesh
    iteration: Any
    init_params: Any
    init_actors: Any
    empty_replay: Any
    empty_pending: Any


def training_game(cfg: TrainConfig, pcfg: PlannerConfig) -> games.Game:
    """The game self-play and evaluation run on: clock games with clocks that never run out
    (the base network sees the board only, so self-play never falls back to reflex moves)."""
    params = dict(pcfg.game_params)
    if cfg.kind is games.Kind.CLOCK:
        params["initial_time"] = games.UNLIMITED_CLOCK
    return games.make(pcfg.game_id, **params)


def build(cfg: TrainConfig, ndev: int) -> Fns:
    """The jitted functions of `cfg` on the first `ndev` devices (cached: runs that differ only
    in length, schedule or seed share them)."""
    key = dataclasses.replace(cfg, iterations=1, eval_every=0, checkpoint_every=0, seed=0)
    return _build(key, ndev)


@functools.lru_cache(maxsize=8)
def _build(cfg: TrainConfig, ndev: int) -> Fns:
    # Everything runs inside one `shard_map` over a 1-D device mesh: batch axis sharded,
    # parameters replicated, gradients `pmean`'d.
    pcfg = cfg.planner_config
    game = training_game(cfg, pcfg)
    planner = Planner(dataclasses.replace(pcfg, gumbel_scale=cfg.gumbel_scale), game=game)
    eval_planner = Planner(dataclasses.replace(pcfg, gumbel_scale=0.0), game=game)
    clock = planner.kind is games.Kind.CLOCK
    k = cfg.k
    unroll, n_step = cfg.unroll, cfg.n_step
    mb_local = cfg.minibatch // ndev
    optimizer = optax.chain(
        optax.clip_by_global_norm(cfg.max_grad_norm), optax.adam(cfg.learning_rate)
    )
    mesh = Mesh(np.array(jax.devices()[:ndev]), (AXIS,))
    shard = P(AXIS)

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
            reward = out.reward if clock else out.discounted_reward
            discount = step_discounts(
                out.discount, out.terminated, out.truncated, kind=planner.kind
            )
            step = Trajectory(
                sample=sample, reward=reward, discount=discount, search_value=out.search_value
            )
            actors, stats = ac.advance(actors, out, reset(keys[:, 2]), keys[:, 0])
            stats["option_reward"] = out.reward.mean()
            return actors, (step, stats)

        actors, (traj, stats) = jax.lax.scan(decide, actors, None, length=unroll)
        return actors, traj, stats

    # ---- learner ----
    loss_fn = functools.partial(planner_loss, planner.net, value_weight=cfg.value_weight, l2=cfg.l2)

    def learn(params, opt_state, replay: Replay, key):
        def one(carry, key):
            params, opt_state = carry
            idx = jax.random.randint(key, (mb_local,), 0, jnp.maximum(replay.size, 1))
            batch = jax.tree.map(lambda x: x[idx], replay.data)
            if cfg.symmetries:
                batch = rb.augment(planner.game, batch, jax.random.fold_in(key, 1))
            (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, batch)
            grads = jax.lax.pmean(grads, AXIS)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
            stats = dict(loss=loss, grad_norm=optax.tree.norm(grads), **aux)
            return (params, opt_state), jax.lax.pmean(stats, AXIS)

        # No lax.cond around the update: XLA:CPU runs conv gradients ~15x slower inside any
        # control flow (cond, while, scan), so the steps are unrolled and an empty buffer is
        # handled by discarding the update.
        keys = jax.random.split(key, cfg.learner_steps)
        (new_params, new_opt), stats = jax.lax.scan(one, (params, opt_state), keys, unroll=True)
        ready = replay.size > 0
        params, opt_state = games.tree_where(ready, (new_params, new_opt), (params, opt_state))
        stats = jax.tree.map(lambda x: jnp.where(ready, x.mean(), jnp.nan), stats)
        return params, opt_state, stats

    # ---- one iteration (per device) ----
    def iteration(params, opt_state, actors, pending, pending_valid, replay, key):
        key, learn_key = jax.random.split(key)
        learn_key = jax.random.fold_in(learn_key, jax.lax.axis_index(AXIS))
        actors, traj, stats = collect(params, actors)

        both = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), pending, traj)
        targets = nstep_targets(both.reward, both.discount, both.search_value, n_step)
        samples = pending.sample.replace(value_target=targets[:unroll])
        flat = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), samples)
        replay = rb.add(replay, flat, pending_valid)
        params, opt_state, lstats = learn(params, opt_state, replay, learn_key)
        total = jax.lax.psum(
            {n: stats[n].sum() for n in ("frames", "episodes", "return_sum", "frames_sum")}, AXIS
        )
        episodes = total["episodes"]
        metrics = dict(
            lstats,
            frames=total["frames"],
            episodes=episodes,
            episode_return=total["return_sum"] / jnp.maximum(episodes, 1),
            episode_frames=total["frames_sum"] / jnp.maximum(episodes, 1),
            option_reward=jax.lax.pmean(stats["option_reward"].mean(), AXIS),
            replay_size=jax.lax.psum(replay.size, AXIS),
        )
        return params, opt_state, actors, traj, jnp.bool_(True), replay, key, metrics

    replay_spec = Replay(data=shard, ptr=P(), size=P())
    traj_spec = P(None, AXIS)
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
        return ac.start(reset(init_keys[:, 0]), init_keys[:, 1])

    shapes = rb.sample_shapes(planner, k)

    def empty_replay():
        return rb.empty(shapes, cfg.replay_capacity)

    def empty_pending():
        lead = (unroll, cfg.batch)
        zero = jnp.zeros(lead, jnp.float32)
        return Trajectory(
            sample=rb.zeros(shapes, lead), reward=zero, discount=zero, search_value=zero
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

    return Fns(
        planner=planner,
        eval_planner=eval_planner,
        optimizer=optimizer,
        mesh=mesh,
        iteration=iteration_fn,
        init_params=jax.jit(init_params),
        init_actors=init_actors_fn,
        empty_replay=empty_replay_fn,
        empty_pending=empty_pending_fn,
    )


def device_count(cfg: TrainConfig) -> int:
    """`cfg.devices`, checked against the visible devices and the batch sizes; else the most
    visible devices that divide every batch size."""
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
