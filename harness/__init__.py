"""Training harness: typed configs and flags, run folders, logs, checkpoints, resume and ship.

Generic: it imports no game, planner or service code, and no JAX until a checkpoint is read or
written, so a CLI can build its parser before `--devices` sets XLA's flags.

A training algorithm (the planner's expert iteration, the gate's PPO) is an object with the
attributes and methods below (`harness.run.Algorithm`); `Run(algo, cfg, out_dir)` drives it.
Its state is whatever it likes (a pytree of device arrays, usually); the harness only hands it
back:

- `kind`, `export_file`: the exported params' metadata kind and file name (`planner`,
  `planner.msgpack`).
- `name`: progress bar label. `columns`: log columns after the harness's `HEAD` (iteration,
  frames, wall_time, iter_seconds, frames_per_s): metrics, then evaluation columns.
  `progress`: progress bar label -> column.
- `metadata() -> dict`: JSON-able facts written into every file (must hold `game`, which
  `ship` uses as the destination folder).
- `init() -> state`: a new run's state (seeded from the config).
- `step(state) -> (state, metrics)`: one iteration; host floats, `metrics["frames"]` the
  environment frames it consumed (summed into the `frames` column).
- `evaluate(state, iteration) -> (score, columns)`: the best-so-far score and log columns.
- `params(state) -> pytree`: the host params that `best.msgpack` and the export hold.
- `save(state) -> (tree, metadata)`: the checkpoint tree and extra metadata (usually
  `harness.checkpoint.learner_tree`: params, optimizer state, key and extras).
- `template(metadata) -> tree`: the structure of a saved tree, from its metadata (usually
  `harness.checkpoint.learner_template`; raise
  `CheckpointError` for a checkpoint this algorithm cannot continue).
- `restore(tree, metadata) -> state`: the state of a resumed run.

The config (`harness.run.RunConfig`) is a frozen dataclass with `iterations`, `eval_every`,
`checkpoint_every` and `seed`; its fields are declared with `knob(default, help)`, which
`add_flags` turns into `--snake-case` flags and `run_config` merges with a resumed checkpoint's.
`plot_learning_curve` draws a run's log (evaluation and episode returns against frames).

`harness.assets.shipped_dir` finds a shipped folder (checkpoints/, web/): the checkout's, or
an installed wheel's package data; `harness.layout` names the checkout's other folders (results/,
archive/) and indexes the results. `harness.stats` is every layer's one home for standard
errors, paired differences and win-rate intervals. `harness.lazy.lazy_exports` loads a
package's public names on first use (the planner and the gate, whose configs the CLI reads
before JAX may load).

`harness.checkpoint` owns the checkpoint folder's layout (`<root>/<game>/planner.msgpack` and
`gate.msgpack`: `planner_path`, `gate_path`) and answers "which planner (gate) file?" for every
command, service and trainer: `planner_file(game, explicit, root=...)` and `gate_file(game,
explicit, beside=planner, root=...)`, which raise `missing_checkpoint`'s one message for a
missing file.
"""

from rtplan.harness.assets import shipped_dir
from rtplan.harness.checkpoint import (
    GATE_FILE,
    PLANNER_FILE,
    CheckpointError,
    checkpoint_root,
    gate_file,
    gate_path,
    missing_checkpoint,
    planner_file,
    planner_path,
)
from rtplan.harness.config import (
    add_flags,
    add_settings_flags,
    from_args,
    from_dict,
    knob,
    overrides,
    settings_overrides,
    to_dict,
)
from rtplan.harness.curve import plot_learning_curve
from rtplan.harness.run import Algorithm, Run, RunConfig, run_config
from rtplan.harness.shipping import ship
from rtplan.harness.stats import binomial_se, paired, standard_error, wilson_interval

__all__ = [
    "GATE_FILE",
    "PLANNER_FILE",
    "Algorithm",
    "CheckpointError",
    "Run",
    "RunConfig",
    "add_flags",
    "add_settings_flags",
    "checkpoint_root",
    "binomial_se",
    "from_args",
    "from_dict",
    "gate_file",
    "gate_path",
    "knob",
    "missing_checkpoint",
    "overrides",
    "paired",
    "planner_file",
    "planner_path",
    "plot_learning_curve",
    "run_config",
    "settings_overrides",
    "ship",
    "shipped_dir",
    "standard_error",
    "to_dict",
    "wilson_interval",
]
