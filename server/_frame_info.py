"""What a session reads of a state each frame: `FrameInfo` in the jitted step, `HostInfo` after."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
from flax import struct


@struct.dataclass
class FrameInfo:
    """What the session needs of a state each frame, computed inside the jitted step."""

    frame: jax.Array  # [] int32
    reward: jax.Array  # [] float32, to the player who made the last move
    rewards: jax.Array  # [P] float32 by player id (clock games), [1] otherwise
    terminated: jax.Array  # [] bool
    truncated: jax.Array  # [] bool
    current_player: jax.Array  # [] int32
    legal: jax.Array  # [A] bool
    clocks: jax.Array  # [P] int32 ticks left by player id (clock games), [0] otherwise
    fallback: jax.Array  # [] int32 the game's fallback action
    reflex: jax.Array  # [] int32 the network's masked argmax, -1 without a network
    #: [] int32 the reflex over `Game.served_mask` (real time: `Session.reflex`), -1 without one
    served_reflex: jax.Array


@dataclasses.dataclass(frozen=True)
class HostInfo:
    """`FrameInfo` on the host, as Python values."""

    frame: int
    reward: float
    rewards: tuple[float, ...]
    terminated: bool
    truncated: bool
    current_player: int
    legal: np.ndarray  # [A] bool
    clocks: tuple[int, ...]
    fallback: int
    reflex: int
    served_reflex: int

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    def reflex_for(self, served: bool) -> int:
        """The frame's reflex (-1: no network): the served one where a session serves its moves
        (`SessionConfig.served`), else the network's masked argmax."""
        return self.served_reflex if served else self.reflex

    @classmethod
    def from_device(cls, info: FrameInfo) -> HostInfo:
        h = jax.device_get(info)
        return cls(
            frame=int(h.frame),
            reward=float(h.reward),
            rewards=tuple(float(x) for x in h.rewards),
            terminated=bool(h.terminated),
            truncated=bool(h.truncated),
            current_player=int(h.current_player),
            legal=np.asarray(h.legal, bool),
            clocks=tuple(int(x) for x in h.clocks),
            fallback=int(h.fallback),
            reflex=int(h.reflex),
            served_reflex=int(h.served_reflex),
        )

    @classmethod
    def rows(cls, h: FrameInfo, slots: list[int]) -> list[HostInfo]:
        """The `HostInfo` of each of `slots` of a batched `FrameInfo` already on the host (each
        value as `from_device` makes it: the same Python values and dtypes)."""
        frame, reward = h.frame.tolist(), h.reward.tolist()
        rewards, clocks = h.rewards.tolist(), h.clocks.tolist()
        term, trunc = h.terminated.tolist(), h.truncated.tolist()
        player, fallback, reflex = h.current_player.tolist(), h.fallback.tolist(), h.reflex.tolist()
        served = h.served_reflex.tolist()
        legal = np.asarray(h.legal, bool)
        return [
            cls(
                frame=frame[i],
                reward=reward[i],
                rewards=tuple(rewards[i]),
                terminated=term[i],
                truncated=trunc[i],
                current_player=player[i],
                legal=legal[i],
                clocks=tuple(clocks[i]),
                fallback=fallback[i],
                reflex=reflex[i],
                served_reflex=served[i],
            )
            for i in slots
        ]
