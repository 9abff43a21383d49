"""Safe checkpoints: one msgpack file (no pickle) holding the tree, its metadata and its hash."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import msgpack

from rtplan.harness.assets import shipped_dir

# The file is written atomically (temporary file, fsync, rename), so a killed writer leaves the
# previous checkpoint intact. A JSON copy of the metadata is written beside it for people and
# tools; the copy inside the file is the one that counts. Flax and JAX load on first use, so a
# CLI can import this module before `--devices` sets XLA's flags.

#: Format tag stored in every checkpoint.
FORMAT = "rtplan-checkpoint-v1"


class CheckpointError(RuntimeError):
    """A checkpoint is missing, corrupt, or does not fit the expected structure."""


#: The folder of the shipped checkpoints: the checkout's, or the wheel's copy (`checkpoint_root`).
CHECKPOINTS = "checkpoints"


def checkpoint_root(explicit: str | os.PathLike | None = None) -> Path:
    """The root of the checkpoint folders (`<root>/<game>/planner.msgpack`): `explicit` (a
    `--checkpoint-dir` flag or a setting) when given, else the checkout's `checkpoints/` beside
    the packages, else the installed wheel's copy (`harness.assets.shipped_dir`), so that a
    command started from any directory finds the shipped checkpoints."""
    if explicit is not None:
        return Path(explicit)
    return shipped_dir(CHECKPOINTS, "rtplan.harness")


# The checkpoint folder's layout: one folder per game holding its planner and, where it has one,
# its gate. Every command, service and trainer finds the two files through these names and
# functions; the resolvers raise one message for a missing file.

#: File name of a game's planner in a checkpoint folder (`<root>/<game>/planner.msgpack`), and
#: of the params a `train-planner` run exports into its run folder (`ship-planner` copies it).
PLANNER_FILE = "planner.msgpack"
#: File name of a game's gate beside its planner (`<root>/<game>/gate.msgpack`), and of the
#: params a `train-gate` run exports into its run folder (`ship-gate` copies it).
GATE_FILE = "gate.msgpack"


def recorded_path(path: str | os.PathLike) -> str:
    """A checkpoint's path as results and metadata record it: a shipped checkpoint as
    `checkpoints/<game>/<file>` wherever the checkout or the package lies, so that no machine's
    folders end up in a committed file; any other path as given."""
    shipped = checkpoint_root().resolve()
    try:
        return str(Path(shipped.name) / Path(path).resolve().relative_to(shipped))
    except ValueError:
        return str(path)


def planner_path(root: str | os.PathLike, game_id: str) -> Path:
    """`<root>/<game_id>/planner.msgpack`: where a checkpoint folder keeps a game's planner."""
    return Path(root) / game_id / PLANNER_FILE


def gate_path(root: str | os.PathLike, game_id: str) -> Path:
    """`<root>/<game_id>/gate.msgpack`: where a checkpoint folder keeps a game's gate."""
    return Path(root) / game_id / GATE_FILE


def planner_file(
    game_id: str,
    explicit: str | os.PathLike | None = None,
    *,
    root: str | os.PathLike | None = None,
    required: bool = True,
    flag: str = "--planner",
) -> Path:
    """The planner checkpoint of `game_id` a command or service uses: `explicit` (a `--planner`
    flag) when given, else `planner_path(checkpoint_root(root), game_id)` (`root`: a
    `--checkpoint-dir`; None: the shipped checkpoints).

    Args:
        required: raise unless the file exists (False: the path only, e.g. to write to).
        flag: what names another file, for the message (`--planner`, `--checkpoint`, ...).

    Raises:
        CheckpointError: `required` and no file there (`missing_checkpoint`'s message).
    """
    path = Path(explicit) if explicit is not None else planner_path(checkpoint_root(root), game_id)
    if required and not path.is_file():
        raise missing_checkpoint("planner", game_id, path, flag)
    return path


def gate_file(
    game_id: str,
    explicit: str | os.PathLike | None = None,
    *,
    beside: str | os.PathLike | None = None,
    root: str | os.PathLike | None = None,
    required: bool = True,
    flag: str = "--gate",
) -> Path:
    """The gate checkpoint of `game_id` a command or service uses: `explicit` (a `--gate` flag)
    when given, else the gate of the checkpoint folder that holds the planner file `beside`
    (`<root>/<game>/planner.msgpack` -> `gate_path(<root>, game_id)`), else
    `gate_path(checkpoint_root(root), game_id)`.

    Args:
        required: raise unless the file exists (False: the path, which a game without a gate
            lacks).
        flag: what names another file, for the message (`--gate`, `--clock-gate`, ...).

    Raises:
        CheckpointError: `required` and no file there (`missing_checkpoint`'s message).
    """
    if explicit is not None:
        path = Path(explicit)
    elif beside is not None:
        path = gate_path(Path(beside).parent.parent, game_id)
    else:
        path = gate_path(checkpoint_root(root), game_id)
    if required and not path.is_file():
        raise missing_checkpoint("gate", game_id, path, flag)
    return path


