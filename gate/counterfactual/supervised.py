"""The committed gate fitted to counterfactual labels (issue 27, part 1a): supervised, no PPO.

`rtplan counterfactual` measures, per decision state, every budget's return against the fixed
continuation budget K (`gate.counterfactual.values`). A state's label is the budget with the best
mean where it beats K by more than `z` paired SEs over the worlds, else K itself (a tie keeps the
default budget: the gate only moves off K where the evidence says it pays). The gate network is
then fitted by cross-entropy to those labels, its inputs recomputed from the states (each state
is replayed from its seed to its frame along always-K play, exactly as it was sampled, under the
rules the labels were measured under: the fitted gate plays under those only).
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from rtplan.gate.committed.config import GateConfig
from rtplan.gate.committed.policy import Gate, GateInputs
from rtplan.gate.counterfactual.values import chunk_rules, paying, play_to
from rtplan.gate.files import file_sha256
from rtplan.harness import checkpoint as ckpt
from rtplan.planner.batching import OptionRunner

__all__ = ["fit", "fit_gate", "held_out_gain", "label", "load_labels", "state_inputs"]


def label(values: np.ndarray, continuation: int, *, z: float = 2.0) -> np.ndarray:
    """`[S]` budget index per state from `values` `[S, M, K]` (`BranchValues.values`): the
    index with the largest mean over worlds where its paired difference with `continuation`
    (an index) exceeds `z` SEs and 0, else `continuation`."""
    mean, _, pays = paying(values, continuation, z=z)
    best = np.argmax(np.where(pays, mean, -np.inf), axis=1)
    return np.where(pays.any(1), best, continuation).astype(np.int32)


def load_labels(*folders: str | os.PathLike) -> dict:
    """The chunks `rtplan counterfactual` wrote to `folders` (one or more runs of one planner,
    budgets, continuation and rules): seeds `[S]`, frames `[S]`, values `[S, M, K]`, budgets,
    the continuation budget, the planner's sha256 and the rules (`committed`, `tree_k`: the
    chunks', `values.chunk_rules`).

    Raises:
        FileNotFoundError: a folder without chunks or without its summary.
        ValueError: chunks of several continuations, planners, budget sets or rules.
    """
    files, continuations = [], set()
    for folder in folders:
        found = sorted(glob.glob(str(Path(folder) / "chunk-*.json")))
        if not found:
            raise FileNotFoundError(
                f"no counterfactual chunks in {folder} (run rtplan counterfactual)"
            )
        files += found
        summary = Path(folder) / "summary.json"
        if not summary.exists():
            raise FileNotFoundError(f"{folder} has no summary.json (an unfinished run?)")
        continuations.add(int(json.loads(summary.read_text())["continuation"]))
    if len(continuations) != 1:
        raise ValueError(f"the labels mix continuation budgets {sorted(continuations)}")
    parts = [json.loads(Path(f).read_text()) for f in files]
    shas = {p["planner_sha256"] for p in parts}
    if len(shas) != 1:
        raise ValueError(f"the labels mix chunks of {len(shas)} planners")
    if len({tuple(p["budgets"]) for p in parts}) != 1:
        raise ValueError("the labels mix budget sets")
    # A state's value depends on what the committed frames played: labels of other rules are
    # other options, and their states other states.
    rules = {}  # each set of rules -> the first folder measured under it
    for f, p in zip(files, parts, strict=True):
        rules.setdefault(tuple(chunk_rules(p).items()), Path(f).parent)
    if len(rules) != 1:
        seen = "; ".join(
            f"{', '.join(f'{k} {v}' for k, v in r)} in {folder}" for r, folder in rules.items()
        )
        raise ValueError(
            f"the labels mix rules ({seen}): a gate is fitted under one set of rules, so give "
            "folders of one (`rtplan counterfactual --committed --tree-k` writes each to its own)"
        )
    k = len(parts[0]["budgets"])
    values = [np.asarray(p["values"], np.float64) for p in parts if p["seeds"]]
    return {
        "seeds": np.concatenate([np.asarray(p["seeds"], np.int64) for p in parts]),
        "frames": np.concatenate([np.asarray(p["frames"], np.int64) for p in parts]),
        "values": np.concatenate([v.reshape(len(v), -1, k) for v in values]),
        "budgets": tuple(parts[0]["budgets"]),
        "continuation": continuations.pop(),
        "planner_sha256": shas.pop(),
        "rules": dict(rules.popitem()[0]),
    }


def state_inputs(
    gate: Gate, runner: OptionRunner, params, seeds: np.ndarray, frames: np.ndarray, k: int
) -> GateInputs:
    """The gate's inputs `[S]` at the labelled states: game `seeds[i]` replayed along
    always-`k` play to frame `frames[i]` under the runner's rules (`values.play_to`, the play
    `values.decision_states` sampled it with: under committed="plan" the plans carried on
    the way are the ones the labels' play carried)."""
    until = np.asarray(frames)
    _, states, _ = play_to(runner, params, np.asarray(seeds), until, k)
    if not (np.asarray(states.frame) == until).all():
        raise ValueError("a labelled state did not replay to its frame (another planner?)")
    return gate.inputs(params, states)


