"""The planner service engine's errors: each names what a request or a start-up got wrong."""

from __future__ import annotations


class EngineError(Exception):
    """A request the engine cannot serve; the message names the cause."""


class InvalidRequestError(EngineError):
    """The request itself is wrong: budget not offered, malformed state (an unknown game raises
    `games.UnknownGameError`)."""


class BudgetError(InvalidRequestError):
    """A forced k that is not one of the game's budgets."""


class StateError(InvalidRequestError):
    """A state that does not decode, or one there is nothing to plan for."""


class NotLoadedError(EngineError):
    """A registered game (or its gate) with no checkpoint loaded in this engine."""


class NoGateError(NotLoadedError):
    """A `gate` budget for a game whose gate checkpoint is not loaded."""


class GatedOnlyError(NotLoadedError):
    """A forced k for a game this engine serves gated only (`gated_only`)."""


class GateLoadError(EngineError):
    """A gate checkpoint that is present but does not load (corrupt, or for another planner)."""


class NotReadyError(EngineError):
    """A request before `compile()` has finished."""


class NotStartedError(EngineError):
    """A search dropped before it started: its deadline left no time for it, or its caller gave
    up."""


class DeviceError(ValueError):
    """A device spec that is malformed or names a device this machine does not have."""
