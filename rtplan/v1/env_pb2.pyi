from google.protobuf import any_pb2 as _any_pb2
from rtplan.v1 import tensor_pb2 as _tensor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Fallback(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FALLBACK_UNSPECIFIED: _ClassVar[Fallback]
    FALLBACK_GAME: _ClassVar[Fallback]
    FALLBACK_REFLEX: _ClassVar[Fallback]

class Provenance(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROVENANCE_UNSPECIFIED: _ClassVar[Provenance]
    PROVENANCE_ON_TIME: _ClassVar[Provenance]
    PROVENANCE_LATE: _ClassVar[Provenance]
    PROVENANCE_FALLBACK: _ClassVar[Provenance]
    PROVENANCE_INVALID: _ClassVar[Provenance]

class ClockMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLOCK_MODE_UNSPECIFIED: _ClassVar[ClockMode]
    CLOCK_MODE_REAL_TIME: _ClassVar[ClockMode]
    CLOCK_MODE_SIMULATED: _ClassVar[ClockMode]
FALLBACK_UNSPECIFIED: Fallback
FALLBACK_GAME: Fallback
FALLBACK_REFLEX: Fallback
PROVENANCE_UNSPECIFIED: Provenance
PROVENANCE_ON_TIME: Provenance
PROVENANCE_LATE: Provenance
PROVENANCE_FALLBACK: Provenance
PROVENANCE_INVALID: Provenance
CLOCK_MODE_UNSPECIFIED: ClockMode
CLOCK_MODE_REAL_TIME: ClockMode
CLOCK_MODE_SIMULATED: ClockMode

class Status(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class GameSpec(_message.Message):
    __slots__ = ("game_id", "observation", "num_actions", "action_names", "num_players", "horizon", "fallback")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    NUM_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    ACTION_NAMES_FIELD_NUMBER: _ClassVar[int]
    NUM_PLAYERS_FIELD_NUMBER: _ClassVar[int]
    HORIZON_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    observation: _tensor_pb2.TensorSpec
    num_actions: int
    action_names: _containers.RepeatedScalarFieldContainer[str]
    num_players: int
    horizon: int
    fallback: str
    def __init__(self, game_id: _Optional[str] = ..., observation: _Optional[_Union[_tensor_pb2.TensorSpec, _Mapping]] = ..., num_actions: _Optional[int] = ..., action_names: _Optional[_Iterable[str]] = ..., num_players: _Optional[int] = ..., horizon: _Optional[int] = ..., fallback: _Optional[str] = ...) -> None: ...

class Join(_message.Message):
    __slots__ = ("protocol_version", "session_id", "token", "game_id", "seed", "fps", "fallback", "clock", "record", "send_observation", "extension")
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    FPS_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_FIELD_NUMBER: _ClassVar[int]
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    SEND_OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    EXTENSION_FIELD_NUMBER: _ClassVar[int]
    protocol_version: str
    session_id: str
    token: str
    game_id: str
    seed: int
    fps: float
    fallback: Fallback
    clock: ClockMode
    record: bool
    send_observation: bool
    extension: _any_pb2.Any
    def __init__(self, protocol_version: _Optional[str] = ..., session_id: _Optional[str] = ..., token: _Optional[str] = ..., game_id: _Optional[str] = ..., seed: _Optional[int] = ..., fps: _Optional[float] = ..., fallback: _Optional[_Union[Fallback, str]] = ..., clock: _Optional[_Union[ClockMode, str]] = ..., record: _Optional[bool] = ..., send_observation: _Optional[bool] = ..., extension: _Optional[_Union[_any_pb2.Any, _Mapping]] = ...) -> None: ...

class Action(_message.Message):
    __slots__ = ("frame", "action", "extension")
    FRAME_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    EXTENSION_FIELD_NUMBER: _ClassVar[int]
    frame: int
    action: int
    extension: _any_pb2.Any
    def __init__(self, frame: _Optional[int] = ..., action: _Optional[int] = ..., extension: _Optional[_Union[_any_pb2.Any, _Mapping]] = ...) -> None: ...

class Leave(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AgentMessage(_message.Message):
    __slots__ = ("join", "action", "leave", "extension")
    JOIN_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    LEAVE_FIELD_NUMBER: _ClassVar[int]
    EXTENSION_FIELD_NUMBER: _ClassVar[int]
    join: Join
    action: Action
    leave: Leave
    extension: _any_pb2.Any
    def __init__(self, join: _Optional[_Union[Join, _Mapping]] = ..., action: _Optional[_Union[Action, _Mapping]] = ..., leave: _Optional[_Union[Leave, _Mapping]] = ..., extension: _Optional[_Union[_any_pb2.Any, _Mapping]] = ...) -> None: ...

class Handshake(_message.Message):
    __slots__ = ("protocol_version", "server_version", "session_id", "spec", "fps", "clock", "fallback", "viewer_path", "extension")
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    FPS_FIELD_NUMBER: _ClassVar[int]
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_FIELD_NUMBER: _ClassVar[int]
    VIEWER_PATH_FIELD_NUMBER: _ClassVar[int]
    EXTENSION_FIELD_NUMBER: _ClassVar[int]
    protocol_version: str
    server_version: str
    session_id: str
    spec: GameSpec
    fps: float
    clock: ClockMode
    fallback: Fallback
    viewer_path: str
    extension: _any_pb2.Any
    def __init__(self, protocol_version: _Optional[str] = ..., server_version: _Optional[str] = ..., session_id: _Optional[str] = ..., spec: _Optional[_Union[GameSpec, _Mapping]] = ..., fps: _Optional[float] = ..., clock: _Optional[_Union[ClockMode, str]] = ..., fallback: _Optional[_Union[Fallback, str]] = ..., viewer_path: _Optional[str] = ..., extension: _Optional[_Union[_any_pb2.Any, _Mapping]] = ...) -> None: ...

class ActionReport(_message.Message):
    __slots__ = ("frame", "action", "provenance", "slack_ms", "received_action")
    FRAME_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    SLACK_MS_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_ACTION_FIELD_NUMBER: _ClassVar[int]
    frame: int
    action: int
    provenance: Provenance
    slack_ms: float
    received_action: int
    def __init__(self, frame: _Optional[int] = ..., action: _Optional[int] = ..., provenance: _Optional[_Union[Provenance, str]] = ..., slack_ms: _Optional[float] = ..., received_action: _Optional[int] = ...) -> None: ...

class Frame(_message.Message):
    __slots__ = ("frame", "server_time_ns", "deadline_ns", "period_ms", "observation", "legal_action_mask", "reward", "terminated", "truncated", "clocks", "current_player", "previous", "state", "episode_return", "extension", "late")
    FRAME_FIELD_NUMBER: _ClassVar[int]
    SERVER_TIME_NS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_NS_FIELD_NUMBER: _ClassVar[int]
    PERIOD_MS_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    LEGAL_ACTION_MASK_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    TERMINATED_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    CLOCKS_FIELD_NUMBER: _ClassVar[int]
    CURRENT_PLAYER_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EPISODE_RETURN_FIELD_NUMBER: _ClassVar[int]
    EXTENSION_FIELD_NUMBER: _ClassVar[int]
    LATE_FIELD_NUMBER: _ClassVar[int]
    frame: int
    server_time_ns: int
    deadline_ns: int
    period_ms: float
    observation: _tensor_pb2.Tensor
    legal_action_mask: _tensor_pb2.Tensor
    reward: float
    terminated: bool
    truncated: bool
    clocks: _containers.RepeatedScalarFieldContainer[int]
    current_player: int
    previous: ActionReport
    state: _tensor_pb2.GameState
    episode_return: float
    extension: _any_pb2.Any
    late: _containers.RepeatedCompositeFieldContainer[ActionReport]
    def __init__(self, frame: _Optional[int] = ..., server_time_ns: _Optional[int] = ..., deadline_ns: _Optional[int] = ..., period_ms: _Optional[float] = ..., observation: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., legal_action_mask: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., reward: _Optional[float] = ..., terminated: _Optional[bool] = ..., truncated: _Optional[bool] = ..., clocks: _Optional[_Iterable[int]] = ..., current_player: _Optional[int] = ..., previous: _Optional[_Union[ActionReport, _Mapping]] = ..., state: _Optional[_Union[_tensor_pb2.GameState, _Mapping]] = ..., episode_return: _Optional[float] = ..., extension: _Optional[_Union[_any_pb2.Any, _Mapping]] = ..., late: _Optional[_Iterable[_Union[ActionReport, _Mapping]]] = ...) -> None: ...

class ServerMessage(_message.Message):
    __slots__ = ("handshake", "frame", "error", "extension")
    HANDSHAKE_FIELD_NUMBER: _ClassVar[int]
    FRAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EXTENSION_FIELD_NUMBER: _ClassVar[int]
    handshake: Handshake
    frame: Frame
    error: Status
    extension: _any_pb2.Any
    def __init__(self, handshake: _Optional[_Union[Handshake, _Mapping]] = ..., frame: _Optional[_Union[Frame, _Mapping]] = ..., error: _Optional[_Union[Status, _Mapping]] = ..., extension: _Optional[_Union[_any_pb2.Any, _Mapping]] = ...) -> None: ...

class ListGamesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListGamesResponse(_message.Message):
    __slots__ = ("games",)
    GAMES_FIELD_NUMBER: _ClassVar[int]
    games: _containers.RepeatedCompositeFieldContainer[GameSpec]
    def __init__(self, games: _Optional[_Iterable[_Union[GameSpec, _Mapping]]] = ...) -> None: ...
