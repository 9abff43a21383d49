"""Safe checkpoints: flax msgpack payload (no pickle) plus a JSON metadata file beside it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from flax import serialization


class CheckpointError(RuntimeError):
    """A checkpoint is missing, corrupt, or does not fit the expected structure."""


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
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
    """Writes `tree` to `path` (msgpack) and `metadata` + payload hash to `path`.json, atomically.

    The payload is written first, the metadata last, so a reader that finds the metadata finds a
    complete payload with the hash the metadata records.
    """
    path = Path(path)
    payload = serialization.msgpack_serialize(serialization.to_state_dict(tree))
    meta = dict(metadata, sha256=hashlib.sha256(payload).hexdigest(), bytes=len(payload))
    _atomic_write(path, payload)
    _atomic_write(_meta_path(path), json.dumps(meta, indent=2, sort_keys=True).encode())


def load_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The metadata written beside a checkpoint."""
    meta_path = _meta_path(Path(path))
    try:
        return json.loads(meta_path.read_text())
    except FileNotFoundError as e:
        raise CheckpointError(f"no checkpoint metadata at {meta_path}") from e
    except json.JSONDecodeError as e:
        raise CheckpointError(f"corrupt checkpoint metadata {meta_path}: {e}") from e


def load(path: str | os.PathLike, template: Any) -> tuple[Any, dict[str, Any]]:
    """Reads a checkpoint into the structure of `template`.

    Args:
        path: the payload file written by `save`.
        template: a pytree with the expected structure (e.g. freshly initialised params).

    Returns:
        (the restored tree, its metadata).

    Raises:
        CheckpointError: missing file, hash mismatch (corrupt or truncated), undecodable
            payload, or a structure that does not match `template`.
    """
    path = Path(path)
    meta = load_metadata(path)
    try:
        payload = path.read_bytes()
    except FileNotFoundError as e:
        raise CheckpointError(f"no checkpoint at {path}") from e
    digest = hashlib.sha256(payload).hexdigest()
    if digest != meta.get("sha256"):
        raise CheckpointError(
            f"corrupt checkpoint {path}: sha256 {digest[:12]} does not match the recorded "
            f"{str(meta.get('sha256'))[:12]} ({len(payload)} bytes, expected {meta.get('bytes')})"
        )
    try:
        state = serialization.msgpack_restore(payload)
    except Exception as e:  # msgpack raises several unrelated types on bad input
        raise CheckpointError(f"corrupt checkpoint {path}: cannot decode ({e})") from e
    try:
        tree = serialization.from_state_dict(template, state)
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(
            f"checkpoint {path} does not fit the expected structure "
            f"(a different network config?): {e}"
        ) from e
    _check_shapes(template, tree, path)
    return tree, meta


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
