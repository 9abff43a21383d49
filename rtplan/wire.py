"""Arrays and game states to and from the protocol's typed tensors, with specific errors."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import TYPE_CHECKING

import numpy as np
from google.protobuf.message import DecodeError

from rtplan.v1 import tensor_pb2

if TYPE_CHECKING:
    from rtplan import games

# JAX is imported inside the game-state functions only: an agent that reads frames and sends
# actions (rtplan.client) imports grpcio, protobuf and numpy, not JAX.

PROTOCOL_VERSION = "rtplan.v1"

#: Largest message either service accepts or sends (bytes); a Go state is ~6 KB.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024

#: A planner client pings each connection this often, idle or not (ms), and gives a connection
#: up when a ping goes this long unanswered (ms): a planner that hangs without closing its
#: connection (a frozen process, a lost host) is dropped from round robin within ~4 s. The
#: service accepts pings this frequent (`KEEPALIVE_MIN_INTERVAL_MS`, half the period).
KEEPALIVE_TIME_MS = 2000
KEEPALIVE_TIMEOUT_MS = 2000
KEEPALIVE_MIN_INTERVAL_MS = KEEPALIVE_TIME_MS // 2


@dataclasses.dataclass(frozen=True)
class Unparsed:
    """What `lenient` hands a servicer for bytes that are not its request message."""

    error: str


def lenient(message_cls):
    """A gRPC request deserializer that never raises: bytes that are not a `message_cls` give
    an `Unparsed` naming why, so the servicer answers INVALID_ARGUMENT (gRPC's own answer to a
    request that does not parse is UNKNOWN or INTERNAL, and ends a stream)."""

    def parse(data: bytes):
        try:
            return message_cls.FromString(data)
        except (DecodeError, RuntimeError, ValueError) as e:
            return Unparsed(f"request is not a valid {message_cls.DESCRIPTOR.full_name}: {e}")

    return parse


_DTYPES = {
    tensor_pb2.DTYPE_FLOAT32: np.dtype("<f4"),
    tensor_pb2.DTYPE_INT32: np.dtype("<i4"),
    tensor_pb2.DTYPE_BOOL: np.dtype("bool"),
    tensor_pb2.DTYPE_UINT8: np.dtype("u1"),
    tensor_pb2.DTYPE_INT8: np.dtype("i1"),
    tensor_pb2.DTYPE_UINT32: np.dtype("<u4"),
    tensor_pb2.DTYPE_FLOAT16: np.dtype("<f2"),
    tensor_pb2.DTYPE_INT16: np.dtype("<i2"),
    tensor_pb2.DTYPE_INT64: np.dtype("<i8"),
}
_CODES = {dt: code for code, dt in _DTYPES.items()}  # this module assumes a little-endian host


class WireError(ValueError):
    """A message that does not decode: says which field and what was wrong."""


def dtype_code(dtype) -> int:
    """The protocol `DType` of a numpy dtype (WireError if it has none)."""
    dt = np.dtype(dtype)
    code = _CODES.get(dt)
    if code is None:
        raise WireError(f"dtype {dt} has no protocol DType")
    return code


def numpy_dtype(code: int) -> np.dtype:
    """The numpy dtype of a protocol `DType` (WireError if it is unknown)."""
    if code not in _DTYPES:
        raise WireError(f"unknown dtype {dtype_name(code)}")
    return _DTYPES[code]


def dtype_name(code: int) -> str:
    return tensor_pb2.DType.Name(code) if code in tensor_pb2.DType.values() else f"DType({code})"


def to_tensor(array) -> tensor_pb2.Tensor:
    """Packs an array (numpy or jax) as a `Tensor`."""
    a = np.asarray(array)
    code = dtype_code(a.dtype)
    return tensor_pb2.Tensor(
        dtype=code, shape=list(a.shape), data=np.ascontiguousarray(a, _DTYPES[code]).tobytes()
    )


def from_tensor(t: tensor_pb2.Tensor, *, name: str = "tensor", dtype=None, shape=None):
    """Unpacks a `Tensor`, checking it against an expected dtype and shape when given.

    Raises:
        WireError: unknown dtype, negative dims, a payload of the wrong size, or a dtype/shape
            other than the expected one; the message names `name`.
    """
    if t.dtype not in _DTYPES:
        raise WireError(f"{name}: unknown dtype {dtype_name(t.dtype)}")
    shape_got = tuple(int(d) for d in t.shape)
    if any(d < 0 for d in shape_got):
        raise WireError(f"{name}: negative dimension in shape {shape_got}")
    if dtype is not None and _DTYPES[t.dtype] != np.dtype(dtype):
        want = dtype_name(dtype_code(dtype))
        raise WireError(f"{name}: dtype {dtype_name(t.dtype)}, expected {want}")
    if shape is not None and shape_got != tuple(shape):
        raise WireError(f"{name}: shape {shape_got}, expected {tuple(shape)}")
    dt = _DTYPES[t.dtype]
    size = math.prod(shape_got)
    if len(t.data) != size * dt.itemsize:
        raise WireError(
            f"{name}: payload has {len(t.data)} bytes, shape {shape_got} of "
            f"{dtype_name(t.dtype)} needs {size * dt.itemsize}"
        )
    return np.frombuffer(t.data, dt).reshape(shape_got).copy()


@functools.lru_cache(maxsize=32)
def _template(game: games.Game):
    """(paths, leaf shapes/dtypes, treedef, wire forms) of one unbatched state of `game`.

    A leaf's wire form is (dtype code, shape as a list, payload bytes): what a well-formed leaf
    carries, so that decoding one checks it with three comparisons.
    """
    import jax

    shapes = jax.eval_shape(game.init, jax.random.PRNGKey(0))
    leaves, treedef = jax.tree_util.tree_flatten_with_path(shapes)
    paths = tuple(jax.tree_util.keystr(p) for p, _ in leaves)
    specs = tuple(leaf for _, leaf in leaves)
    forms = tuple(
        (dtype_code(s.dtype), list(s.shape), math.prod(s.shape) * np.dtype(s.dtype).itemsize)
        for s in specs
    )
    return paths, specs, treedef, forms


def state_to_proto(game: games.Game, state: games.State) -> tensor_pb2.GameState:
    """Packs one (unbatched) state of `game`."""
    import jax

    paths, specs, _, forms = _template(game)
    leaves = jax.tree_util.tree_leaves(state)
    if any(isinstance(x, jax.Array) for x in leaves):  # one transfer; host leaves need none
        leaves = jax.device_get(leaves)
    if len(leaves) != len(specs):
        raise WireError(f"state has {len(leaves)} leaves, a {game.id} state has {len(specs)}")
    tensors = []
    for x, spec, (code, _, _) in zip(leaves, specs, forms, strict=True):
        # Leaves held as Python/NumPy scalars by the wrapped library take the traced dtype.
        a = np.asarray(x, spec.dtype)
        tensors.append(tensor_pb2.Tensor(dtype=code, shape=a.shape, data=a.tobytes()))
    return tensor_pb2.GameState(game_id=game.id, paths=paths, leaves=tensors)


def state_from_proto(
    game: games.Game, msg: tensor_pb2.GameState, *, host: bool = False
) -> games.State:
    """Unpacks a `GameState` of `game`, validating every leaf.

    Leaves are jax arrays, or numpy arrays with `host=True` (for callers that hand the state to
    a compiled function themselves: no per-leaf device transfer).

    Raises:
        WireError: another game, missing or extra leaves, or a leaf of the wrong dtype/shape.
    """
    import jax

    if msg.game_id != game.id:
        raise WireError(f"state is of game {msg.game_id!r}, expected {game.id!r}")
    paths, specs, treedef, forms = _template(game)
    if len(msg.leaves) != len(specs):
        raise WireError(f"state of {game.id} needs {len(specs)} leaves, got {len(msg.leaves)}")
    if msg.paths and tuple(msg.paths) != paths:
        bad = next(
            (i for i, (a, b) in enumerate(zip(msg.paths, paths, strict=False)) if a != b),
            min(len(msg.paths), len(paths)),
        )
        got = msg.paths[bad] if bad < len(msg.paths) else "<missing>"
        want = paths[bad] if bad < len(paths) else "<none>"
        raise WireError(f"state leaf {bad} is {got!r}, expected {want!r}")
    leaves = []
    for t, path, spec, (code, dims, nbytes) in zip(msg.leaves, paths, specs, forms, strict=True):
        if t.dtype == code and t.shape == dims and len(t.data) == nbytes:
            # Well formed (the common case, ~1 us a leaf): a read-only view of the payload.
            leaves.append(np.frombuffer(t.data, spec.dtype).reshape(spec.shape))
        else:  # the full check, which names what is wrong
            leaves.append(from_tensor(t, name=f"state{path}", dtype=spec.dtype, shape=spec.shape))
    if not host:
        leaves = [jax.numpy.asarray(x) for x in leaves]
    return jax.tree_util.tree_unflatten(treedef, leaves)
