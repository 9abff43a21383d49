"""The gate's trainer: rollouts of a frozen planner's options on the host, grouped by budget
(`gate.committed.rollout.GateRollout`), then SMDP-GAE and PPO data parallel over a device mesh.

The mesh, the `shard_map`ped update and the checkpoint state live here; the rollout's
meta-steps on each device's games live in `gate/committed/rollout.py`, which this class builds and
hands its devices' shards; the frozen planner, Adam, metadata and the learner checkpoint are
every gate trainer's (`gate.trainer.GateTrainer`)."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax.sharding import Mesh, NamedSharding, SingleDeviceSharding
from jax.sharding import PartitionSpec as P

from rtplan import games
from rtplan.gate.committed.choosers import gate_chooser, play, seeds_of
from rtplan.gate.committed.config import GateTrainConfig
from rtplan.gate.committed.latency import decision_misses, simulated_deployment
from rtplan.gate.committed.policy import Gate, GateMemory, load_gate
from rtplan.gate.committed.ppo import make_update
from rtplan.gate.committed.rollout import GateRollout, shard_key
from rtplan.gate.files import check_rules, file_sha256
from rtplan.gate.gae import smdp_gae
from rtplan.gate.ppo import Batch
from rtplan.gate.trainer import GateTrainer, prior_init
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.run import Run, data_parallel_processes
from rtplan.planner.actors import Actors
from rtplan.planner.batching import OptionRunner
from rtplan.planner.configs import with_budgets, with_rules
from rtplan.planner.options import Planner

__all__ = ["AXIS", "GatePPO", "GateState", "gate_trainer"]

#: The mesh axis of the data-parallel devices (the games and their samples are split along it).
AXIS = "d"


@struct.dataclass
class GateState:
    """Everything that changes during a run."""

    params: Any  # gate variables, replicated over the mesh
    opt_state: Any  # Adam state, replicated over the mesh
    actors: tuple[Actors, ...]  # [B / D] running games of each of this process's devices
    key: jax.Array  # [2] learner PRNG key (k sampling, minibatch order), on the host
    #: [B / D] the gate's memory of each running game, per device (`GateConfig.memory`).
    memories: tuple[GateMemory, ...] | None = None


@functools.lru_cache(maxsize=4)
def _planner(pcfg) -> Planner:
    return Planner(pcfg)


@functools.lru_cache(maxsize=4)
def _runner(pcfg, max_batch: int, devices: int) -> OptionRunner:
    # Shared by the runs of a process (a resumed run, tests): its compiled options are kept.
    return OptionRunner(_planner(pcfg), max_batch=max_batch, devices=devices)


class GatePPO(GateTrainer):
    """PPO of the gate over a frozen planner's budgeted options, driven by `harness.run.Run`
    (the frozen planner, Adam, metadata and checkpoint: `gate.trainer.GateTrainer`).

    One iteration:

    1. Rollout (`gate.committed.rollout.GateRollout`), `meta_steps` host steps on `num_envs`
    auto-reset
       games: the gate samples k, the `OptionRunner` runs only the chosen options (grouped by
       k), and the gate's value at the option's end bootstraps a truncation.
    2. SMDP-GAE (`gate.gae.smdp_gae`) with discount gamma^{frames}, then `epochs` x
       `minibatches` Adam steps of the clipped PPO loss.

    With a latency source (`cfg.latency`) the rollouts simulate a deployment at
    `cfg.latency_fps`: each option misses with its budget's probability (`gate.committed.latency`),
    drawn from the meta-step's sampling key, and a missed option's landing frame plays the
    fallback. The in-training evaluation plays the same misses on the tuning seeds.

    Values inside PPO are in units of `value_scale` (the planner's value support edge), so the
    option rewards of Pac-Man and Tetris (tens to hundreds) do not swamp the loss. The
    planner's search runs deterministically (its config's gumbel_scale, 0 when shipped): the
    gate learns the planner as it is deployed. The checkpoint holds the gate params, Adam state
    and the learner key; games in flight are not saved (a resumed run starts new ones).

    Data parallel over `devices` D devices (a 1-D mesh, axis `AXIS`; on CPU one per core):
    device i plays games [i B/D, (i+1) B/D) of the `num_envs` B (its own `OptionRunner` calls
    on that device, its k sampled with the meta-step's key folded with i), computes GAE on its
    own steps, shuffles and splits its own samples into `minibatches` (so a minibatch is the D
    devices' slices, and advantages are normalised per slice), and every Adam step applies the
    gradient averaged over the devices (`pmean` in `gate.committed.ppo.make_update`), so the params
    stay replicated. One device is the plain algorithm, with the keys it always had.

    Several processes (`jax.distributed`, e.g. one per GPU host): the mesh spans every
    process's devices and each process plays the games of its own; the logged metrics are
    summed over all of them inside the update. So an iteration equals the one of a single
    process with as many devices, bitwise on XLA:CPU (tested). There is no evaluation during
    training (evaluate the exported params). Params, Adam state and the learner key are the
    same on every process, so process 0's checkpoint (every process reads it: a shared folder)
    resumes the job, with any process and device count that divides `num_envs`.
    """

    progress = {"loss": "loss", "k": "mean_k", "ret": "episode_return", "eval": "eval_mean"}

    def __init__(self, cfg: GateTrainConfig) -> None:
        super().__init__(cfg.game_id, cfg.planner, lr=cfg.lr, max_grad_norm=cfg.max_grad_norm)
        self.cfg = cfg
        # The rules the gate learns under (ValueError: a plan without a tree) and the budgets it
        # chooses among (ValueError: not the checkpoint's and larger ones); its file records both
        # (`Gate.metadata`'s budgets and planner_config): evaluation plays it under those rules
        # only, and over those budgets.
        self.planner_config = with_rules(
            self.planner_config, committed=cfg.committed, tree_k=cfg.tree_k, plan_needs_tree=True
        )
        if cfg.budgets is not None:
            self.planner_config = with_budgets(self.planner_config, cfg.budgets)
        pcfg = self.planner_config
        self.devices = cfg.devices
        self.processes = data_parallel_processes(self.devices, eval_every=cfg.eval_every)
        if self.devices > jax.device_count():
            raise ValueError(
                f"devices={self.devices} but JAX sees {jax.device_count()} device(s); on CPU set "
                f"XLA_FLAGS=--xla_force_host_platform_device_count={self.devices} before jax is "
                "imported (the CLI's --devices does this)"
            )
        self.mesh = Mesh(np.array(jax.devices()[: self.devices]), (AXIS,))
        # This process's shards: (index on the mesh, device), in mesh order.
        self._shards = [
            (i, d)
            for i, d in enumerate(self.mesh.devices.flat)
            if d.process_index == jax.process_index()
        ]
        self.planner = _planner(pcfg)
        if self.planner.kind is games.Kind.CLOCK:
            raise ValueError(f"{cfg.game_id} is a clock game; its gate is recurrent (not here)")
        self.game = self.planner.game
        self.budgets = tuple(pcfg.budgets)
        self.gamma = cfg.gamma if cfg.gamma is not None else pcfg.gamma
        self.gate = Gate(self.planner, cfg.gate_config)
        # One device per runner call: a shard's options run on the device its games are on.
        max_batch = max(cfg.device_envs, cfg.eval_episodes)
        if self.gate.future is None:
            self.runner = _runner(pcfg, max_batch, 1)
        else:  # the options' trees expect the gate's own budgets
            self.runner = self.gate.runner(max_batch, 1)
        self.value_scale = self.gate.value_scale
        self.net = self.gate.net
        self._init_sha256 = None
        if cfg.init_gate is not None and Path(cfg.init_gate).exists():
            self._init_sha256 = file_sha256(cfg.init_gate)
        self.latency = None  # the provenance of a simulated deployment
        self._miss_probs = None  # [K] each budget's miss probability
        if cfg.latency:
            model, self.latency = simulated_deployment(
                cfg.latency,
                pcfg,
                cfg.latency_fps,
                overhead_ms=cfg.latency_overhead_ms,
                fallback=cfg.latency_fallback,
                game_id=cfg.game_id,
            )
            self._miss_probs = jnp.asarray(model.miss_probabilities(self.budgets, cfg.latency_fps))
        self.columns = (
            "loss",
            "policy_loss",
            "value_loss",
            "entropy",
            "approx_kl",
            "clip_frac",
            "grad_norm",
            "mean_k",
            *(f"k{b}" for b in self.budgets),
            "episodes",
            "episode_return",
            "episode_frames",
            *(("miss_rate",) if cfg.latency else ()),
            "eval_mean",
            "eval_se",
            "eval_mean_k",
            *(("eval_miss_rate",) if cfg.latency else ()),
        )
        self._budget_arr = np.asarray(self.budgets)
        self.rollouts = GateRollout(
            cfg,
            self.gate,
            self.runner,
            self._shards,
            [jax.device_put(self.planner_params, d) for _, d in self._shards],
            devices=self.devices,
            miss_probs=self._miss_probs,
        )
        self._learn = jax.jit(
            jax.shard_map(
                self._learn_fn,
                mesh=self.mesh,
                in_specs=(P(), P(), P(None, AXIS), P(None, AXIS), P()),
                out_specs=(P(), P(), P()),
            )
        )

    # ---- the update (jitted in __init__) ----

    def _learn_fn(self, params, opt_state, steps: dict, stats: dict, key):
        """One device's share of the update (under `shard_map`): GAE and PPO on its own
        `[T, B / D]` steps with gradients averaged over `AXIS`; returns (params, Adam state,
        the update's stats and the rollout's `_TOTALS` and budget counts over all devices)."""
        cfg = self.cfg
        key = shard_key(key, jax.lax.axis_index(AXIS), self.devices)
        adv, target = smdp_gae(
            steps["reward"],
            steps["value"],
            steps["next_value"],
            steps["frames"],
            steps["terminated"],
            steps["truncated"],
            gamma=self.gamma,
            lam=cfg.lam,
        )

        def flat(tree):
            return jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), tree)

        batch = Batch(
            inputs=flat(steps["inputs"]),
            action=flat(steps["action"]),
            log_prob=flat(steps["log_prob"]),
            advantage=flat(adv),
            target=flat(target),
        )
        update = make_update(
            self.net,
            self.optimizer,
            epochs=cfg.epochs,
            minibatches=cfg.minibatches,
            clip=cfg.clip,
            vf_coef=cfg.vf_coef,
            ent_coef=cfg.entropy_coef,
            axis_name=AXIS,
        )
        params, opt_state, lstats = update(params, opt_state, batch, key)
        totals = {name: x.sum() for name, x in stats.items()}
        totals.update({f"count{i}": (steps["action"] == i).sum() for i in range(len(self.budgets))})
        return params, opt_state, dict(lstats, **jax.lax.psum(totals, AXIS))

    def rollout(
        self,
        params,
        actors: tuple[Actors, ...],
        key: jax.Array,
        memories: tuple[GateMemory, ...] | None = None,
    ):
        """`GateRollout.__call__` with `params` replicated over the mesh (`GateState.params`)."""
        local = [_on(params, d) for _, d in self._shards]
        return self.rollouts(local, actors, key, memories)

    def _global(self, shards: list):
        """One `[T, B]` array per leaf, sharded over the mesh, of the local devices' `[T, B / D]`
        leaves (`rollout`'s steps and stats); the other processes hold the other devices'."""
        sharding = NamedSharding(self.mesh, P(None, AXIS))

        def glue(*xs):
            shape = (xs[0].shape[0], xs[0].shape[1] * self.devices, *xs[0].shape[2:])
            return jax.make_array_from_single_device_arrays(shape, sharding, list(xs))

        return jax.tree.map(glue, *shards)

    def _put(self, tree):
        """`tree` (host values, the same on every process) replicated over the mesh."""
        return jax.device_put(jax.device_get(tree), NamedSharding(self.mesh, P()))

    # ---- harness.Algorithm ----

    def metadata(self) -> dict[str, Any]:
        return {
            **super().metadata(),
            "gamma": self.gamma,
            "devices": self.devices,
            "processes": self.processes,
            **({} if self.latency is None else {"latency": self.latency}),
            **({} if self.cfg.init_gate is None else {"init_gate_sha256": self._init_sha256}),
        }

    def init_params(self, key: jax.Array, *, start: bool = True):
        """A new run's params: `init_gate`'s, or the network's init started at `init_k`
        (`prior_init`); `start` False: a template's (without reading `init_gate`)."""
        params = self.gate.init_params(key)
        if self.cfg.init_gate is not None and start:
            params = self._init_gate_params()
        elif self.cfg.init_k is not None:
            params = prior_init(params, self.budgets, self.cfg.init_k, self.cfg.init_prob)
        return params

    def _init_gate_params(self):
        """The params of `cfg.init_gate`, checked to be a gate of this run's network over this
        planner (its game, budgets, shape and weights)."""
        path = ckpt.gate_file(self.cfg.game_id, self.cfg.init_gate, flag="--init-gate")
        gate, params, _ = load_gate(path, self.planner, planner_file=self.planner_file)
        if gate.config != self.gate.config:
            theirs, ours = dataclasses.asdict(gate.config), dataclasses.asdict(self.gate.config)
            diff = ", ".join(
                f"{f} {theirs[f]!r} there, {ours[f]!r} here" for f in theirs if theirs[f] != ours[f]
            )
            raise ckpt.CheckpointError(
                f"{path} is another gate network than this run trains ({diff}): set the gate "
                "flags to match it"
            )
        return params

    def template(self, meta: dict) -> dict:
        """`GateTrainer.template`, after checking that the checkpoint was trained under this
        run's rules (`gate.files.check_rules`: a resume cannot switch them)."""
        check_rules(meta, self.planner_config, "the checkpoint")
        return super().template(meta)

    def init(self) -> GateState:
        key, init_key = jax.random.split(jax.random.PRNGKey(self.cfg.seed))
        params, opt_state = self.fresh(init_key)
        return self._state(params, opt_state, key)

    def _state(self, params, opt_state, key) -> GateState:
        key, actor_key = jax.random.split(key)
        # Every process draws all the games (the same ones), then keeps its devices' shares.
        games = self.rollouts.init_actors(actor_key, self.cfg.num_envs)
        n = self.cfg.device_envs
        actors = tuple(
            jax.device_put(jax.tree.map(lambda x, i=i: x[i * n : (i + 1) * n], games), d)
            for i, d in self._shards
        )
        memories = None
        if self.gate.config.memory:  # every run (and every resume) starts fresh episodes
            memories = tuple(jax.device_put(GateMemory.empty(n), d) for _, d in self._shards)
        return GateState(
            params=self._put(params),
            opt_state=self._put(opt_state),
            actors=actors,
            key=key,
            memories=memories,
        )

    def learn(self, params, opt_state, steps: list, stats: list, key: jax.Array):
        """The PPO update of a rollout over every device: (params, Adam state, host stats).

        Args:
            params: the gate variables, replicated over the mesh (`GateState.params`).
            opt_state: the Adam state, replicated likewise.
            steps: `rollout`'s steps, one `[T, B / D]` tree per local device.
            stats: `rollout`'s stats, likewise.
            key: the update's key (the same on every process).

        Returns:
            The new params and Adam state (replicated), and the update's mean stats with the
            rollout's totals over all devices (`frames`, `episodes`, `return_sum`,
            `frames_sum`, `count<i>` samples of budget index i, and `missed` when simulated).
        """
        params, opt_state, out = self._learn(
            params, opt_state, self._global(steps), self._global(stats), self._put(key)
        )
        return params, opt_state, jax.device_get(out)  # replicated: each process has them all

    def step(self, state: GateState) -> tuple[GateState, dict]:
        key, roll_key, learn_key = jax.random.split(state.key, 3)
        actors, steps, stats, memories = self.rollout(
            state.params, state.actors, roll_key, state.memories
        )
        params, opt_state, out = self.learn(state.params, state.opt_state, steps, stats, learn_key)
        samples = self.cfg.num_envs * self.cfg.meta_steps
        counts = np.array([int(out.pop(f"count{i}")) for i in range(len(self.budgets))])
        totals = {n: out.pop(n) for n in ("episodes", "frames", "return_sum", "frames_sum")}
        metrics = {k: float(v) for k, v in out.items() if k != "missed"}
        metrics["mean_k"] = float(counts @ self._budget_arr) / samples
        metrics.update({f"k{b}": float(c) / samples for b, c in zip(self.budgets, counts)})
        episodes = int(totals["episodes"])
        metrics["episodes"] = episodes
        metrics["frames"] = int(totals["frames"])
        if "missed" in out:
            metrics["miss_rate"] = float(out["missed"]) / samples
        if episodes:
            metrics["episode_return"] = float(totals["return_sum"]) / episodes
            metrics["episode_frames"] = float(totals["frames_sum"]) / episodes
        else:
            metrics["episode_return"] = metrics["episode_frames"] = None
        new = GateState(
            params=params, opt_state=opt_state, actors=actors, key=key, memories=memories
        )
        return new, metrics

    def evaluate(self, state: GateState, iteration: int) -> tuple[float, dict]:
        """Greedy gate on `eval_episodes` tuning seeds (the same every time); returns
        (eval_mean, the eval columns)."""
        del iteration
        seeds = seeds_of("tuning", self.cfg.eval_episodes)
        params = self.params(state)  # on the host: the runner's calls take it to their device
        # The planner's variables as the rollout passes them (on the first device): the
        # runner's options compiled for the rollout serve the evaluation too.
        planner_params = self.rollouts.planner_params[0]
        choose = gate_chooser(self.gate, params, planner_params)
        latency = {}
        if self._miss_probs is not None:
            probs = dict(zip(self.budgets, np.asarray(self._miss_probs).tolist()))
            latency = dict(misses=decision_misses(seeds, probs), fallback=self.cfg.latency_fallback)
        ep = play(
            self.runner,
            planner_params,
            seeds,
            choose,
            max_decisions=self.cfg.eval_max_meta_steps,
            future_params=self.gate.future_params(params),
            **latency,
        )
        mean_k = float(np.mean([k.mean() for k in ep.ks if len(k)]))
        columns = dict(eval_mean=ep.mean, eval_se=ep.se, eval_mean_k=mean_k)
        if latency:
            columns["eval_miss_rate"] = float(np.concatenate(ep.missed).mean())
        return ep.mean, columns

    def restore(self, tree: dict, meta: dict) -> GateState:
        del meta
        return self._state(tree["params"], tree["opt_state"], jnp.asarray(tree["key"]))


def _on(tree, device):
    """Device `device`'s copy of a `tree` replicated over a mesh, as single-device arrays (a
    shard of an update's output keeps the mesh's sharding, and the rollout's jitted calls,
    the runner's options among them, would compile once more for it)."""
    single = SingleDeviceSharding(device)
    return jax.tree.map(
        lambda x: jax.device_put(
            next(s.data for s in x.addressable_shards if s.device == device), single
        ),
        tree,
    )


def gate_trainer(cfg: GateTrainConfig, out_dir: str | Path, **kwargs: Any) -> Run[GateState]:
    """A `harness.run.Run` of gate PPO into `out_dir` (kwargs: `Run`'s resume, argv, progress,
    tensorboard). `run()` trains; `state` holds the `GateState`."""
    return Run(GatePPO(cfg), cfg, out_dir, **kwargs)
