from google.protobuf import any_pb2 as _any_pb2
from rtplan.v1 import tensor_pb2 as _tensor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Budget(_message.Message):
    __slots__ = ("gate", "k")
    GATE_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    gate: bool
    k: int
    def __init__(self, gate: _Optional[bool] = ..., k: _Optional[int] = ...) -> None: ...

class PlanRequest(_message.Message):
    __slots__ = ("game_id", "state", "budget", "stream_id", "request_id", "seed", "extension", "gate_state", "frame_clock", "plan")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    STREAM_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    EXTENSION_FIELD_NUMBER: _ClassVar[int]
    GATE_STATE_FIELD_NUMBER: _ClassVar[int]
    FRAME_CLOCK_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    state: _tensor_pb2.GameState
    budget: Budget
    stream_id: str
    request_id: int
    seed: int
    extension: _any_pb2.Any
    gate_state: ClockGateState
    frame_clock: FrameClock
    plan: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, game_id: _Optional[str] = ..., state: _Optional[_Union[_tensor_pb2.GameState, _Mapping]] = ..., budget: _Optional[_Union[Budget, _Mapping]] = ..., stream_id: _Optional[str] = ..., request_id: _Optional[int] = ..., seed: _Optional[int] = ..., extension: _Optional[_Union[_any_pb2.Any, _Mapping]] = ..., gate_state: _Optional[_Union[ClockGateState, _Mapping]] = ..., frame_clock: _Optional[_Union[FrameClock, _Mapping]] = ..., plan: _Optional[_Iterable[int]] = ...) -> None: ...

class FrameClock(_message.Message):
    __slots__ = ("decision_deadline_ms", "period_ms")
    DECISION_DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    PERIOD_MS_FIELD_NUMBER: _ClassVar[int]
    decision_deadline_ms: float
    period_ms: float
    def __init__(self, decision_deadline_ms: _Optional[float] = ..., period_ms: _Optional[float] = ...) -> None: ...

class ClockGateState(_message.Message):
    __slots__ = ("h", "last")
    H_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    h: _tensor_pb2.Tensor
    last: int
    def __init__(self, h: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., last: _Optional[int] = ...) -> None: ...

class Decision(_message.Message):
    __slots__ = ("k", "gate_probabilities", "value", "landing_frame", "request_id", "gate_state")
    K_FIELD_NUMBER: _ClassVar[int]
    GATE_PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    LANDING_FRAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    GATE_STATE_FIELD_NUMBER: _ClassVar[int]
    k: int
    gate_probabilities: _containers.RepeatedScalarFieldContainer[float]
    value: float
    landing_frame: int
    request_id: int
    gate_state: ClockGateState
    def __init__(self, k: _Optional[int] = ..., gate_probabilities: _Optional[_Iterable[float]] = ..., value: _Optional[float] = ..., landing_frame: _Optional[int] = ..., request_id: _Optional[int] = ..., gate_state: _Optional[_Union[ClockGateState, _Mapping]] = ...) -> None: ...

class PlannedAction(_message.Message):
    __slots__ = ("action", "frame_actions", "planned", "visit_counts", "search_value", "cost", "search_ms", "request_id", "plan")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    FRAME_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    PLANNED_FIELD_NUMBER: _ClassVar[int]
    VISIT_COUNTS_FIELD_NUMBER: _ClassVar[int]
    SEARCH_VALUE_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    SEARCH_MS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    action: int
    frame_actions: _containers.RepeatedScalarFieldContainer[int]
    planned: _containers.RepeatedScalarFieldContainer[bool]
    visit_counts: _containers.RepeatedScalarFieldContainer[int]
    search_value: float
    cost: int
    search_ms: float
    request_id: int
    plan: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, action: _Optional[int] = ..., frame_actions: _Optional[_Iterable[int]] = ..., planned: _Optional[_Iterable[bool]] = ..., visit_counts: _Optional[_Iterable[int]] = ..., search_value: _Optional[float] = ..., cost: _Optional[int] = ..., search_ms: _Optional[float] = ..., request_id: _Optional[int] = ..., plan: _Optional[_Iterable[int]] = ...) -> None: ...

