"""Expert iteration (committed-action games) and self-play (clock games) for the planner network."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from rtplan import games
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.run import BEST, CHECKPOINT, LOG, Run, data_parallel_processes
from rtplan.harness.stats import standard_error
from rtplan.planner import replay as rb
from rtplan.planner.configs import config_from_dict, config_to_dict
from rtplan.planner.episodes import always, eval_runner, play, seeds_of
from rtplan.planner.iteration import AXIS, Actors, Trajectory, build, device_count
from rtplan.planner.matches import EVAL_OPENING_PLIES, RANDOM, REFLEX, option_player, play_match
from rtplan.planner.replay import Replay
from rtplan.planner.train_config import TrainConfig

__all__ = ["BEST", "CHECKPOINT", "LOG", "ExpertIteration", "TrainState", "trainer"]

#: The replay buffer is saved in the checkpoint when smaller than this; otherwise it is
#: refilled after a resume.
REPLAY_SAVE_LIMIT = 50 * 2**20
#: Log columns after the harness's (`harness.run.HEAD`): the iteration's metrics, then the
#: evaluation's.
COLUMNS = (
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


@struct.dataclass
class TrainState:
    """Everything that changes during a run, on the devices (the arguments of the iteration)."""

    params: Any  # network variables, replicated
    opt_state: Any  # Adam state, replicated
    actors: Actors  # [B] running games, sharded
    pending: Trajectory  # [U, B] last iteration's decisions, waiting for their targets
    pending_valid: jax.Array  # [] bool False before the first iteration
    replay: Replay  # [C] samples, sharded
    key: jax.Array  # [2] PRNG key of the learner, replicated


class ExpertIteration:
    """The planner's training algorithm, driven by `harness.run.Run` (see `harness`).

    One iteration (`planner.iteration`), in purejaxrl style:

    1. Collect: `unroll` decisions on `batch` auto-reset games. Each decision is one budgeted
       option `planner.option(params, keys, states, k)` with Gumbel noise (`gumbel_scale` 1.0),
       so the search samples its action. A finished game is reset at once from a fresh key
       split from that game's carried key.
    2. Targets: bootstrapped n-step returns over option steps (`planner.targets`).
       Trajectories roll across iterations: the decisions of iteration i are emitted to the
       replay buffer during iteration i+1, when their n-step windows (n <= unroll) are
       complete, so every sample gets a target bootstrapped from the MCTS root value of a later
       decision. Discounts are per step: committed games gamma^k, and 0 when the option
       terminated *or* truncated (the networks see the time input t/T, so the horizon is a true
       end of the time-augmented task whose value there is 0); clock games -1 per ply (the
       mover's view alternates) and 0 at the end. A done step has discount 0, so an auto-reset
       cuts the return.
    3. Replay: a circular buffer of samples per device (uniform sampling); `learner_steps` Adam
       steps on minibatches from it (`planner.losses`), with global-norm clipping.

    Policy samples belong to the *landing* state of the option's root: for k > 1 the search's
    prior and mask are those of the state after the k-1 reflex frames. Value samples are the
    decision state s_t. Clock games are trained and evaluated with clocks that never run out
    (the base network sees the board only).

    The checkpoint holds params, optimizer state, key, and the replay buffer when under
    `REPLAY_SAVE_LIMIT`. The games in flight and the last iteration's decisions awaiting targets
    are not saved (new games start), and a replay buffer too large to save (or saved with
    another device count) refills.

    Several processes (`jax.distributed`, e.g. one per GPU host): the mesh spans every process's
    devices, each process runs the games and replay shards of its own devices, and the gradients
    are averaged across all of them by the same `pmean`; so an iteration equals the one of a
    single process with as many devices. The replay buffer is then not saved (it lives on all
    processes), and there is no evaluation during training (evaluate the exported params).
    """

    kind = "planner"
    export_file = ckpt.PLANNER_FILE
    columns = COLUMNS
    progress = {"loss": "loss", "ret": "episode_return", "eval": "eval_mean"}

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.name = cfg.game_id
        self.ndev = device_count(cfg)
        self.processes = data_parallel_processes(self.ndev, eval_every=cfg.eval_every)
        if cfg.batch // self.ndev * cfg.unroll > cfg.replay_capacity // self.ndev:
            raise ValueError(
                f"replay_capacity={cfg.replay_capacity} is smaller than one iteration's "
                f"{cfg.batch * cfg.unroll} samples"
            )
        self.fns = build(cfg, self.ndev)
        self.planner = self.fns.planner
        self.planner_config = cfg.planner_config
        self._replicated = NamedSharding(self.fns.mesh, P())
        # Several processes: each holds only its devices' shards of the buffer.
        self.save_replay = (
            self.processes == 1
            and rb.nbytes(self.planner, cfg.k, cfg.replay_capacity) < REPLAY_SAVE_LIMIT
        )
        self._eval_runner = None  # built at the first evaluation

    def metadata(self) -> dict[str, Any]:
        return {
            "game": self.cfg.game_id,
            "planner_config": config_to_dict(self.planner_config),
            "devices": self.ndev,
            "processes": self.processes,
        }

    # ---- state ----

    def init(self) -> TrainState:
        key, init_key = jax.random.split(jax.random.PRNGKey(self.cfg.seed))
        params, opt_state = jax.device_get(self.fns.init_params(init_key))
        if self.cfg.init_from is not None:
            # Checked against this run's network: a different shape is a CheckpointError.
            params = ckpt.load(self.cfg.init_from, {"params": params})[0]["params"]
        return self._state(params, opt_state, key, None)

    def _state(self, params, opt_state, key, replay: Replay | None) -> TrainState:
        key, actor_key = jax.random.split(key)
        put = self._put
        return TrainState(
            params=put(params),
            opt_state=put(opt_state),
            actors=self.fns.init_actors(actor_key),
            pending=self.fns.empty_pending(),
            pending_valid=put(jnp.bool_(False)),
            replay=self.fns.empty_replay() if replay is None else replay,
            key=put(key),
        )

    def _put(self, tree):
        return jax.device_put(tree, self._replicated)

    def params(self, state: TrainState):
        return jax.device_get(state.params)

    def save(self, state: TrainState) -> tuple[dict, dict]:
        extra = {"replay": state.replay} if self.save_replay else {}
        tree = ckpt.learner_tree(state.params, state.opt_state, state.key, **extra)
        return tree, {"replay_saved": self.save_replay}

    def template(self, meta: dict) -> dict:
        saved = config_from_dict(meta["planner_config"])
        mine = self.planner_config
        if saved.network != mine.network or saved.game_id != mine.game_id:
            raise ckpt.CheckpointError(
                f"the checkpoint holds a {saved.game_id} network {saved.network}, but this run "
                f"asks for {mine.game_id} {mine.network}"
            )
        extra = {}
        if meta.get("replay_saved", False):
            extra["replay"] = jax.eval_shape(self.fns.empty_replay)
        return ckpt.learner_template(self.fns.init_params, **extra)

    def restore(self, tree: dict, meta: dict) -> TrainState:
        saved_train = meta.get("train_config", {})
        same_replay = "replay" in tree and meta.get("devices") == self.ndev
        same_replay = same_replay and all(
            saved_train.get(f) == json.loads(json.dumps(getattr(self.cfg, f)))
            for f in ("replay_capacity", "train_k", "game_id", "game_params")
        )
        replay = None
        if same_replay:
            rep = tree["replay"]
            replay = Replay(
                data=jax.device_put(rep.data, NamedSharding(self.fns.mesh, P(AXIS))),
                ptr=self._put(jnp.int32(rep.ptr)),
                size=self._put(jnp.int32(rep.size)),
            )
        return self._state(tree["params"], tree["opt_state"], jnp.asarray(tree["key"]), replay)

    # ---- iteration and evaluation ----

    def step(self, state: TrainState) -> tuple[TrainState, dict]:
        *carry, metrics = self.fns.iteration(
            state.params,
            state.opt_state,
            state.actors,
            state.pending,
            state.pending_valid,
            state.replay,
            state.key,
        )
        metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
        if metrics["episodes"] == 0:
            metrics["episode_return"] = metrics["episode_frames"] = None
        return TrainState(*carry), metrics

    def evaluate(self, state: TrainState, iteration: int) -> tuple[float, dict]:
        """Plays the params greedily (gumbel_scale 0) on the first `eval_episodes` tuning seeds,
        the same episodes at every iteration (so `best.msgpack` is picked on one yardstick);
        returns (eval_mean, the eval columns). Clock games: half as many openings, each
        played with both colours, against the random and the reflex player."""
        cfg, planner = self.cfg, self.fns.eval_planner
        params = jax.device_get(state.params)
        if planner.kind is games.Kind.CLOCK:
            seeds = seeds_of("tuning", cfg.eval_episodes // 2)
            policy = option_player(planner, cfg.eval_budget)
            r, x = (
                play_match(
                    planner,
                    params,
                    policy,
                    opponent,
                    seeds,
                    max_plies=cfg.eval_max_decisions or 400,
                    opening_plies=EVAL_OPENING_PLIES,
                )
                for opponent in (RANDOM, REFLEX)
            )
            scores = np.concatenate([r.returns, x.returns])
            mean = float(scores.mean())
            cols = dict(
                eval_mean=mean,
                eval_se=standard_error(scores),
                eval_vs_random=r.mean,
                eval_vs_reflex=x.mean,
            )
        else:
            if self._eval_runner is None:
                # Kept: its compiled options serve every later evaluation.
                self._eval_runner = eval_runner(planner, cfg.eval_episodes, devices=self.ndev)
            res = play(
                self._eval_runner,
                params,
                seeds_of("tuning", cfg.eval_episodes),
                always(cfg.eval_budget),
                max_decisions=cfg.eval_max_decisions or planner.game.horizon or 10_000,
            )
            cols = dict(eval_mean=res.mean, eval_se=res.se)
        return cols["eval_mean"], cols


def trainer(cfg: TrainConfig, out_dir: str | Path, **kwargs: Any) -> Run[TrainState]:
    """A `harness.run.Run` of expert iteration into `out_dir` (kwargs: `Run`'s resume, argv,
    progress, tensorboard). `run()` trains; `state` holds the `TrainState`."""
    return Run(ExpertIteration(cfg), cfg, out_dir, **kwargs)
