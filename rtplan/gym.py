"""A Gymnasium environment over one simulated-clock session of a remote rtplan env server.

`RemoteEnv` plays a one-player (committed-action) game of a running env server through the
gRPC Env API (`rtplan.client`): every `reset` joins a new simulated-clock session, whose frames
wait for the agent's action, and every `step` answers the current frame. The session's first
state is the server's `game.init(PRNGKey(seed))`, and the server steps the game it runs (with
its checkpoint's game settings), so a seeded episode is the in-process one frame for frame:
tests/rtplan/test_gym_env.py replays fixed action sequences through the services and in process and
compares every observation, reward, end flag and legal mask.

Why no gate training run is compared with the in-process trainer: `gate.committed.train.GatePPO`
does not step frames. Its action is a budget k, and each rollout step runs the frozen planner's
whole option (k - 1 reflex frames, a search, the planned frame) for a batch of games inside one
compiled `OptionRunner` call; the game's steps never leave that call. The Env API takes frame
actions, not budgets: a server-side planner session takes its budgets from the planner
service's gate checkpoint or from a list fixed when the session is created, never from a
learner during the episode. And a session starts from `PRNGKey(seed)` (the key [0, seed mod
2**32] in JAX's default 32-bit mode), while the trainer's games start and auto-reset from keys
split off its run key, whose first word is almost never 0. Training through the services would need
a second trainer (searches in process, frames over the network, resets as new sessions), and
comparing it with the first tests that trainer, not this environment. What is shown equal
instead: the frames (tests/rtplan/test_gym_env.py: observations, rewards, end flags and legal masks
of fixed action sequences, remote against in process, all three committed games), and the
gate's options as deployed (tests/rtplan/test_eval_via_services.py: the gate through the planner
service and the env server gives the in-process `gate.committed.choosers.play` actions, budgets and
returns on the same seeds).
"""

from __future__ import annotations

from typing import Any

import grpc
import gymnasium
import numpy as np
from gymnasium import spaces

from rtplan import wire
from rtplan.client import EnvClient, EnvError, Episode, Frame

__all__ = ["ILLEGAL", "RemoteEnv", "register_envs"]

#: What `RemoteEnv.step` does with an action the current frame's mask forbids.
ILLEGAL = ("raise", "fallback")
#: Gymnasium ids are `NAMESPACE/<game id>` (the game id keeps its version: "-v0").
NAMESPACE = "rtplan"
#: Seeds of sessions reset without one are drawn below this (the server keys a session with
#: `PRNGKey(seed)`, which keeps a seed's low 32 bits).
_SEED_RANGE = 2**32
#: How long the server may take to list its games: its first listing builds every registered
#: game (3 s on the 2-core test machine, more when it is loaded, past the client's default
#: 10 s); an unreachable server still fails at once (UNAVAILABLE).
LIST_TIMEOUT_S = 60.0