class PlanResponse(_message.Message):
    __slots__ = ("decision", "action", "extension")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    EXTENSION_FIELD_NUMBER: _ClassVar[int]
    decision: Decision
    action: PlannedAction
    extension: _any_pb2.Any
    def __init__(self, decision: _Optional[_Union[Decision, _Mapping]] = ..., action: _Optional[_Union[PlannedAction, _Mapping]] = ..., extension: _Optional[_Union[_any_pb2.Any, _Mapping]] = ...) -> None: ...

class HealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HealthResponse(_message.Message):
    __slots__ = ("status", "detail", "device", "plans_answered")
    class ServingStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        SERVING_STATUS_UNSPECIFIED: _ClassVar[HealthResponse.ServingStatus]
        SERVING: _ClassVar[HealthResponse.ServingStatus]
        NOT_SERVING: _ClassVar[HealthResponse.ServingStatus]
    SERVING_STATUS_UNSPECIFIED: HealthResponse.ServingStatus
    SERVING: HealthResponse.ServingStatus
    NOT_SERVING: HealthResponse.ServingStatus
    STATUS_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    PLANS_ANSWERED_FIELD_NUMBER: _ClassVar[int]
    status: HealthResponse.ServingStatus
    detail: str
    device: str
    plans_answered: int
    def __init__(self, status: _Optional[_Union[HealthResponse.ServingStatus, str]] = ..., detail: _Optional[str] = ..., device: _Optional[str] = ..., plans_answered: _Optional[int] = ...) -> None: ...

class PlannerGame(_message.Message):
    __slots__ = ("game_id", "budgets", "simulations", "gate", "checkpoint", "compiling", "clock_gate", "gate_ready", "gated_only", "committed", "tree_k", "plan_horizon")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    BUDGETS_FIELD_NUMBER: _ClassVar[int]
    SIMULATIONS_FIELD_NUMBER: _ClassVar[int]
    GATE_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    COMPILING_FIELD_NUMBER: _ClassVar[int]
    CLOCK_GATE_FIELD_NUMBER: _ClassVar[int]
    GATE_READY_FIELD_NUMBER: _ClassVar[int]
    GATED_ONLY_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    TREE_K_FIELD_NUMBER: _ClassVar[int]
    PLAN_HORIZON_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    budgets: _containers.RepeatedScalarFieldContainer[int]
    simulations: _containers.RepeatedScalarFieldContainer[int]
    gate: bool
    checkpoint: str
    compiling: bool
    clock_gate: bool
    gate_ready: bool
    gated_only: bool
    committed: str
    tree_k: int
    plan_horizon: int
    def __init__(self, game_id: _Optional[str] = ..., budgets: _Optional[_Iterable[int]] = ..., simulations: _Optional[_Iterable[int]] = ..., gate: _Optional[bool] = ..., checkpoint: _Optional[str] = ..., compiling: _Optional[bool] = ..., clock_gate: _Optional[bool] = ..., gate_ready: _Optional[bool] = ..., gated_only: _Optional[bool] = ..., committed: _Optional[str] = ..., tree_k: _Optional[int] = ..., plan_horizon: _Optional[int] = ...) -> None: ...

class ListPlannerGamesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListPlannerGamesResponse(_message.Message):
    __slots__ = ("games",)
    GAMES_FIELD_NUMBER: _ClassVar[int]
    games: _containers.RepeatedCompositeFieldContainer[PlannerGame]
    def __init__(self, games: _Optional[_Iterable[_Union[PlannerGame, _Mapping]]] = ...) -> None: ...

class VersionRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class VersionResponse(_message.Message):
    __slots__ = ("protocol_version", "server_version")
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    protocol_version: str
    server_version: str
    def __init__(self, protocol_version: _Optional[str] = ..., server_version: _Optional[str] = ...) -> None: ...
