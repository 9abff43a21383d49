"""Ships a run's exported params with their provenance into `checkpoints/<game>/`, its log into
`results/<game>/training/`; a variant (kept, not shipped) goes whole into `archive/<game>/`."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from rtplan.harness import checkpoint as ckpt
from rtplan.harness.layout import ARCHIVE, RESULTS, TRAINING_LOGS
from rtplan.harness.run import BEST, LOG


def ship(
    run_dir: str | Path,
    dest_root: str | Path | None,
    *,
    file_name: str,
    what: str,
    describe: Callable[[dict, dict], str],
    variant: str | None = None,
    notes: Sequence[str] = (),
    readme: str = "README.md",
    log_name: str = LOG,
) -> Path:
    """Copies `<run>/<file_name>` and its metadata to `<dest_root>/<game>/` with a provenance
    README, and the run's `log.csv` to `<dest_root>/../results/<game>/training/<log_name>`: the
    checkpoints folder holds only what ships (`harness.layout`), the log is a measurement.

    A `variant` such as "train-k2" is a planner kept for comparisons, not shipped: its params,
    metadata, README and `log.csv` go to `<dest_root>/../archive/<game>/<variant>/`. The README
    states the command, seed, iteration, frames, git commit and the evaluation of the shipped
    params (the best's when they are the run's best).

    Args:
        run_dir: the run folder (`harness.run.Run`'s output).
        dest_root: the checkpoints root (None: `harness.checkpoint.checkpoint_root()`); the
            results and the archive are its siblings, as in a checkout.
        file_name: the exported params file (the algorithm's `export_file`).
        what: what the params are, for the README title (e.g. "planner").
        describe: `(eval columns, train_config dict) -> str`, the README's evaluation text
            (called with {} when the run recorded no evaluation).
        variant: an optional plain folder name.
        notes: extra README lines (e.g. files the caller adds to the folder).
        readme, log_name: the names the provenance and the run's `log.csv` get (a gate ships
            beside its game's planner, whose README.md and planner-log.csv those are).

    Returns:
        The shipped params file.
    """
    if variant is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", variant):
        raise ValueError(f"variant {variant!r} must be a plain folder name ([A-Za-z0-9_.-])")
    run = Path(run_dir)
    src = run / file_name
    meta = ckpt.load_metadata(src)  # verifies the file
    game = meta["game"]
    root = ckpt.checkpoint_root(dest_root)
    if variant is None:
        dest = root / game
        log = root.parent / RESULTS / game / TRAINING_LOGS / log_name
    else:
        dest = root.parent / ARCHIVE / game / variant
        log = dest / LOG
    for path in (dest / file_name, log):
        path.parent.mkdir(parents=True, exist_ok=True)
    for name in (file_name, file_name + ".json"):
        shutil.copyfile(run / name, dest / name)
    shutil.copyfile(run / LOG, log)
    ev = meta.get("last_eval") or {}
    if meta.get("source") == "best" and (run / BEST).exists():
        best = ckpt.load_metadata(run / BEST)
        if best.get("sha256") == meta.get("sha256"):  # the shipped params are the best's
            ev = best.get("eval") or ev
            meta = dict(meta, iteration=best["iteration"], frames=best["frames"])
    commands = []  # each distinct command once, in order (a run resumed 5 times lists 2)
    for argv in meta.get("commands") or [meta.get("argv", ["?"])]:
        if argv not in commands:
            commands.append(argv)
    produced = ", then ".join(f"`{' '.join(argv)}`" for argv in commands)
    resumed = (  # a run from before `commands` was recorded: its first command is unknown
        "; a resumed run: the settings it resumed are `train_config` in the metadata"
        if "--resume" in commands[0]
        else ""
    )
    lines = [
        f"# {game} {what} checkpoint" + (f" ({variant})" if variant else ""),
        "",
        f"- file: `{file_name}` ({meta.get('bytes', '?')} bytes of params; sha256 "
        f"`{meta.get('sha256', '?')[:16]}...`), metadata in `{file_name}.json`",
        f"- produced by: {produced} ({meta.get('source', '?')} params of the run{resumed})",
        f"- seed {meta.get('seed', '?')}, iteration {meta.get('iteration', '?')}, "
        f"{meta.get('frames', '?')} training frames, git commit `{meta.get('git_commit', '?')}`",
        "- evaluation of these params: "
        + (describe(ev, meta.get("train_config", {})) if ev else "none recorded"),
        f"- training log: `{log.relative_to(root.parent).as_posix()}`",
        *notes,
        "",
    ]
    (dest / readme).write_text("\n".join(lines))
    return dest / file_name
