"""AlphaZero planner: network, mctx search and budgeted options o_k shared by every component."""

from planner.checkpoint import CheckpointError
from planner.configs import config_from_dict, config_to_dict, default_config
from planner.network import AZNet, NetOutput, NetworkConfig
from planner.options import OptionOutput, Planner, PlannerConfig, landing_frame

__all__ = [
    "AZNet",
    "CheckpointError",
    "NetOutput",
    "NetworkConfig",
    "OptionOutput",
    "Planner",
    "PlannerConfig",
    "config_from_dict",
    "config_to_dict",
    "default_config",
    "landing_frame",
]
