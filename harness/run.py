"""The host loop of a training run: run folder, logs, evaluation, best params, checkpoints."""

from __future__ import annotations

import csv
import dataclasses
import datetime
import functools
import math
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from rtplan.harness import checkpoint as ckpt
from rtplan.harness.config import from_dict, to_dict

#: Files of a run folder (the exported params are named by the algorithm).
CHECKPOINT = "checkpoint.msgpack"
BEST = "best.msgpack"
LOG = "log.csv"
TENSORBOARD = "tb"
#: The log columns the harness writes before the algorithm's own.
HEAD = ("iteration", "frames", "wall_time", "iter_seconds", "frames_per_s")

State = TypeVar("State")


class RunConfig(Protocol):
    """What the harness reads from a run's config (a frozen dataclass; the rest is the
    algorithm's)."""

    iterations: int  # iterations of the whole run
    eval_every: int  # evaluate every this many iterations (and after the last); 0: never
    checkpoint_every: int  # checkpoint every this many iterations (and after the last)
    seed: int  # recorded in the metadata


class Algorithm(Protocol[State]):
    """One training algorithm as the harness drives it; see the package docstring."""

    kind: str  # metadata "kind" of the exported params (e.g. "planner")
    export_file: str  # file name of the exported params in the run folder
    name: str  # progress bar label
    columns: tuple[str, ...]  # log columns after `HEAD`: metrics, then evaluation columns
    progress: Mapping[str, str]  # progress bar label -> log column

    def metadata(self) -> dict[str, Any]: ...
    def init(self) -> State: ...
    def step(self, state: State) -> tuple[State, dict[str, float | None]]: ...
    def evaluate(self, state: State, iteration: int) -> tuple[float, dict[str, float]]: ...
    def params(self, state: State) -> Any: ...
    def save(self, state: State) -> tuple[Any, dict[str, Any]]: ...
    def template(self, meta: dict[str, Any]) -> Any: ...
    def restore(self, tree: Any, meta: dict[str, Any]) -> State: ...


def run_config(
    cls: type, run_dir: str | Path, *, resume: bool, given: dict[str, Any], **fixed: Any
) -> Any:
    """The config of a run: when resuming, the checkpoint's with the `given` flags replaced.

    Args:
        cls: the config dataclass.
        run_dir: the run folder.
        resume: continue the folder's checkpoint (when it has none, `Run` refuses later).
        given: fields set on the command line.
        **fixed: fields that must match the saved config (e.g. the game): a different value is
            an error, not an override.

    Raises:
        CheckpointError: a fixed field differs from the checkpoint's, or the checkpoint is bad.
    """
    path = Path(run_dir) / CHECKPOINT
    if not (resume and path.exists()):
        return cls(**given, **fixed)
    saved = from_dict(cls, ckpt.load_metadata(path)["train_config"])
    for name, value in fixed.items():
        if getattr(saved, name) != value:
            raise ckpt.CheckpointError(
                f"{path} was trained with {name}={getattr(saved, name)!r}, not {value!r}"
            )
    return dataclasses.replace(saved, **given)


@functools.cache
def _git_commit() -> str:
    return ckpt.git_commit()


def _process_index() -> int:
    """This process's rank in a `jax.distributed` job (0 when it runs alone)."""
    import jax

    return jax.process_index()


def data_parallel_processes(devices: int, *, eval_every: int) -> int:
    """The processes of this `jax.distributed` job (1 when it runs alone), checked against a
    data-parallel run over a mesh of `devices` devices.

    Several processes run one program whose collectives cross them, so the mesh must span
    every process's devices, and there is no evaluation during training (each process would
    play its own; evaluate the exported params instead).

    Raises:
        ValueError: several processes, and `devices` is not all of their devices or
            `eval_every` is not 0.
    """
    import jax

    processes = jax.process_count()
    if processes > 1 and devices != jax.device_count():
        raise ValueError(
            f"devices={devices}, but the mesh of {processes} processes must span all their "
            f"{jax.device_count()} devices"
        )
    if processes > 1 and eval_every:
        raise ValueError(
            "no evaluation during a run of several processes: set eval_every=0 "
            "(--eval-every 0) and evaluate the exported params (rtplan eval)"
        )
    return processes


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


