"""AlphaZero planner: network, mctx search and budgeted options o_k shared by every component."""

from __future__ import annotations

from harness.lazy import lazy_exports

# The names load on first use (PEP 562), so `planner.train_config` imports without JAX: the CLI
# reads the training config before `--devices` sets XLA's flags.
_EXPORTS = {
    "AZNet": "planner.network",
    "Actors": "planner.actors",
    "CheckpointError": "harness.checkpoint",
    "CompiledOptions": "planner.compiled",
    "Episodes": "planner.episodes",
    "NetOutput": "planner.network",
    "NetworkConfig": "planner.network",
    "OptionOutput": "planner.options",
    "Planner": "planner.options",
    "PlannerConfig": "planner.options",
    "config_from_dict": "planner.configs",
    "config_to_dict": "planner.configs",
    "default_config": "planner.configs",
    "landing_frame": "planner.options",
    "play": "planner.episodes",
    "play_match": "planner.matches",
    "seeds_of": "planner.episodes",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