def fit(
    gate: Gate,
    params,
    inputs: GateInputs,
    targets: np.ndarray,
    *,
    epochs: int = 200,
    lr: float = 1e-3,
    batch: int = 64,
    key: jax.Array,
) -> tuple[object, list[float]]:
    """Adam on the cross-entropy of the gate's logits against `targets` `[S]` (budget
    indices), minibatches of `batch` shuffled per epoch. Returns (params, loss per epoch)."""
    opt = optax.adam(lr)
    state = opt.init(params)
    n = len(targets)
    targets = jnp.asarray(targets)

    def loss_fn(p, idx):
        x = jax.tree.map(lambda a: a[idx], inputs)
        logits, _ = gate.apply(p, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, targets[idx]).mean()

    @jax.jit
    def step(p, s, idx):
        loss, grad = jax.value_and_grad(loss_fn)(p, idx)
        updates, s = opt.update(grad, s, p)
        return optax.apply_updates(p, updates), s, loss

    history = []
    size = min(batch, n)
    for epoch in range(epochs):
        order = np.asarray(jax.random.permutation(jax.random.fold_in(key, epoch), n))
        losses = []
        for i in range(0, n - size + 1, size):
            params, state, loss = step(params, state, jnp.asarray(order[i : i + size]))
            losses.append(float(loss))
        history.append(float(np.mean(losses)))
    return params, history


def held_out_gain(
    gate: Gate,
    inputs: GateInputs,
    targets: np.ndarray,
    values: np.ndarray,
    continuation: int,
    *,
    groups: np.ndarray,
    folds: int = 4,
    epochs: int = 200,
    lr: float = 1e-3,
    key: jax.Array,
) -> tuple[np.ndarray, np.ndarray]:
    """What the fitted gate would gain on states it never saw, before any game is played.

    The states are split into `folds` by `groups` (their game: states of one game are
    correlated, so a game's states stay in one fold); a gate fitted on the other folds picks
    the budget (its argmax) of each held-out state, and the pick is scored with that state's
    counterfactual values: its mean over the worlds minus the continuation's. The pick never
    saw the state's own values, so noise in them biases nothing, unlike a gate scored on the
    states it was fitted to.

    Returns:
        `[S]` the gain of each state's held-out pick over budget index `continuation`, and
        `[S]` the picks (budget indices).
    """
    unique = np.unique(groups)
    if len(unique) < folds:
        raise ValueError(f"{len(unique)} games cannot be split into {folds} folds")
    order = np.asarray(jax.random.permutation(jax.random.fold_in(key, 1 << 20), len(unique)))
    fold_of = dict(zip(unique[order].tolist(), np.arange(len(unique)) % folds, strict=True))
    fold = np.array([fold_of[g] for g in np.asarray(groups).tolist()])
    picks = np.empty(len(targets), np.int32)
    for f in range(folds):
        held = fold == f
        train = jax.tree.map(lambda a, m=~held: a[m], inputs)
        k = jax.random.fold_in(key, f)
        params, _ = fit(
            gate, gate.init_params(k), train, targets[~held], epochs=epochs, lr=lr, key=k
        )
        logits, _ = gate.apply(params, jax.tree.map(lambda a, m=held: a[m], inputs))
        picks[held] = np.asarray(jnp.argmax(logits, -1))
    mean = values.mean(1)
    rows = np.arange(len(picks))
    return mean[rows, picks] - mean[:, continuation], picks


