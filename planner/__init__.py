"""AlphaZero planner: network, mctx search and budgeted options o_k shared by every component."""

from __future__ import annotations

import importlib

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
    "play_match": "planner.episodes",
    "seeds_of": "planner.episodes",
}

__all__ = [
    "AZNet",
    "Actors",
    "CheckpointError",
    "CompiledOptions",
    "Episodes",
    "NetOutput",
    "NetworkConfig",
    "OptionOutput",
    "Planner",
    "PlannerConfig",
    "config_from_dict",
    "config_to_dict",
    "default_config",
    "landing_frame",
    "play",
    "play_match",
    "seeds_of",
]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'planner' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