class Run(Generic[State]):
    """Runs an `Algorithm` into a run folder: checkpoints, logs, evaluation, exported params.

    Files in `out_dir`: `checkpoint.msgpack` (the algorithm's `save` tree; written every
    `checkpoint_every` iterations and after the last), `best.msgpack` (params of the best
    evaluation so far; ties go to the later one), `<export_file>` (the best evaluated params,
    else the latest), each with a `.json` metadata file; `log.csv`, and TensorBoard events in
    `tb/`. Every file's metadata holds the provenance: argv, seed, git commit, timestamp, the
    config (`train_config`) and the algorithm's `metadata()`.

    A resumed run continues the iteration numbering of its checkpoint and drops the log rows
    written after it; a killed run loses at most `checkpoint_every` iterations.

    In a job of several processes (`jax.distributed`) every process runs the iterations and
    only process 0 writes the folder (`writes`); all of them read it to resume.
    """

    def __init__(
        self,
        algo: Algorithm[State],
        cfg: RunConfig,
        out_dir: str | Path,
        *,
        resume: bool = False,
        argv: list[str] | None = None,
        progress: bool = False,
        tensorboard: bool = True,
    ) -> None:
        self.algo = algo
        self.cfg = cfg
        self.out = Path(out_dir)
        self.argv = list(sys.argv if argv is None else argv)
        # Every command that ran this run, first to last (a resumed run adds its own).
        self.commands = [self.argv]
        self.progress = progress
        self.ckpt_path = self.out / CHECKPOINT
        if resume and not self.ckpt_path.exists():
            raise ckpt.CheckpointError(
                f"cannot resume: no checkpoint at {self.ckpt_path} (train without resume to "
                "start a new run)"
            )
        if not resume and self.ckpt_path.exists():
            raise ckpt.CheckpointError(
                f"a checkpoint already exists at {self.ckpt_path}; resume it (--resume) or "
                "choose another output folder"
            )
        self.iteration = 0
        self.frames = 0
        self.wall_time = 0.0
        self.last_eval: dict | None = None
        self.best_score = -math.inf
        self.best_params = None
        self.state: State = self._resume() if resume else algo.init()
        self.columns = (*HEAD, *algo.columns)
        self.writes = _process_index() == 0
        self._tb = None
        if not self.writes:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        self._init_log()
        if tensorboard:
            from tensorboardX import SummaryWriter

            self._tb = SummaryWriter(str(self.out / TENSORBOARD), purge_step=self.iteration + 1)

    # ---- checkpoint I/O ----

    def _resume(self) -> State:
        saved = ckpt.load_metadata(self.ckpt_path)
        try:
            template = self.algo.template(saved)
        except ckpt.CheckpointError as e:
            raise ckpt.CheckpointError(f"cannot resume {self.ckpt_path}: {e}") from e
        tree, meta = ckpt.load(self.ckpt_path, template)
        state = self.algo.restore(tree, meta)
        self.iteration = int(meta["iteration"])
        self.frames = int(meta["frames"])
        self.wall_time = float(meta.get("wall_time", 0.0))
        self.last_eval = meta.get("last_eval")
        self.commands = [*meta.get("commands", [meta.get("argv", ["?"])]), self.argv]
        if (self.out / BEST).exists():
            best, best_meta = ckpt.load(self.out / BEST, {"params": self.algo.params(state)})
            self.best_params = best["params"]
            self.best_score = float(best_meta["eval"]["score"])
        return state

    def metadata(self) -> dict[str, Any]:
        """Provenance written into every file of the run."""
        return {
            **self.algo.metadata(),
            "train_config": to_dict(self.cfg),
            "iteration": self.iteration,
            "seed": self.cfg.seed,
            "frames": self.frames,
            "wall_time": self.wall_time,
            "last_eval": self.last_eval,
            "argv": self.argv,
            "commands": self.commands,
            "git_commit": _git_commit(),
            "timestamp": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }

    def save_checkpoint(self) -> None:
        """Writes `checkpoint.msgpack` (atomically) and refreshes the exported params."""
        tree, extra = self.algo.save(self.state)
        ckpt.save(self.ckpt_path, tree, {**self.metadata(), "kind": "train_state", **extra})
        self.export()

    def export(self) -> Path:
        """Writes the exported params: the best evaluated, else the latest."""
        best = self.best_params is not None
        params = self.best_params if best else self.algo.params(self.state)
        meta = dict(self.metadata(), kind=self.algo.kind, source="best" if best else "latest")
        if best:
            # The params' own provenance: the iteration, frames and evaluation of the best.
            meta["params_from"] = ckpt.load_metadata(self.out / BEST).get("eval")
        path = self.out / self.algo.export_file
        ckpt.save(path, {"params": params}, meta)
        return path

    def _save_best(self, score: float, columns: dict[str, float]) -> None:
        self.best_score = score
        self.best_params = self.algo.params(self.state)
        meta = dict(
            self.metadata(),
            kind=self.algo.kind,
            source="best",
            eval=dict(columns, score=score, iteration=self.iteration),
        )
        ckpt.save(self.out / BEST, {"params": self.best_params}, meta)

    # ---- logs ----

    def _init_log(self) -> None:
        path = self.out / LOG
        rows = []
        if path.exists():
            with path.open(newline="") as f:
                rows = [r for r in csv.DictReader(f) if int(r["iteration"]) <= self.iteration]
        # Rows past the checkpoint belong to iterations that the resumed run repeats.
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.columns)
            writer.writeheader()
            writer.writerows({k: r.get(k, "") for k in self.columns} for r in rows)

    def _log(self, row: dict) -> None:
        with (self.out / LOG).open("a", newline="") as f:
            csv.DictWriter(f, fieldnames=self.columns).writerow(
                {k: _fmt(row.get(k)) for k in self.columns}
            )
        if self._tb is not None:
            for k, v in row.items():
                if k != "iteration" and v is not None and math.isfinite(v):
                    self._tb.add_scalar(k, v, self.iteration)
            self._tb.flush()

    # ---- training ----

    def step(self) -> dict:
        """Runs one iteration (with its evaluation and checkpoint when due); returns its row."""
        cfg = self.cfg
        start = time.perf_counter()
        self.state, metrics = self.algo.step(self.state)
        seconds = time.perf_counter() - start
        self.iteration += 1
        self.frames += int(metrics["frames"])
        row = dict(
            metrics,
            iteration=self.iteration,
            frames=self.frames,
            iter_seconds=seconds,
            frames_per_s=metrics["frames"] / seconds,
        )
        last = self.iteration == cfg.iterations
        if cfg.eval_every and (self.iteration % cfg.eval_every == 0 or last):
            score, columns = self.algo.evaluate(self.state, self.iteration)
            row.update(columns)
            self.last_eval = dict(columns, iteration=self.iteration)
            if score >= self.best_score and self.writes:
                self._save_best(score, columns)
        self.wall_time += time.perf_counter() - start
        row["wall_time"] = self.wall_time
        if not self.writes:
            return row
        self._log(row)
        if (cfg.checkpoint_every and self.iteration % cfg.checkpoint_every == 0) or last:
            self.save_checkpoint()
        return row

    def run(self) -> dict | None:
        """Trains until `cfg.iterations`; returns the last row (None if nothing was left)."""
        from tqdm import tqdm

        row = None
        bar = tqdm(
            total=self.cfg.iterations,
            initial=self.iteration,
            file=sys.stderr,
            disable=not self.progress,
            desc=self.algo.name,
        )
        try:
            while self.iteration < self.cfg.iterations:
                row = self.step()
                bar.update(1)
                post = {"fps": f"{row['frames_per_s']:.0f}"}
                post.update(
                    (label, _fmt(row[col]))
                    for label, col in self.algo.progress.items()
                    if row.get(col) is not None
                )
                bar.set_postfix(post)
        finally:
            bar.close()
            self.close()
        return row

    def close(self) -> None:
        """Closes the TensorBoard writer (the other files are closed after every write)."""
        if self._tb is not None:
            self._tb.close()
            self._tb = None
