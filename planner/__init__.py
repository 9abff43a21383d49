"""AlphaZero planner: network, mctx search and budgeted options o_k shared by every component."""

from __future__ import annotations

from rtplan.harness.lazy import lazy_exports

# The names load on first use (PEP 562), so `planner.train_config` imports without JAX: the CLI
# reads the training config before `--devices` sets XLA's flags.
_EXPORTS = {
    "AZNet": "rtplan.planner.network",
    "Actors": "rtplan.planner.actors",
    "CheckpointError": "rtplan.harness.checkpoint",
    "CompiledOptions": "rtplan.planner.compiled",
    "Episodes": "rtplan.planner.episodes",
    "NetOutput": "rtplan.planner.network",
    "NetworkConfig": "rtplan.planner.network",
    "OptionOutput": "rtplan.planner.options",
    "Planner": "rtplan.planner.options",
    "PlannerConfig": "rtplan.planner.options",
    "config_from_dict": "rtplan.planner.configs",
    "config_to_dict": "rtplan.planner.configs",
    "default_config": "rtplan.planner.configs",
    "landing_frame": "rtplan.planner.options",
    "play": "rtplan.planner.episodes",
    "play_match": "rtplan.planner.matches",
    "seeds_of": "rtplan.planner.episodes",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
