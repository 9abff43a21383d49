"""The committed gate trained by PPO with the simulator as its critic (issue 27, part 1b).

PPO as shipped (`gate.committed.train`) learns a value baseline and estimates each decision's
advantage from the one budget it sampled, through GAE over a noisy episode. Here the critic is
measured instead: each round plays train-range games along the gate's own sampled budgets to a frame
drawn per game (on-policy states, unlike the supervised labels' states along always-K play),
branches every budget from each state reached (`gate.counterfactual.values.branch_values`: the same
option keys, `worlds` re-drawn futures, each branch continued under the best fixed budget K for
`horizon` frames) and so has `Q(s, k)` for every k. A budget's advantage is its `Q` minus the
policy's expectation of `Q` at that state: no learned value, no GAE, and every budget's
advantage at once. The update is PPO's clipped surrogate taken in expectation over the
behaviour policy (`surrogate_loss`) plus an entropy bonus.

The gate starts from `prior` of its probability on K (the rest shared): the first round's
states are then near always-K play, where K is known to be good, and the gate moves off K
only where the measured advantages say it pays.

The trainer (`CounterfactualPPO`) stands on every gate trainer's base (`gate.trainer`: the
frozen planner, Adam, the gate's metadata, `prior_init`). Resumable: after each round the
learner (params, Adam state) and the round's row are written; a rerun with `resume` continues at
the next round with the same seeds and keys, so a killed run ends where an unbroken one would.
`gate.msgpack` beside them is the argmax gate after the last round, which `rtplan eval --gate`
plays.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from rtplan.gate.committed.config import GateConfig
from rtplan.gate.committed.policy import Gate, GateInputs
from rtplan.gate.counterfactual.config import CounterfactualPPOConfig
from rtplan.gate.counterfactual.values import branch_values, decision_states
from rtplan.gate.trainer import GateTrainer, adam, prior_init
from rtplan.harness import checkpoint as ckpt
from rtplan.planner.batching import OptionRunner
from rtplan.planner.episodes import TUNING_SEED_BASE, Chooser

__all__ = [
    "CounterfactualPPO",
    "advantages",
    "sampled",
    "surrogate_loss",
    "train_counterfactual_ppo",
]


#: The settings a resume may change: how long the run goes on.
_BUDGETS = ("rounds", "minutes")


def sampled(gate: Gate, params, planner_params, key: jax.Array, decide=None) -> Chooser:
    """The gate's behaviour policy: budgets sampled from its softmax, decision t with key
    `fold_in(key, t)` (so a game's draws depend only on its round's key and its batch).
    `decide`: a jitted `gate.decide` to reuse (default: a new one)."""
    decide = decide or jax.jit(gate.decide)

    def choose(states, alive: np.ndarray, t: int) -> np.ndarray:
        return np.asarray(decide(params, planner_params, states, jax.random.fold_in(key, t)).k)

    return choose


def advantages(values: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """`[S, K]` advantage of each budget: its mean return over the worlds (`values`
    `[S, M, K]`) minus the expectation of that mean under the behaviour policy `probs`
    `[S, K]` (the state's value under the policy that reached it)."""
    q = values.mean(1)
    return q - (probs * q).sum(-1, keepdims=True)


def surrogate_loss(logits, old_probs, adv, *, clip: float, entropy: float):
    """PPO's clipped surrogate in expectation over the behaviour policy `old_probs` `[B, K]`,
    with every budget's advantage `adv` `[B, K]` known, minus `entropy` x the policy's
    entropy. At `logits` equal to the behaviour policy's its gradient is the exact policy
    gradient `sum_k grad pi_k A_k`; the clip stops a budget's probability moving past
    `1 +- clip` of its old value within a round."""
    logp = jax.nn.log_softmax(logits)
    probs = jnp.exp(logp)
    ratio = probs / old_probs
    surr = jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - clip, 1 + clip) * adv)
    policy = -(old_probs * surr).sum(-1).mean()
    return policy + entropy * (probs * logp).sum(-1).mean()


