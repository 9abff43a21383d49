"""`GateTrainer`, what every gate trainer shares (the frozen planner, Adam, the gate's
metadata, the learner checkpoint), and `prior_init`, the policy's start at one budget."""

from __future__ import annotations

import functools
from typing import Any

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax

from rtplan.gate.files import check_same_gate, file_sha256, save_gate
from rtplan.harness import checkpoint as ckpt
from rtplan.planner.episodes import TUNING_SEED_BASE
from rtplan.planner.store import load_planner

__all__ = ["GateTrainer", "adam", "prior_init"]


def adam(lr: float, max_grad_norm: float | None = None) -> optax.GradientTransformation:
    """Adam at a constant `lr`, after a global gradient-norm clip at `max_grad_norm` (None: no
    clip, and the Adam state alone: `train-gate-cf`'s learner files hold that)."""
    if max_grad_norm is None:
        return optax.adam(lr)
    return optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adam(lr))


class GateTrainer:
    """The base of every gate trainer: `gate.committed.train.GatePPO` and
    `gate.clock.train.ClockGatePPO` (the `harness.run.Run` algorithms behind `rtplan
    train-gate`) and `gate.counterfactual.ppo.CounterfactualPPO` (`rtplan train-gate-cf`).

    It loads the frozen planner the gate trains over (`planner_config`, `planner_params`; the
    file, its sha256 and commit go into the gate's metadata), builds the optimiser and owns the
    learner checkpoint: a fresh gate's (params, Adam state), its save, and its template, which
    refuses a checkpoint of another gate network or budgets. A subclass sets `gate` (its `Gate`
    or `ClockGate`, whose `metadata()` records its network) and `budgets`, and overrides
    `init_params` where a run starts elsewhere than the network's init.
    """

    #: Metadata "kind" of the exported gate file.
    kind = "gate"
    #: File name of the exported gate in the run folder.
    export_file = ckpt.GATE_FILE
    #: The gate's name in messages and progress bars.
    what = "gate"
    #: Where the gate's `metadata()` records its network config.
    config_key = "gate_config"

    gate: Any
    budgets: tuple[int, ...]

    def __init__(
        self, game_id: str, planner: str | None, *, lr: float, max_grad_norm: float | None
    ) -> None:
        """Loads the planner `planner` of `game_id` (None: the shipped one,
        `harness.checkpoint.planner_file`) and builds `adam(lr, max_grad_norm)`."""
        self.game_id = game_id
        self.name = f"{self.what} {game_id}"
        self.planner_file = str(ckpt.planner_file(game_id, planner))
        self.planner_config, self.planner_params, pmeta = load_planner(game_id, self.planner_file)
        self.planner_sha256 = file_sha256(self.planner_file)
        self.planner_commit = pmeta.get("git_commit")
        self.optimizer = adam(lr, max_grad_norm)

    def metadata(self) -> dict[str, Any]:
        """The gate's network and the planner it was trained over (file, sha256, commit)."""
        return {
            **self.gate.metadata(),
            "planner_checkpoint": ckpt.recorded_path(self.planner_file),
            "planner_sha256": self.planner_sha256,
            "planner_git_commit": self.planner_commit,
            "tuning_seed_base": TUNING_SEED_BASE,
        }

    # ---- the learner: params and Adam state ----

    def init_params(self, key: jax.Array, *, start: bool = True):
        """A new run's gate params: the network's init. `start` False: a template's (shapes
        only; nothing is read from disk)."""
        del start
        return self.gate.init_params(key)

    def fresh(self, key: jax.Array, *, start: bool = True):
        """(params, Adam state) of a new run (`init_params`)."""
        params = self.init_params(key, start=start)
        return params, self.optimizer.init(params)

    def params(self, state):
        """The gate params of a training state, on the host."""
        return jax.device_get(state.params)

    def save(self, state) -> tuple[dict, dict]:
        """The learner checkpoint's tree: params, Adam state, the learner key and
        `saved_extra`."""
        tree = ckpt.learner_tree(
            state.params, state.opt_state, state.key, **self.saved_extra(state)
        )
        return tree, {}

    def saved_extra(self, state) -> dict[str, Any]:
        """What a kind saves beside the learner (none by default)."""
        del state
        return {}

    def learner_template(self, **extra: Any) -> dict:
        """Zeros shaped like `save`'s tree (`extra`: its other entries' shapes)."""
        return ckpt.learner_template(functools.partial(self.fresh, start=False), **extra)

    def template(self, meta: dict) -> dict:
        """The template of a checkpoint whose metadata is `meta`, after checking it holds this
        run's gate network over its budgets (`gate.files.check_same_gate`)."""
        check_same_gate(meta, self.gate.config, self.budgets, key=self.config_key, what=self.what)
        return self.learner_template(**self.template_extra(meta))

    def template_extra(self, meta: dict) -> dict[str, Any]:
        """The shapes of `saved_extra`'s entries in a checkpoint with metadata `meta`."""
        del meta
        return {}

    def save_gate(self, path, params, **extra: Any) -> None:
        """Writes the gate file `path` of `params`: `metadata()` and `extra`."""
        save_gate(path, params, {"kind": self.kind, **self.metadata(), **extra})


def prior_init(params, budgets: tuple[int, ...], k: int, prob: float, kernel_scale: float = 0.01):
    """Gate variables whose policy starts at budget `k` with probability `prob` in every state.

    The policy head's output layer (the one Dense with a bias over the budgets) gets the log of
    the prior as its bias and its kernel scaled by `kernel_scale`, so the logits start near the
    prior everywhere and the state dependence is learned from there. Why: switching k between
    decisions is costly (the tree models "always k"; bench/k_switching.py), so a near-uniform
    start samples the costly mixed-k regime and PPO measures options against it; a start at
    the best fixed k explores around the policy to beat. The log is taken in float64 and
    rounded once to the bias's dtype.
    """
    if k not in budgets:
        raise ValueError(f"init_k={k} is not one of the budgets {budgets}")
    n = len(budgets)
    prior = np.full(n, (1.0 - prob) / (n - 1))
    prior[budgets.index(k)] = prob
    flat = flax.traverse_util.flatten_dict(flax.core.unfreeze(params))
    heads = [p[:-1] for p, v in flat.items() if p[-1] == "bias" and v.shape == (n,)]
    if len(heads) != 1:
        raise ValueError(f"expected one layer with a bias over {n} budgets, found {heads}")
    (head,) = heads
    flat[(*head, "bias")] = jnp.asarray(np.log(prior), flat[(*head, "bias")].dtype)
    flat[(*head, "kernel")] = flat[(*head, "kernel")] * kernel_scale
    return flax.traverse_util.unflatten_dict(flat)
