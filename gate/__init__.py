"""The gate: a PPO-trained policy that picks the planning budget k of each budgeted option."""

from __future__ import annotations

from harness.lazy import lazy_exports

# The names load on first use (PEP 562), so `gate.train_config` imports without JAX: the CLI
# builds its flags before `--devices` sets XLA's flags.
_EXPORTS = {
    "Batch": "gate.ppo",
    "ClockChooser": "gate.clock_heuristics",
    "ClockInputs": "gate.clock_heuristics",
    "ClockOptions": "gate.clock_heuristics",
    "clock_inputs": "gate.clock_heuristics",
    "CompiledGate": "gate.compiled",
    "GateConfig": "gate.train_config",
    "GateInputs": "gate.policy",
    "Gate": "gate.policy",
    "GateDecision": "gate.policy",
    "load_gate": "gate.policy",
    "GateNet": "gate.network",
    "GatePPO": "gate.train",
    "GateState": "gate.train",
    "GateTrainConfig": "gate.train_config",
    "LatencyModel": "gate.latency",
    "load_latency": "gate.latency",
    "gate_trainer": "gate.train",
    "make_update": "gate.ppo",
    "ppo_loss": "gate.ppo",
    "ppo_terms": "gate.ppo",
    "smdp_gae": "gate.gae",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