@functools.lru_cache(maxsize=4)
def _compiled(
    pcfg, gate_config: GateConfig, max_batch: int, lr: float, clip: float, entropy: float
):
    """(gate, runner, Adam without a clip, jitted update step, jitted `gate.decide`), shared by
    the runs of a process (a resumed run, tests): compiled once."""
    from rtplan.planner.options import Planner

    planner = Planner(pcfg)
    gate = Gate(planner, gate_config)
    opt = adam(lr)

    def loss_fn(params, x: GateInputs, old_probs, adv):
        logits, _ = gate.apply(params, x)
        return surrogate_loss(logits, old_probs, adv, clip=clip, entropy=entropy)

    @jax.jit
    def step(params, opt_state, x, old_probs, adv):
        loss, grad = jax.value_and_grad(loss_fn)(params, x, old_probs, adv)
        updates, opt_state = opt.update(grad, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    runner = OptionRunner(planner, max_batch=max_batch)
    return gate, runner, opt, step, jax.jit(gate.decide)


def train_counterfactual_ppo(
    game_id: str,
    out_dir: str | os.PathLike,
    cfg: CounterfactualPPOConfig,
    *,
    gate_config: GateConfig,
    planner_file: str,
    resume: bool = False,
    command: str | None = None,
    log: Callable[[str], None] = print,
) -> Path:
    """Runs `cfg.rounds` rounds into `out_dir` (`learner.msgpack`, `rounds.jsonl`,
    `gate.msgpack`); returns the gate file.

    Raises:
        FileExistsError: `out_dir` holds a run and `resume` is false.
        FileNotFoundError: `resume` without a run there.
        ValueError: a resume with other settings or another planner; a gate with memory;
            a continuation budget the planner lacks.
    """
    if gate_config.memory:
        raise ValueError("a gate with memory needs whole episodes; this trainer sees states")
    out = Path(out_dir)
    learner = out / "learner.msgpack"
    if cfg.seed + cfg.rounds * cfg.states > TUNING_SEED_BASE:
        raise ValueError(
            f"{cfg.rounds} rounds x {cfg.states} games from seed {cfg.seed} leave the train "
            f"range [0, {TUNING_SEED_BASE})"
        )
    if learner.exists() and not resume:
        raise FileExistsError(f"{out} holds a run: pass --resume to continue it")
    if resume and not learner.exists():
        raise FileNotFoundError(f"no run to resume in {out} (no learner.msgpack)")
    trainer = CounterfactualPPO(game_id, cfg, gate_config=gate_config, planner_file=planner_file)
    return trainer.train(out, resume=resume, command=command, log=log)


class CounterfactualPPO(GateTrainer):
    """PPO with the counterfactual critic over a frozen planner (`train_counterfactual_ppo`):
    the planner, Adam (no gradient clip), the gate file's metadata and the learner template are
    `GateTrainer`'s; a fresh gate starts at `prior` on the continuation budget (`prior_init`).

    Raises:
        ValueError: a continuation budget the planner lacks.
    """

    def __init__(
        self,
        game_id: str,
        cfg: CounterfactualPPOConfig,
        *,
        gate_config: GateConfig,
        planner_file: str,
    ) -> None:
        super().__init__(game_id, planner_file, lr=cfg.lr, max_grad_norm=None)
        pcfg = self.planner_config
        if cfg.continuation not in pcfg.budgets:
            raise ValueError(f"continuation k={cfg.continuation} is not one of {pcfg.budgets}")
        self.cfg = cfg
        batch = cfg.states * cfg.worlds * len(pcfg.budgets)
        # The cached Adam is the one the cached update step applies (the same as `GateTrainer`'s).
        self.gate, self.runner, self.optimizer, self._step, self._decide = _compiled(
            pcfg, gate_config, batch, cfg.lr, cfg.clip, cfg.entropy
        )
        self.budgets = self.gate.budgets

    def init_params(self, key: jax.Array, *, start: bool = True):
        """The network's init started at `prior` on the continuation budget."""
        del start
        params = self.gate.init_params(key)
        return prior_init(params, self.budgets, self.cfg.continuation, self.cfg.prior)

    def train(
        self,
        out: Path,
        *,
        resume: bool = False,
        command: str | None = None,
        log: Callable[[str], None] = print,
    ) -> Path:
        """The rounds of `train_counterfactual_ppo` (its checks of `out` done); returns the
        gate file."""
        cfg, gate, runner, pparams = self.cfg, self.gate, self.runner, self.planner_params
        learner, rows_file = out / "learner.msgpack", out / "rounds.jsonl"
        gate_file = out / ckpt.GATE_FILE
        c = self.budgets.index(cfg.continuation)
        # What a resume must share with the run (more rounds or minutes may be asked for).
        settings = {
            "game": self.game_id,
            "planner_sha256": self.planner_sha256,
            "config": {k: v for k, v in dataclasses.asdict(cfg).items() if k not in _BUDGETS},
            "gate_config": dataclasses.asdict(gate.config),
        }
        if resume:
            meta = ckpt.load_metadata(learner)
            if {k: meta.get(k) for k in settings} != settings:
                raise ValueError(
                    f"{out} was run with other settings or another planner; resume with the same"
                )
            tree, meta = ckpt.load(learner, self.learner_template())
            params, opt_state = tree["params"], tree["opt_state"]
            done, seconds = int(meta["rounds_done"]), float(meta["seconds"])
            log(f"resuming {out} after round {done} ({seconds / 60:.1f} min so far)")
        else:
            out.mkdir(parents=True, exist_ok=True)
            rows_file.write_text("")
            params, opt_state = self.fresh(jax.random.PRNGKey(cfg.seed))
            done, seconds = 0, 0.0
        for r in range(done, cfg.rounds):
            if cfg.minutes and seconds >= cfg.minutes * 60:
                log(f"stopping after round {r}: {seconds / 60:.1f} min >= --minutes {cfg.minutes}")
                break
            began = time.perf_counter()
            key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), r)
            seeds = cfg.seed + r * cfg.states + np.arange(cfg.states)
            states, keys, kept, plan = decision_states(
                runner,
                pparams,
                seeds,
                cfg.continuation,
                max_frame=cfg.max_frame,
                rng=np.random.default_rng([cfg.seed, r, 27]),
                along=sampled(gate, params, pparams, key, self._decide),
            )
            x = gate.inputs(pparams, states)
            logits, _ = gate.apply(params, x)
            old = np.asarray(jax.nn.softmax(logits), np.float64)
            bv = branch_values(
                runner,
                pparams,
                states,
                keys,
                continuation=cfg.continuation,
                horizon=cfg.horizon,
                worlds=cfg.worlds,
                world_key=jax.random.fold_in(key, 1 << 20),
                seeds=kept,
                plan=plan,
            )
            adv = advantages(bv.values, old)
            scale = float(adv.std()) + 1e-8
            n = len(kept)
            size = min(cfg.minibatch, n)
            losses = []
            for e in range(cfg.epochs):
                order = np.random.default_rng([cfg.seed, r, e, 28]).permutation(n)
                for i in range(0, n - size + 1, size):
                    idx = jnp.asarray(order[i : i + size])
                    params, opt_state, loss = self._step(
                        params,
                        opt_state,
                        jax.tree.map(lambda a, idx=idx: a[idx], x),
                        jnp.asarray(old[idx], jnp.float32),
                        jnp.asarray(adv[idx] / scale, jnp.float32),
                    )
                    losses.append(float(loss))
            logits, _ = gate.apply(params, x)
            greedy = np.asarray(jnp.argmax(logits, -1))
            seconds += time.perf_counter() - began
            row = {
                "round": r + 1,
                "states": int(n),
                "seconds": seconds,
                "behaviour_p_continuation": float(old[:, c].mean()),
                "q_minus_continuation": (bv.values.mean(1) - bv.values.mean(1)[:, [c]])
                .mean(0)
                .tolist(),
                "advantage_scale": scale,
                "loss": float(np.mean(losses)) if losses else None,
                "greedy_off_continuation": float((greedy != c).mean()),
            }
            with rows_file.open("a") as f:
                f.write(json.dumps(row) + "\n")
            meta = {
                **settings,
                "rounds": cfg.rounds,
                "minutes": cfg.minutes,
                "rounds_done": r + 1,
                "seconds": seconds,
                "command": command,
                "git_commit": ckpt.git_commit(),
            }
            # The gate first: a kill between the two files leaves a learner a rerun repeats.
            self.save_gate(
                gate_file,
                params,
                trained_by="ppo-counterfactual-critic",
                **{k: v for k, v in meta.items() if k not in ("game", "gate_config")},
            )
            ckpt.save(learner, ckpt.learner_tree(params, opt_state, key), meta)
            log(
                f"round {r + 1}/{cfg.rounds}: {n} states, behaviour p(k{cfg.continuation}) "
                f"{row['behaviour_p_continuation']:.2f}, greedy off k{cfg.continuation} "
                f"{row['greedy_off_continuation']:.2f}, {seconds / 60:.1f} min"
            )
        return gate_file