def fit_gate(
    game_id: str,
    labels_dirs: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    *,
    config: GateConfig,
    planner_file: str,
    z: float = 2.0,
    epochs: int = 200,
    lr: float = 1e-3,
    seed: int = 0,
    folds: int = 0,
    budgets: Sequence[int] | None = None,
    command: str | None = None,
    log: Callable[[str], None] = print,
) -> Path:
    """Fits a gate to the labels in `labels_dirs` and writes it to `out` (a `gate.msgpack`
    that `load_gate`, `rtplan eval --gate` and the services take), with the labels'
    provenance; `folds` > 0 first measures the held-out gain (`held_out_gain`) and records it.

    The states are replayed, and the gate's metadata records its planner (`planner_config`),
    under the labels' rules (`committed`, `tree_k` of their chunks): a gate fitted to
    `rtplan counterfactual --committed plan --tree-k 1` labels plays under
    `rtplan eval --committed plan --tree-k 1` only (`gate.files.check_rules`).

    The gate chooses among the labels' budgets: labels of `rtplan counterfactual --budgets`
    (the checkpoint's and larger ones) give a gate over those, whose file records them, so
    `rtplan eval` plays it over them (`gate.files.with_gate_budgets`). `budgets`, when given,
    must be the labels' (a check: the labels set them).

    Raises:
        ValueError: labels that `load_labels` refuses, of another planner, of budgets that
            are not the planner's and larger ones, or of others than `budgets`.
    """
    from rtplan.planner.configs import with_budgets, with_rules
    from rtplan.planner.options import Planner
    from rtplan.planner.store import load_planner

    data = load_labels(*labels_dirs)
    pcfg, pparams, _ = load_planner(game_id, planner_file)
    if file_sha256(planner_file) != data["planner_sha256"]:
        raise ValueError("the labels were measured with another planner")
    if budgets is not None and tuple(budgets) != data["budgets"]:
        raise ValueError(
            f"the labels were measured over budgets {list(data['budgets'])}, not "
            f"{list(budgets)}: a gate is fitted over its labels' budgets (rtplan counterfactual "
            "--budgets measures others)"
        )
    if tuple(pcfg.budgets) != data["budgets"]:
        try:
            pcfg = with_budgets(pcfg, data["budgets"])
        except ValueError as e:
            raise ValueError(f"the labels' budgets {list(data['budgets'])}: {e}") from e
    # The chunks name their rules whatever the checkpoint's own (a file without them was
    # measured under the shipped reflex, tree_k 0): the states replay, and the gate plays,
    # under those.
    pcfg = with_rules(pcfg, **data["rules"])
    continuation = data["continuation"]
    planner = Planner(pcfg)
    gate = Gate(planner, config)
    runner = OptionRunner(planner, max_batch=len(data["seeds"]))
    c = data["budgets"].index(continuation)
    targets = label(data["values"], c, z=z)
    inputs = state_inputs(gate, runner, pparams, data["seeds"], data["frames"], continuation)
    key = jax.random.PRNGKey(seed)
    held = {}
    if folds:
        gain, picks = held_out_gain(
            gate,
            inputs,
            targets,
            data["values"],
            c,
            groups=data["seeds"],
            folds=folds,
            epochs=epochs,
            lr=lr,
            key=key,
        )
        se = float(gain.std(ddof=1) / np.sqrt(len(gain)))
        held = {
            "held_out_folds": folds,
            "held_out_gain": float(gain.mean()),
            "held_out_gain_se": se,
            "held_out_off_continuation": int((picks != c).sum()),
        }
        log(
            f"held out ({folds} folds by game): the fitted gate's picks gain "
            f"{gain.mean():+.3f} +- {se:.3f} per state over k{continuation} "
            f"({held['held_out_off_continuation']} of {len(picks)} picks off k{continuation})"
        )
    params, history = fit(
        gate, gate.init_params(key), inputs, targets, epochs=epochs, lr=lr, key=key
    )
    logits, _ = gate.apply(params, inputs)
    agree = float((np.asarray(jnp.argmax(logits, -1)) == targets).mean())
    counts = {str(b): int((targets == i).sum()) for i, b in enumerate(data["budgets"])}
    log(f"labels per budget {counts}; fit agreement {agree:.3f}, loss {history[-1]:.4f}")
    meta = {
        "kind": "gate",
        **gate.metadata(),
        "planner_checkpoint": ckpt.recorded_path(planner_file),
        "planner_sha256": data["planner_sha256"],
        "trained_by": "supervised",
        "labels": [str(d) for d in labels_dirs],
        "labels_per_budget": counts,
        **held,
        "z": z,
        "epochs": epochs,
        "lr": lr,
        "seed": seed,
        "fit_agreement": agree,
        "final_loss": history[-1],
        "command": command,
        "git_commit": ckpt.git_commit(),
    }
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ckpt.save(out, {"params": params}, meta)
    return out
