"""The gate: a PPO-trained policy that picks the planning budget k of each budgeted option.

One subpackage per kind and per method; what both kinds share sits at this root:

- `committed/`: the committed games' gate (config, network, policy, choosers, rollouts, the
  simulated latency, trigger features, its PPO update and trainer);
- `clock/`: the clock games' recurrent gate (config, network, the gate, heuristics, players,
  its PPO update and trainer);
- `evaluation/`: `rtplan eval` and `rtplan report` for both kinds, and annotated clock games;
- `counterfactual/`: counterfactual budget values, the supervised gate fit to them, and PPO
  with the counterfactual critic;
- shared: `trainer` (`GateTrainer`, the base of every gate trainer: the frozen planner, Adam,
  metadata, the learner checkpoint; `prior_init`), `config` (`PPOConfig`, the PPO knobs both
  kinds share), `ppo` (the clipped loss and Adam epochs), `gae` (variable-duration GAE), `files`
  (the checks every gate loader makes), `compiled` (gates compiled for the services) and
  `ship` (copying a trained gate beside its planner).
"""

from __future__ import annotations

from rtplan.harness.lazy import lazy_exports

# The names load on first use (PEP 562), so `gate.committed.config` imports without JAX: the CLI
# builds its flags before `--devices` sets XLA's flags.
_EXPORTS = {
    "Batch": "gate.ppo",
    "ClockChooser": "gate.clock.heuristics",
    "ClockInputs": "gate.clock.heuristics",
    "ClockOptions": "gate.clock.heuristics",
    "clock_inputs": "gate.clock.heuristics",
    "CompiledGate": "gate.compiled",
    "GateConfig": "gate.committed.config",
    "GateInputs": "gate.committed.policy",
    "Gate": "gate.committed.policy",
    "GateDecision": "gate.committed.policy",
    "load_gate": "gate.committed.policy",
    "GateNet": "gate.committed.network",
    "GatePPO": "gate.committed.train",
    "GateState": "gate.committed.train",
    "GateTrainConfig": "gate.committed.config",
    "GateTrainer": "gate.trainer",
    "LatencyModel": "gate.committed.latency",
    "load_latency": "gate.committed.latency",
    "gate_trainer": "gate.committed.train",
    "make_update": "gate.committed.ppo",
    "ppo_loss": "gate.committed.ppo",
    "PPOConfig": "gate.config",
    "prior_init": "gate.trainer",
    "ppo_terms": "gate.ppo",
    "smdp_gae": "gate.gae",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