def missing_checkpoint(
    what: str, game_id: str, path: str | os.PathLike, flag: str
) -> CheckpointError:
    """The one error of a missing planner or gate checkpoint (`what`): the game, the path looked
    at, and how to get one (train and ship it, or name another file with `flag`)."""
    return CheckpointError(
        f"no {what} checkpoint for {game_id} at {path}: train one (`rtplan train-{what} --game "
        f"{game_id}`, then `rtplan ship-{what}`) or pass {flag}"
    )


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def git_commit() -> str:
    """The current git commit of the working tree, or "unknown"."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def save(path: str | os.PathLike, tree: Any, metadata: dict[str, Any]) -> None:
    """Writes `tree` and `metadata` to `path` atomically, plus a JSON copy at `path`.json.

    Args:
        path: the checkpoint file.
        tree: a pytree of arrays (flax state-dict convertible).
        metadata: JSON-able facts about the tree (command, seed, evaluation, ...).
    """
    from flax import serialization

    path = Path(path)
    payload = serialization.msgpack_serialize(serialization.to_state_dict(tree))
    meta = dict(metadata, sha256=hashlib.sha256(payload).hexdigest(), bytes=len(payload))
    meta_json = json.dumps(meta, indent=2, sort_keys=True)
    container = {"format": FORMAT, "metadata": meta_json, "tree": payload}
    _atomic_write(path, msgpack.packb(container, use_bin_type=True))
    _atomic_write(_meta_path(path), meta_json.encode())


def _read(path: Path) -> tuple[dict[str, Any], bytes]:
    """(metadata, verified tree payload) of a checkpoint file."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError as e:
        raise CheckpointError(f"no checkpoint at {path}") from e
    try:
        container = msgpack.unpackb(raw, raw=False)
    except Exception as e:  # msgpack raises several unrelated types on bad input
        raise CheckpointError(f"corrupt checkpoint {path}: cannot decode ({e})") from e
    if not isinstance(container, dict) or container.get("format") != FORMAT:
        raise CheckpointError(f"corrupt checkpoint {path}: not an {FORMAT} file")
    try:
        meta = json.loads(container["metadata"])
        payload = container["tree"]
    except (KeyError, TypeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"corrupt checkpoint {path}: bad metadata ({e})") from e
    digest = hashlib.sha256(payload).hexdigest()
    if digest != meta.get("sha256"):
        raise CheckpointError(
            f"corrupt checkpoint {path}: sha256 {digest[:12]} does not match the recorded "
            f"{str(meta.get('sha256'))[:12]} ({len(payload)} bytes, expected {meta.get('bytes')})"
        )
    return meta, payload


def load_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The metadata stored in a checkpoint (verified against the file's hash)."""
    return _read(Path(path))[0]


def load(path: str | os.PathLike, template: Any) -> tuple[Any, dict[str, Any]]:
    """Reads a checkpoint into the structure of `template`.

    Args:
        path: the file written by `save`.
        template: a pytree with the expected structure and shapes: arrays, or the
            `jax.ShapeDtypeStruct`s of `jax.eval_shape` (nothing needs initialising to load).

    Returns:
        (the restored tree, its metadata).

    Raises:
        CheckpointError: missing file, undecodable or truncated file, hash mismatch, or a
            structure that does not match `template`.
    """
    from flax import serialization

    path = Path(path)
    meta, payload = _read(path)
    try:
        state = serialization.msgpack_restore(payload)
    except Exception as e:  # verified hash: only a writer bug gets here
        raise CheckpointError(f"corrupt checkpoint {path}: cannot decode the tree ({e})") from e
    try:
        tree = serialization.from_state_dict(template, state)
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(
            f"checkpoint {path} does not fit the expected structure "
            f"(a different network config?): {e}"
        ) from e
    _check_shapes(template, tree, path)
    return tree, meta


def learner_tree(params: Any, opt_state: Any, key: Any, **extra: Any) -> dict[str, Any]:
    """What a trainer's checkpoint holds, on the host: its params, optimizer state and learner
    PRNG key, plus `extra` entries (e.g. a replay buffer)."""
    import jax

    return jax.device_get({"params": params, "opt_state": opt_state, "key": key, **extra})


def learner_template(init: Any, **extra: Any) -> dict[str, Any]:
    """Zeros shaped like `learner_tree`'s, for `load`: `init(key) -> (params, opt_state)` is only
    traced (`jax.eval_shape`), `extra` holds shapes or arrays of the other entries."""
    import jax
    import numpy as np

    params, opt_state = jax.eval_shape(init, jax.random.PRNGKey(0))
    tree = {"params": params, "opt_state": opt_state, "key": jax.random.PRNGKey(0), **extra}
    return jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), tree)


def _check_shapes(template: Any, tree: Any, path: Path) -> None:
    import jax

    flat_t, _ = jax.tree_util.tree_flatten_with_path(template)
    flat = jax.tree.leaves(tree)
    for (key, t), x in zip(flat_t, flat, strict=True):
        if getattr(t, "shape", None) != getattr(x, "shape", None):
            name = jax.tree_util.keystr(key)
            raise CheckpointError(
                f"checkpoint {path} does not fit the expected structure: {name} has shape "
                f"{getattr(x, 'shape', None)}, expected {getattr(t, 'shape', None)}"
            )


def _meta_path(path: Path) -> Path:
    return path.with_name(path.name + ".json")