class RemoteEnv(gymnasium.Env):
    """One game of an rtplan env server, stepped over its gRPC Env API in simulated time.

    Observation: `Box(-inf, inf, GameSpec.observation.shape, float32)`, the game's network
    planes (`Game.observe`) of the current frame.
    Action: `Discrete(GameSpec.num_actions)`. `info["action_mask"]` (`[A]` bool) holds the
    current frame's legal actions; an illegal one raises (`illegal="raise"`) or is sent, and
    the server plays the game's fallback in its place (`illegal="fallback"`:
    `info["provenance"]` is then "invalid" and `info["applied_action"]` the fallback).
    Reward: the game's reward for the frame just played.
    Termination: `terminated` when the game ends by its rules, `truncated` when it reaches its
    horizon (`GameSpec.horizon`); both come from the server's frame. The session then ends:
    call `reset`.

    `info` holds "action_mask", "frame" (the frame index) and "episode_return"; after a step
    also "applied_action" and "provenance" (the server's report on the action played).
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        address: str,
        game_id: str,
        *,
        token: str = "",
        illegal: str = "raise",
        fallback: str = "game",
        record: bool = False,
    ) -> None:
        """
        Args:
            address: the env server's gRPC Env API, e.g. "localhost:50052".
            game_id: a one-player game the server runs, e.g. "snake-rt-v0".
            token: the server's agent token, if it requires one to create sessions.
            illegal: "raise" (ValueError, nothing sent) or "fallback" (send it; the server
                plays the game's fallback and reports the action invalid).
            fallback: what the server plays for an illegal action: "game" (keep direction,
                no-op) or "reflex" (the planner network's, if the server has a checkpoint).
            record: the server writes a replay file of every session.

        Raises:
            EnvError: the server cannot be reached, or refuses the game (its message).
            ValueError: a two-player clock game, or an unknown `illegal`.
        """
        if illegal not in ILLEGAL:
            raise ValueError(f"illegal must be one of {ILLEGAL}, got {illegal!r}")
        self.address = address
        self.game_id = game_id
        self._illegal = illegal
        self._join = dict(token=token, fallback=fallback, record=record)
        self._client = EnvClient(address)
        self._episode: Episode | None = None
        self._frames = None
        self._frame: Frame | None = None
        try:
            self.game_spec = self._describe(game_id)
        except BaseException:
            self._client.close()
            raise
        obs = self.game_spec.observation
        self.observation_space = spaces.Box(
            -np.inf, np.inf, tuple(obs.shape), wire.numpy_dtype(obs.dtype)
        )
        self.action_space = spaces.Discrete(self.game_spec.num_actions)

    def _describe(self, game_id: str):
        """The server's `GameSpec` of `game_id`; a game it does not list is joined, so that
        the refusal is the server's own."""
        listed = {g.game_id: g for g in _games(self._client, self.address)}
        if game_id not in listed:
            self._client.play(game_id, clock="simulated", **self._join).close()
            raise EnvError(f"the env server at {self.address} runs {game_id!r} but lists no spec")
        spec = listed[game_id]
        if spec.num_players != 1:
            raise ValueError(
                f"{game_id} is a {spec.num_players}-player clock game: RemoteEnv plays the "
                "one-player committed-action games"
            )
        return spec

    @property
    def session_id(self) -> str | None:
        """The server's id of the current session (None before the first reset)."""
        return None if self._episode is None else self._episode.session_id

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Ends the current session and joins a new one.

        Args:
            seed: the session's seed (0 <= seed < 2**63); its first state is
                `game.init(PRNGKey(seed))`. None: drawn from `self.np_random`, which a seeded
                reset seeds.
            options: none are taken (the session's settings are the constructor's).

        Returns:
            (observation `[*obs]` float32, info).
        """
        super().reset(seed=seed)
        if options:
            raise ValueError(f"RemoteEnv.reset takes no options, got {sorted(options)}")
        if seed is None:
            seed = int(self.np_random.integers(_SEED_RANGE))
        self._end_session()
        episode = self._client.play(
            self.game_id, seed=seed, clock="simulated", send_observation=True, **self._join
        )
        self._episode, self._frames = episode, iter(episode)
        if episode.spec != self.game_spec:
            self._end_session()
            raise EnvError(
                f"the env server at {self.address} now runs {self.game_id} with another spec "
                f"({episode.spec}) than this env's spaces came from ({self.game_spec})"
            )
        frame = self._receive()
        return frame.observation, self._info(frame)

    def step(self, action) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Plays `action` at the current frame and waits for the next one.

        Raises:
            ValueError: `action` is not in the action space, or (`illegal="raise"`) it is
                illegal at this frame; nothing was sent and the frame still waits.
            RuntimeError: no reset yet, or the episode is over.
            EnvError: the server ended the session.
        """
        current = self._frame
        if current is None or self._episode is None:
            raise RuntimeError("call reset() before step()")
        if current.done:
            raise RuntimeError(f"the episode ended at frame {current.frame}: call reset()")
        if not self.action_space.contains(action):
            raise ValueError(
                f"action {action!r} is not in the action space {self.action_space}: RemoteEnv "
                "refuses it (the server would play the game's fallback and report it invalid)"
            )
        action = int(action)
        if self._illegal == "raise" and not current.legal_action_mask[action]:
            legal = np.flatnonzero(current.legal_action_mask).tolist()
            name = self.game_spec.action_names[action]
            raise ValueError(
                f"action {action} ({name}) is illegal at frame {current.frame} of "
                f"{self.game_id}; the legal actions are {legal} (info['action_mask']). Nothing "
                "was sent; RemoteEnv(illegal='fallback') lets the server play the fallback"
            )
        self._episode.act(current.frame, action)
        frame = self._receive()
        if frame.done:  # the server ends the session after its last frame
            self._episode.close()
        return (
            frame.observation,
            frame.reward,
            frame.terminated,
            frame.truncated,
            self._info(frame),
        )

    def close(self) -> None:
        """Ends the session and the connection (a second call does nothing)."""
        self._end_session()
        self._client.close()

    def _receive(self) -> Frame:
        try:
            frame = next(self._frames)
        except StopIteration:
            frame = None
        if frame is None:
            errors = self._episode.errors if self._episode is not None else []
            raise EnvError(f"session {self.session_id} ended before its next frame ({errors})")
        self._frame = frame
        return frame

    def _info(self, frame: Frame) -> dict[str, Any]:
        info = {
            "action_mask": frame.legal_action_mask,
            "frame": frame.frame,
            "episode_return": frame.episode_return,
        }
        if frame.previous is not None:
            info["applied_action"] = frame.previous.action
            info["provenance"] = frame.previous.provenance
        return info

    def _end_session(self) -> None:
        if self._episode is not None:
            self._episode.close()
        self._episode = self._frames = self._frame = None


def _games(client: EnvClient, address: str) -> list:
    """The `GameSpec`s of the games the server runs (EnvError if it does not answer)."""
    try:
        return client.games(timeout=LIST_TIMEOUT_S)
    except grpc.RpcError as e:
        raise EnvError(
            f"cannot list the games of the env server at {address}: {e.code().name}: {e.details()}"
        ) from e


def register_envs(address: str, **kwargs: Any) -> list[str]:
    """Registers `rtplan/<game id>` with Gymnasium for each one-player game the env server at
    `address` runs, so that `gymnasium.make("rtplan/snake-rt-v0")` (and `make_vec`) build a
    `RemoteEnv` on it; registering again replaces the entries.

    Args:
        address: the env server's gRPC Env API.
        kwargs: `RemoteEnv`'s keyword arguments (token, illegal, fallback, record).

    Returns:
        The registered ids.
    """
    with EnvClient(address) as client:
        listed = _games(client, address)
    ids = []
    for spec in listed:
        if spec.num_players != 1:
            continue
        env_id = f"{NAMESPACE}/{spec.game_id}"
        gymnasium.registry.pop(env_id, None)  # a new address replaces the old one
        gymnasium.register(
            id=env_id,
            entry_point="rtplan.gym:RemoteEnv",
            kwargs={"address": address, "game_id": spec.game_id, **kwargs},
        )
        ids.append(env_id)
    return ids
