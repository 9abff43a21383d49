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
    "Batch": "rtplan.gate.ppo",
    "ClockChooser": "rtplan.gate.clock.heuristics",
    "ClockInputs": "rtplan.gate.clock.heuristics",
    "ClockOptions": "rtplan.gate.clock.heuristics",
    "clock_inputs": "rtplan.gate.clock.heuristics",
    "CompiledGate": "rtplan.gate.compiled",
    "GateConfig": "rtplan.gate.committed.config",
    "GateInputs": "rtplan.gate.committed.policy",
    "Gate": "rtplan.gate.committed.policy",
    "GateDecision": "rtplan.gate.committed.policy",
    "load_gate": "rtplan.gate.committed.policy",
    "GateNet": "rtplan.gate.committed.network",
    "GatePPO": "rtplan.gate.committed.train",
    "GateState": "rtplan.gate.committed.train",
    "GateTrainConfig": "rtplan.gate.committed.config",
    "GateTrainer": "rtplan.gate.trainer",
    "LatencyModel": "rtplan.gate.committed.latency",
    "load_latency": "rtplan.gate.committed.latency",
    "gate_trainer": "rtplan.gate.committed.train",
    "make_update": "rtplan.gate.committed.ppo",
    "ppo_loss": "rtplan.gate.committed.ppo",
    "PPOConfig": "rtplan.gate.config",
    "prior_init": "rtplan.gate.trainer",
    "ppo_terms": "rtplan.gate.ppo",
    "smdp_gae": "rtplan.gate.gae",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
