"""`rtplan eval`: every condition of a game on one seed split, one JSON file per condition.

One module (past ~450 lines) on purpose: `run_conditions` checks the rules, budgets and gate
together before any game plays, and the chunked play, resume and provenance it writes are read
back by the same checks; split, the refusals and the file they guard would drift apart."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import jax
import numpy as np

from rtplan import games
from rtplan.gate.committed.choosers import (
    ABLATIONS,
    POLICY_ONLY,
    check_gate_name,
    condition_names,
    gate_chooser,
)
from rtplan.gate.committed.latency import decision_misses, simulated_deployment
from rtplan.gate.committed.policy import load_gate
from rtplan.gate.committed.triggers import FEATURES, trigger_features
from rtplan.gate.files import check_rules, file_sha256, with_gate_budgets
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.layout import tree_folder
from rtplan.harness.stats import standard_error
from rtplan.planner.configs import with_budgets, with_rules
from rtplan.planner.episodes import (
    Episodes,
    always,
    eval_runner,
    play,
    play_policy_only,
    random_k,
    seeds_of,
)
from rtplan.planner.options import Planner
from rtplan.planner.store import load_planner

__all__ = [
    "condition_file",
    "latency_split",
    "load_conditions",
    "partial_file",
    "plan_split",
    "tree_split",
    "run_conditions",
]

#: The per-episode fields of a condition's record (lists in the order of its seeds).
_PER_EPISODE = ("seeds", "returns", "frames", "ks", "decision_frames", "missed")


def condition_file(out: str | os.PathLike, game_id: str, split: str, name: str) -> Path:
    """`<out>/<game>/<split>/<condition>.json`."""
    return Path(out) / game_id / split / f"{name}.json"


def partial_file(out: str | os.PathLike, game_id: str, split: str, name: str) -> Path:
    """`<out>/<game>/<split>/partial/<condition>.json`: the seeds a chunked condition has
    finished so far (`run_conditions(chunk=...)`); `rtplan report` never reads it."""
    return Path(out) / game_id / split / "partial" / f"{name}.json"


def latency_split(split: str, fps: float) -> str:
    """The results folder of a split played with simulated misses at `fps`: "eval-latency-300fps"
    (never mixed with the simulated clock's, which `rtplan report` reads)."""
    return f"{split}-latency-{fps:g}fps"


def plan_split(split: str) -> str:
    """The results folder of a split played with committed="plan": "tuning-plan" (never mixed
    with the reflex's, which `rtplan report` reads); after `latency_split` where both apply."""
    return f"{split}-plan"


def tree_split(split: str, tree_k: int, *, plan: bool = False) -> str:
    """The results folder of a split played with a tree of `tree_k`-frame edges below the root,
    inside the split's own: "tuning/tree1", or "tuning/plan-tree1" under committed="plan" (the
    shipped planners search with tree_k 0, the option's own k; `rtplan report` reads only the
    split's own files, and the results page folds the sub-folders under the split)."""
    return f"{split}/{tree_folder(tree_k, plan=plan)}"


def _git_commit() -> str | None:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _ks_text(ks: np.ndarray) -> str:
    # Budgets are single digits: one character per decision keeps the files small.
    return "".join(str(int(k)) for k in ks)


def _record(name: str, ep: Episodes, provenance: dict, seconds: float) -> dict:
    rec = {
        **provenance,
        "condition": name,
        "seconds": round(seconds, 1),
        "seeds": ep.seeds.tolist(),
        "returns": ep.returns.tolist(),
        "frames": ep.frames.tolist(),
        "ks": [_ks_text(k) for k in ep.ks],
        "decision_frames": [f.tolist() for f in ep.decision_frames],
        "features": {n: [np.round(v, 3).tolist() for v in vals] for n, vals in ep.features.items()},
    }
    if ep.missed is not None:  # per episode, one character per decision: 1 missed
        rec["missed"] = ["".join("1" if m else "0" for m in row) for row in ep.missed]
        _miss_rate(rec)
    return rec


def _miss_rate(rec: dict) -> None:
    decisions = sum(len(row) for row in rec["missed"])
    rec["miss_rate"] = sum(row.count("1") for row in rec["missed"]) / max(decisions, 1)


def _merge(done: dict | None, more: dict) -> dict:
    """A record of `done`'s seeds followed by `more`'s (the same condition and provenance)."""
    if done is None:
        return more
    rec = {**more, "seconds": round(done["seconds"] + more["seconds"], 1)}
    for key in _PER_EPISODE:
        if key in more:
            rec[key] = done[key] + more[key]
    rec["features"] = {n: done["features"][n] + v for n, v in more["features"].items()}
    if "missed" in rec:
        _miss_rate(rec)
    return rec


def load_conditions(out: str | os.PathLike, game_id: str, split: str) -> dict[str, dict]:
    """Every condition file of a game's split: name -> record (ks as int arrays)."""
    folder = Path(out) / game_id / split
    records = {}
    for path in sorted(folder.glob("*.json")):
        rec = json.loads(path.read_text())
        rec["ks"] = [np.array([int(c) for c in s], np.int64) for s in rec["ks"]]
        records[rec["condition"]] = rec
    return records


def run_conditions(
    game_id: str,
    *,
    split: str = "eval",
    episodes: int = 100,
    conditions: Sequence[str] | None = None,
    planner_file: str | None = None,
    gate_file: str | None = None,
    out: str = "results",
    force: bool = False,
    ablations: bool = False,
    command: str | None = None,
    latency: str = "",
    latency_fps: float = 0.0,
    latency_overhead_ms: float | None = None,
    latency_fallback: str = "game",
    chunk: int | None = None,
    gate_name: str = "gate",
    committed: str | None = None,
    tree_k: int | None = None,
    budgets: Sequence[int] | None = None,
    log=print,
) -> dict[str, Path]:
    """Plays each condition on the split's first `episodes` seeds and writes its file.

    A condition whose file already holds the same seeds, planner and gate (by sha256) is kept
    (so an interrupted evaluation resumes), unless `force`. With `chunk`, a condition plays
    `chunk` seeds at a time and saves the seeds it has finished to `partial_file` after each
    chunk, so a killed long evaluation resumes from its last chunk (a seed plays the same game
    in any batch: `planner.episodes`); the condition's file is written once every seed is done.

    With a `latency` source (`gate.committed.latency.load_latency`) every condition plays a
    simulated deployment at `latency_fps`: each option misses with its budget's probability,
    decision t of seed s drawing the same uniform in every condition
    (`gate.committed.latency.decision_misses`), and a miss plays `latency_fallback` on its landing
    frame. Its files go to the folder `latency_split(split, latency_fps)` and record the misses;
    policy-only plans nothing and misses nothing.

    `gate_name` other than "gate" (e.g. `gate-supervised`) plays `gate_file` as a second gate:
    its condition and file take that name, so it sits beside the shipped gate's and pairs with
    the same seeds (no ablations: they are the shipped gate's).

    `committed` ("reflex" or "plan", `planner.options.COMMITMENTS`; None: the planner
    checkpoint's own, "reflex" for every shipped one) sets what each option's committed frames
    play. Every record holds it; "plan" writes to the folder `plan_split(...)`.

    `tree_k` (None: the checkpoint's, 0 for every shipped one) sets the frames of every edge
    below the search's root (`PlannerConfig.tree_k`); one other than the checkpoint's writes to
    the folder `tree_split(...)`.

    A gate plays under the rules it was trained under only (`rtplan train-gate --committed
    --tree-k`, recorded in its file): the gate beside the planner joins the default conditions
    when its rules are these, and a gate condition under others is refused
    (`gate.files.check_rules`), so its always-k and gate conditions play under the same rules.
    Under "plan" tree_k is what makes the plan a
    plan: with tree_k 0 each edge below the root is the option's k-1 reflex frames and then its
    action, so the next option's k-1 committed frames read reflex frames from the plan and, at
    a fixed k, play exactly what "reflex" plays; with tree_k 1 every frame below the root is
    searched.

    `budgets` (None: the checkpoint's) plays the planner with more budgets
    (`planner.configs.with_budgets`: the checkpoint's and larger ones, each new k at the
    checkpoint's simulations per frame), so always-k conditions past the checkpoint's (k6, k8)
    play; every record holds the budgets and simulations played. The checkpoint's own always-k
    conditions play the same games under either, so their files are kept across the two. A gate
    (and its ablations) chooses among the budgets its file records (the checkpoint's, or
    `train-gate --budgets`'), and a played gate's are the budgets when `budgets` is None
    (`gate.files.with_gate_budgets`); random k chooses among the checkpoint's. Under other
    budgets each is left out of the default conditions and refused by name.

    Returns:
        condition name -> its file.
    """
    planner_file = str(ckpt.planner_file(game_id, planner_file))
    pcfg, pparams, _ = load_planner(game_id, planner_file)
    if games.kind_of(game_id) is games.Kind.CLOCK:
        raise ValueError(f"{game_id} is a clock game: use `rtplan cross-eval` for it")
    own_tree_k, own_budgets = pcfg.tree_k, pcfg.budgets
    # ValueError: an unknown commitment or a negative tree_k.
    pcfg = with_rules(pcfg, committed=committed, tree_k=tree_k)
    if budgets is not None:
        # ValueError: budgets that are not the checkpoint's and larger ones.
        pcfg = with_budgets(pcfg, budgets)
    chosen_gate = gate_file is not None
    gate_file = str(ckpt.gate_file(game_id, gate_file, beside=planner_file, required=False))
    have_gate = Path(gate_file).exists()
    gate_meta = ckpt.load_metadata(gate_file) if have_gate else {}
    if have_gate and not conditions and not chosen_gate:
        # The gate beside the planner joins the default conditions under its own rules only
        # (the shipped gates: reflex, tree_k 0); one given by name is checked when loaded.
        try:
            check_rules(gate_meta, pcfg, gate_file)
        except ckpt.CheckpointError as e:
            log(f"not playing the gate beside the planner: {e}")
            have_gate = False
    plays_gate = any(n.startswith("gate") for n in conditions) if conditions else have_gate
    if plays_gate and have_gate and budgets is None:
        # A gate plays over the budgets its file records (`train-gate --budgets`), and so do
        # the other conditions beside it. CheckpointError: budgets the planner cannot play.
        pcfg = with_gate_budgets(pcfg, gate_meta, gate_file)
    if max(pcfg.budgets) > 9:
        raise ValueError(
            f"budgets {list(pcfg.budgets)}: a condition's file records each decision's k as "
            "one digit, so budgets above 9 are not played"
        )
    planner = Planner(pcfg)
    # A gate that sees the planner's stats, or remembers, has one more input to ablate each.
    shape = gate_meta.get("gate_config", {}) if have_gate else {}
    optional = {"stats": bool(shape.get("stats")), "memory": bool(shape.get("memory"))}
    names = (
        list(conditions)
        if conditions
        else condition_names(pcfg.budgets, gate=have_gate, ablations=ablations, **optional)
    )
    valid = set(condition_names(pcfg.budgets, gate=True, ablations=True, **optional))
    bad = [n for n in names if n not in valid]
    if bad:
        raise ValueError(f"unknown condition {bad[0]!r}: choose from {sorted(valid)}")
    # A gate's head is sized for the budgets its file records, and random k over budgets other
    # than the checkpoint's would be another condition under the same name: each plays over
    # its own budgets only.
    gate_budgets = tuple(gate_meta.get("budgets") or own_budgets)
    refused: dict[tuple[int, ...], list[str]] = {}
    for n in names:
        own = gate_budgets if n.startswith("gate") else own_budgets if n == "random" else None
        if own is not None and own != pcfg.budgets:
            refused.setdefault(own, []).append(n)
    if refused:
        whys = {tuple(ns): _chooser_refusal(b, own_budgets) for b, ns in refused.items()}
        if conditions:
            text = "; ".join(f"conditions {list(ns)} {why}" for ns, why in whys.items())
            raise ValueError(f"{text} (here {list(pcfg.budgets)})")
        log("; ".join(f"not playing {', '.join(ns)}: they {why}" for ns, why in whys.items()))
        names = [n for n in names if not any(n in ns for ns in whys)]
    check_gate_name(gate_name)
    if gate_name != "gate":
        if any(n.startswith("gate") and n != "gate" for n in names):
            raise ValueError(f"{gate_name} plays its gate only: its ablations are not kept")
        names = [gate_name if n == "gate" else n for n in names]
    needs_gate = [n for n in names if n.startswith("gate")]
    gate = gparams = None
    if needs_gate:
        if not Path(gate_file).exists():
            raise FileNotFoundError(
                f"conditions {needs_gate} need a gate, and {gate_file} is missing"
            )
        # CheckpointError: a gate trained under other rules (it names the flags of its own).
        gate, gparams, _ = load_gate(gate_file, planner, planner_file=planner_file)
    seeds = seeds_of(split, episodes)
    if chunk is not None and chunk < 1:
        raise ValueError(f"chunk must be >= 1 seed, got {chunk}")
    step = min(chunk or episodes, episodes)
    folder, probability, sim = split, None, None
    if latency:
        if not latency_fps > 0:
            raise ValueError(f"a latency source needs an FPS > 0, got {latency_fps}")
        _, sim = simulated_deployment(
            latency,
            pcfg,
            latency_fps,
            overhead_ms=latency_overhead_ms,
            fallback=latency_fallback,
            game_id=game_id,
        )
        probability = {int(k): p for k, p in sim["miss_probability"].items()}
        folder = latency_split(split, latency_fps)
        log(f"simulated misses at {latency_fps:g} FPS: {sim['miss_probability']} by budget")
    if pcfg.tree_k != own_tree_k:
        folder = tree_split(folder, pcfg.tree_k, plan=pcfg.committed == "plan")
    elif pcfg.committed == "plan":
        folder = plan_split(folder)
    provenance = {
        "game": game_id,
        "split": split,
        "planner_checkpoint": ckpt.recorded_path(planner_file),
        "planner_sha256": file_sha256(planner_file),
        "budgets": list(pcfg.budgets),
        "simulations": list(pcfg.simulations),
        "horizon": planner.game.horizon,
        "committed": pcfg.committed,
        "tree_k": pcfg.tree_k,
        "command": command,
        **({} if sim is None else {"latency": sim}),
    }
    gate_sha = file_sha256(gate_file) if needs_gate else None
    # Doubling group sizes: a bounded compile set (`planner.episodes.eval_runner`). The gate's
    # conditions play its options as it was trained to (its tree), the others always k: two
    # runners whose executables would add up (XLA:CPU maps ~1,000 regions per option: Tetris'
    # gate and random-k conditions together peaked at 63k of the kernel's default 65,530), so
    # the gate's conditions play first and their runner is released before the others'.
    runners = _RunnerSlot(planner, step)
    features = jax.jit(trigger_features(game_id)) if game_id in FEATURES else None
    written = {}
    for name in sorted(names, key=lambda n: not n.startswith("gate")):
        path = condition_file(out, game_id, folder, name)
        if path.exists() and not force:
            old = json.loads(path.read_text())
            # The budgets played are not compared: an always-k condition plays the same games
            # under any budgets that hold its k (`with_budgets`), a gate only over its own (its
            # sha256 is compared) and random k only over the checkpoint's.
            same = (
                old.get("seeds") == seeds.tolist()
                and old.get("planner_sha256") == provenance["planner_sha256"]
                and old.get("latency") == provenance.get("latency")
                and old.get("committed", "reflex") == provenance.get("committed", "reflex")
                and old.get("tree_k", 0) == provenance.get("tree_k", 0)
            )
            if same and old.get("gate_sha256") == (gate_sha if name.startswith("gate") else None):
                log(f"{name}: kept {path}")
                written[name] = path
                continue
        part_path = partial_file(out, game_id, folder, name)
        want_sha = gate_sha if name.startswith("gate") else None
        rec = None if force else _resumable(part_path, seeds, provenance, want_sha)
        if rec is not None:
            log(f"{name}: resuming after {len(rec['seeds'])} of {len(seeds)} seeds ({part_path})")
        done = 0 if rec is None else len(rec["seeds"])
        while done < len(seeds):
            part = seeds[done : done + step]
            ep, seconds = _play_condition(
                name,
                part,
                planner=planner,
                pparams=pparams,
                runners=runners,
                gate=gate,
                gparams=gparams,
                budgets=pcfg.budgets,
                features=features,
                misses=None if probability is None else decision_misses(part, probability),
                fallback=latency_fallback,
            )
            is_gate = name.startswith("gate")
            more = _record(name, ep, provenance, seconds)
            more["gate_checkpoint"] = gate_file if is_gate else None
            more["gate_sha256"] = want_sha
            more["git_commit"] = _git_commit()
            more["timestamp"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
            rec = _merge(rec, more)
            done += len(part)
            if done < len(seeds):
                _write_json(part_path, rec)
                log(f"{name}: {done} of {len(seeds)} seeds done ({part_path})")
        _write_json(path, rec)
        part_path.unlink(missing_ok=True)
        returns = np.asarray(rec["returns"], np.float64)
        mean, se = returns.mean(), standard_error(returns)
        missed = "" if "miss_rate" not in rec else f", miss rate {100 * rec['miss_rate']:.2f}%"
        log(
            f"{name}: {mean:.2f} +- {se:.2f} over {len(seeds)} {split} seeds{missed} "
            f"({rec['seconds']:.0f} s)"
        )
        written[name] = path
    return {name: written[name] for name in names}


def _chooser_refusal(budgets: tuple[int, ...], own: tuple[int, ...]) -> str:
    """Why conditions that choose among `budgets` (`own`: the planner checkpoint's) are not
    played over others, and how to play them."""
    if budgets == own:
        return (
            f"choose among the planner checkpoint's budgets {list(own)}: play them without "
            "--budgets"
        )
    return (
        f"choose among their gate's budgets {list(budgets)} (its file records them): play "
        f"them without --budgets, or with --budgets {' '.join(map(str, budgets))}"
    )


def _write_json(path: Path, rec: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(rec))
    tmp.replace(path)


def _resumable(path: Path, seeds: np.ndarray, provenance: dict, gate_sha: str | None):
    """The partial record at `path` if it holds a prefix of `seeds` under the same planner,
    gate and latency model, else None (a stale one is replaced when the next chunk is saved)."""
    if not path.exists():
        return None
    try:
        rec = json.loads(path.read_text())
        done = rec["seeds"]
    except (ValueError, KeyError) as e:
        raise ValueError(f"{path} is not a partial evaluation ({e}); delete it or --force") from e
    same = (
        done == seeds[: len(done)].tolist()
        and len(done) < len(seeds)
        and rec.get("planner_sha256") == provenance["planner_sha256"]
        and rec.get("latency") == provenance.get("latency")
        and rec.get("committed", "reflex") == provenance.get("committed", "reflex")
        and rec.get("tree_k", 0) == provenance.get("tree_k", 0)
        and rec.get("gate_sha256") == gate_sha
    )
    return rec if same else None


def _play_condition(
    name, seeds, *, planner, pparams, runners, gate, gparams, budgets, features, misses, fallback
) -> tuple[Episodes, float]:
    """One condition on `seeds`: its episodes and the seconds they took."""
    start = time.perf_counter()
    if name == POLICY_ONLY:
        return play_policy_only(planner, pparams, seeds), time.perf_counter() - start
    is_gate = name.startswith("gate")
    if is_gate:
        choose = gate_chooser(gate, gparams, pparams, zero=ABLATIONS.get(name))
    elif name == "random":
        choose = random_k(budgets, seeds)
    else:
        choose = always(int(name[1:]))
    # Trigger features only where the report uses them: a gate's own play (not its ablations).
    ep = play(
        runners.get(gate.future if is_gate and gate.future is not None else None),
        pparams,
        seeds,
        choose,
        features=features if is_gate and name not in ABLATIONS else None,
        future_params=gate.future_params(gparams) if is_gate else None,
        misses=misses,
        fallback=fallback,
    )
    return ep, time.perf_counter() - start


class _RunnerSlot:
    """One evaluation runner at a time: asking for another future (the gate's tree, or none)
    drops the held runner and clears JAX's caches, so its executables (and the memory maps of
    their code) are freed before the next runner compiles its own."""

    def __init__(self, planner: Planner, episodes: int) -> None:
        self.planner, self.episodes = planner, episodes
        self.held = None
        self.future = None
        self.built = 0

    def get(self, future):
        if self.held is None or future is not self.future:
            if self.held is not None:
                self.held = None
                jax.clear_caches()
            self.held = eval_runner(self.planner, self.episodes, future=future)
            self.future = future
            self.built += 1
        return self.held
