"""Ships a gate run's export beside its game's planner: `checkpoints/<game>/gate.msgpack`."""

from __future__ import annotations

from pathlib import Path

from rtplan import harness
from rtplan.gate.clock.config import eval_opponent_name
from rtplan.gate.files import check_trained_over
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.curve import plot_learning_curve
from rtplan.harness.run import LOG

#: Names of the gate's provenance and curve beside the planner's own files, and of its log
#: beside the planner's in the results.
GATE_README = "gate.md"
GATE_LOG = "gate-log.csv"
GATE_CURVE = "gate_learning_curve.png"


def ship_gate(run_dir: str | Path, dest_root: str | Path | None = None) -> Path:
    """Ships `<run>/gate.msgpack` (the run's best params) to `<dest_root>/<game>/gate.msgpack`,
    where the planner service, the env server and `rtplan eval` load it, with its provenance
    (`gate.md`) and learning curve (`gate_learning_curve.png`); its log goes to
    `results/<game>/training/gate-log.csv` (`harness.ship`).

    Raises:
        CheckpointError: the export does not load, or was trained over another planner than
            the one shipped there (the planner service would refuse it).
    """
    run = Path(run_dir)
    dest_root = ckpt.checkpoint_root(dest_root)
    export = run / ckpt.GATE_FILE
    meta = ckpt.load_metadata(export)
    game = meta["game"]
    planner_file = ckpt.planner_file(game, root=dest_root, flag="--dest")
    check_trained_over(meta, planner_file, export)
    tree = (meta.get("gate_config") or {}).get("tree", "always-k")
    if meta.get("kind") == "clock-gate":
        options = (
            "- a clock gate (docs/gate.md, 'Train the clock gate'): per move it picks "
            f"policy-only or a search of {meta.get('simulations')} simulations, charged to its "
            "own clock"
        )
    else:
        options = (
            f"- options' tree: `{tree}` (docs/gate.md); the gate picks among budgets "
            f"{meta.get('budgets')}"
        )
    path = harness.ship(
        run,
        dest_root,
        file_name=ckpt.GATE_FILE,
        what="gate",
        describe=_describe,
        readme=GATE_README,
        log_name=GATE_LOG,
        notes=[
            options,
            f"- learning curve: `{GATE_CURVE}` (drawn from the training log)",
        ],
    )
    plot_learning_curve(run / LOG, path.parent / GATE_CURVE, f"{game} gate training")
    return path


def _opponent_text(name: str) -> str:
    return f"always-{name[1:]}" if name[:1] == "k" and name[1:].isdigit() else name


def _describe(ev: dict, train_cfg: dict) -> str:
    """The README's evaluation text: the greedy gate on tuning seeds during training (a clock
    gate: its score against `eval_opponent` per clock, `gate.clock.train`)."""
    if "eval_score" in ev:
        opponent = eval_opponent_name(train_cfg.get("eval_opponent", 0))
        clocks = ", ".join(
            f"T0 {key[len('eval_t') :]}: {v:.3f}"
            for key, v in ev.items()
            if key.startswith("eval_t") and key[len("eval_t") :].isdigit()
        )
        return (
            f"greedy gate score {ev['eval_score']:.3f} ({clocks}) against "
            f"{_opponent_text(opponent)} at iteration {ev.get('iteration')}, "
            f"mean budget {ev.get('eval_budget', float('nan')):.1f} simulations, on the first "
            f"{train_cfg.get('eval_seeds')} tuning openings with both colours (the openings it "
            "was selected on); `rtplan eval` reports it against the pool on the evaluation "
            "openings"
        )
    return (
        f"greedy gate {ev['eval_mean']:.2f} +- {ev.get('eval_se') or 0:.2f} at iteration "
        f"{ev.get('iteration')}, mean k {ev.get('eval_mean_k', float('nan')):.2f}, on the first "
        f"{train_cfg.get('eval_episodes')} tuning seeds (the seeds it was selected on); "
        "`rtplan eval` reports it on the evaluation seeds"
    )
