"""The checkout's folders besides the shipped checkpoints, and the one index of the results.

- `checkpoints/<game>/` (`harness.checkpoint.checkpoint_root`, found by `harness.assets`): only
  what ships (in the wheel and the image): the planner and gate params, their provenance READMEs
  and learning curves.
- `results/<game>/<topic>/` (`results_root`): everything measured: calibration, cross-eval
  tables, the planner's 100-episode evaluations, the training logs the curves are drawn from,
  `rtplan eval`/`report`'s files. Committed, not shipped.
- `archive/<game>/<run>/` (`archive_root`): the training runs kept in git (resumable state of
  what shipped or was compared, the planners replaced, variants such as `train-k2`). Committed,
  not shipped.
- `runs/`: scratch output of commands (ignored by git).
- `replays/` (`replays_root`): the replay files the env server records, in a checkout; an
  installed package keeps them in the per-user data directory instead.

`result_index(root)` is the one listing of what `results/` holds, as the results page shows it.
It runs past ~450 lines because `RESULT_KINDS` is the one table of every results file's caption
and command, which the results page, `rtplan report` and the layout tests all read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rtplan.harness.assets import CHECKOUT

#: Folder names at the checkout's root.
RESULTS, ARCHIVE = "results", "archive"
#: The topic folder (under `results/<game>/`) of the training logs that ship copies there.
TRAINING_LOGS = "training"

#: What the results index lists, by file suffix (replays: the annotated games the replay page
#: shows, `rtplan annotate-games`).
FIGURES, TABLES, REPLAYS = (".png", ".svg"), (".csv", ".json"), (".jsonl",)


def results_root(explicit: str | os.PathLike | None = None) -> Path:
    """`explicit` when given, else the checkout's `results/` (beside the packages) when the code
    runs from a checkout, else `./results`."""
    return _beside_packages(RESULTS, explicit)


def tree_folder(tree_k: int, *, plan: bool = False) -> str:
    """The sub-folder of results measured with a tree of `tree_k`-frame edges below the
    search's root (the shipped planners search with tree_k 0, the option's own k): "tree1", or
    "plan-tree1" when the committed frames follow the previous option's plan. `rtplan eval`
    puts it inside the split's folder, `rtplan counterfactual` inside its topic's."""
    return f"{'plan-' if plan else ''}tree{tree_k}"


def budgets_folder(budgets) -> str:
    """The sub-folder of results measured over budgets other than the planner checkpoint's
    (`--budgets`): "budgets-1-2-3-4-5-6-7-8". `rtplan counterfactual` puts it after the rules'
    folder, since its values are per budget branched; `rtplan eval` needs none (an always-k
    condition plays the same games under any budgets that hold its k, and a gate is its file)."""
    return "budgets-" + "-".join(str(int(k)) for k in budgets)


def archive_root(explicit: str | os.PathLike | None = None) -> Path:
    """`explicit` when given, else the checkout's `archive/` (or `./archive` outside one)."""
    return _beside_packages(ARCHIVE, explicit)


#: The replay files' folder: at a checkout's root, or under the per-user data directory.
REPLAY_FOLDER = "replays"


def replays_root(explicit: str | os.PathLike | None = None) -> Path:
    """Where the env server records its replay files: `explicit` (a `--record-dir` flag or
    `RTPLAN_SERVER_RECORD_DIR`) when given, else the checkout's `replays/` when the code runs
    from a checkout (its pyproject.toml beside the packages, as with `make demo`), else
    `user_data_dir()/replays`: an installed package writes nothing into the directory it is
    run from."""
    if explicit is not None:
        return Path(explicit)
    if (CHECKOUT / "pyproject.toml").is_file():
        return CHECKOUT / REPLAY_FOLDER
    return user_data_dir() / REPLAY_FOLDER


def user_data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The per-user data directory of rtplan, by the XDG base directory spec:
    `$XDG_DATA_HOME/rtplan`, or `~/.local/share/rtplan` where that variable is unset, empty or
    not an absolute path (the spec says to ignore a relative one).

    Args:
        environ: the environment variables (default `os.environ`); `HOME` gives `~`.
    """
    environ = os.environ if environ is None else environ
    data = environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(data):
        home = environ.get("HOME") or os.path.expanduser("~")
        data = os.path.join(home, ".local", "share")
    return Path(data) / "rtplan"


def _beside_packages(name: str, explicit: str | os.PathLike | None) -> Path:
    if explicit is not None:
        return Path(explicit)
    here = CHECKOUT / name
    return here if here.is_dir() else Path(name)


@dataclass(frozen=True)
class ResultGroup:
    """One folder of the results: its figures and tables, as paths relative to the root."""

    title: str
    folder: Path
    figures: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    replays: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ResultKind:
    """What one kind of results file shows, the command that writes it, and where the results
    page puts it (`rank`: 0 the headline gate figures, 1 strength, 2 detail, 3 training logs)."""

    shows: str
    command: str  # "{game}" is the game's folder
    rank: int


#: The deployment ladder as run for the committed games (results/<game>/deploy/).
_LADDER = (
    "rtplan deploy --game {game} --fps 8 10 12 16 24 32 48 64 --until-miss-rate 0.05 "
    "--episodes 3 --max-frames 200"
)
#: Per forced budget at the ladder's breaking FPS F (docs/services.md, Deployment experiments).
_AT_BREAK = (
    "rtplan deploy --game {game} --k K --fps F --episodes 3 --max-frames 200 "
    "--out results/{game}/deploy/kK"
)

#: Results files by name (or "topic/*.suffix"), as `rtplan report`, `calibrate`, `cross-eval`,
#: `eval` and training write them (the captions of the results page: `describe_result`).
RESULT_KINDS: dict[str, ResultKind] = {
    "summary.csv": ResultKind(
        "every game's conditions: mean return ± SE, the gate minus each fixed k (paired)",
        "rtplan report",
        0,
    ),
    "summary.json": ResultKind("the same rows as summary.csv, as JSON", "rtplan report", 0),
    "holdout-summary.csv": ResultKind(
        "the pre-registered evaluation (docs/preregistration.md): every finished condition on "
        "the 400 holdout seeds, the gate minus each (paired)",
        "rtplan report",
        0,
    ),
    "holdout-summary.json": ResultKind(
        "the same rows as holdout-summary.csv, as JSON", "rtplan report", 0
    ),
    "main.png": ResultKind(
        "the gate (red) against every fixed budget k, the policy-only player and random: mean "
        "return ± SE over the same paired evaluation seeds",
        "rtplan report",
        0,
    ),
    "profile.png": ResultKind(
        "the gate's strategy profile: the share of its decisions at each k over the episode",
        "rtplan report",
        0,
    ),
    "triggers.png": ResultKind(
        "state features at the gate's decisions, by the k it chose", "rtplan report", 2
    ),
    "ablations.png": ResultKind(
        "the gate with one of its inputs zeroed at evaluation", "rtplan report", 2
    ),
    "calibration.png": ResultKind(
        "planning quality and batch-1 latency against the number of simulations",
        "rtplan calibrate --game {game}",
        1,
    ),
    "calibration.csv": ResultKind(
        "the calibration's numbers: quality ± SE and latency per simulation count",
        "rtplan calibrate --game {game}",
        1,
    ),
    "cross_eval.csv": ResultKind(
        "the planner at every eval-k and simulation count (paper appendix G)",
        "rtplan cross-eval --game {game} --checkpoints checkpoints/{game}/planner.msgpack",
        1,
    ),
    "planner-eval/*.csv": ResultKind(
        "the shipped planner's strength: mean ± SE over 100 evaluation episodes (the clock "
        "games: its score against the opponent, on an unlimited clock)",
        "rtplan cross-eval --game {game} --checkpoints checkpoints/{game}/planner.msgpack "
        "--episodes 100",
        1,
    ),
    "eval/*.json": ResultKind(
        "one condition of the evaluation: per-episode returns, budgets and gate features",
        "rtplan eval --game {game}",
        2,
    ),
    "latency-eval/*.json": ResultKind(
        "one condition played with simulated deployment misses (each option misses with its "
        "budget's measured probability at F FPS; the same draws in every condition)",
        "rtplan eval --game {game} --latency results/{game}/deploy/fps_F.jsonl,... "
        "--latency-fps F --conditions gate k1 k2 k3 k4",
        2,
    ),
    "latency-eval/gate-*.json": ResultKind(
        "the latency-aware gate (the shipped gate fine-tuned against the deploy rows' misses at "
        "the breaking FPS), played with the same simulated misses as gate.json beside it "
        "(its file, renamed from gate.json)",
        "rtplan eval --game {game} --latency ... --latency-fps F --conditions gate "
        "--gate archive/{game}/gate-latency-Ffps/best.msgpack --out runs/latency-aware",
        2,
    ),
    "holdout/**.json": ResultKind(
        "one condition of a pre-registered evaluation under other rules (plan-tree1: the "
        "committed frames follow the previous option's plan, every frame below the root "
        "searched; docs/preregistration.md): per-episode returns and budgets on the 400 "
        "holdout seeds (bench.plan_curves --split holdout pairs them)",
        "rtplan eval --game {game} --split holdout --episodes 400 --chunk 50 --committed plan "
        "--tree-k 1 --gate PATH --conditions gate k1 k3",
        2,
    ),
    "holdout/*.json": ResultKind(
        "one condition of the pre-registered evaluation (docs/preregistration.md): per-episode "
        "returns and budgets on the 400 holdout seeds",
        "rtplan eval --game {game} --split holdout --episodes 400 --chunk 50",
        2,
    ),
    "partial/*.json": ResultKind(
        "the seeds a chunked evaluation has finished so far (resumed by the same command; "
        "never reported)",
        "rtplan eval --game {game} --split holdout --episodes 400 --chunk 50",
        3,
    ),
    "tuning/**.json": ResultKind(
        "one condition on the tuning seeds under another search (--tree-k: every frame below "
        "the root searched) or commitment (plan-: the committed frames follow the previous "
        "option's plan): per-episode returns and budgets (bench.plan_curves pairs them)",
        "rtplan eval --game {game} --split tuning --episodes 32 --committed plan --tree-k 1 "
        "--conditions k2 k3 k4",
        2,
    ),
    "tuning/*.json": ResultKind(
        "one fixed k on the tuning seeds (they pick the best fixed k)",
        "rtplan eval --game {game} --split tuning",
        2,
    ),
    "midpeak-sweep.csv": ResultKind(
        "midpeak's plan tuned per T0 on the tuning openings: each (centre, width) against each "
        "opponent of the pool, score over the games of a cell",
        "rtplan eval --game {game} --tune-midpeak --episodes 12",
        2,
    ),
    # In clock-eval/ a name's own kind must come before the folder's "clock-eval/*.csv".
    "clock-eval/midpeak-*.csv": ResultKind(
        "midpeak's plan tuned per T0 on the tuning openings: each (centre, width) against each "
        "opponent of the pool, score over the games of a cell",
        "rtplan eval --game {game} --tune-midpeak --episodes 12",
        2,
    ),
    "clock-eval/fixed-*.csv": ResultKind(
        "the clock-aware bar's tuning: each fixed budget against each opponent of the pool per "
        "T0 on tuning openings, score over the games of a cell",
        "rtplan eval --game {game} --tune-fixed",
        2,
    ),
    "clock-eval/fixed-*.json": ResultKind(
        "the clock-aware bar: the fixed budget per T0 chosen on tuning openings (k-per-t0 in "
        "the tables), with its tuning scores and openings",
        "rtplan eval --game {game} --tune-fixed",
        2,
    ),
    # The clock games' splits (docs/preregistration.md): eval-* the pre-registered evaluation,
    # holdout-* Speed Hex's pre-registered replication, tuning-* the openings that choose.
    "clock-eval/eval-*.csv": ResultKind(
        "the clock game's pre-registered evaluation (docs/preregistration.md, Clock games) on the "
        "eval split's first 50 openings, both colours, 3,000 games per player: expected score "
        "of each player against the pool per T0 (all games and unique games), paired "
        "differences against the best fixed budget and the best heuristic",
        "rtplan eval --game {game}",
        1,
    ),
    "clock-eval/eval-*.json": ResultKind(
        "the same scores as eval-scores.csv (the eval split, pre-registered), as JSON",
        "rtplan eval --game {game}",
        2,
    ),
    "clock-eval/eval-*.png": ResultKind(
        "the clock game's figures on the eval split (pre-registered): score per T0, the strategy "
        "profile (budget per normalised move) and the remaining clock over the game",
        "rtplan report",
        1,
    ),
    "clock-eval/tuning-*.csv": ResultKind(
        "the clock game's scores on the tuning openings (not pre-registered: they choose "
        "among gates and settings), per player and T0",
        "rtplan eval --game {game} --split tuning",
        2,
    ),
    "clock-eval/tuning-*.json": ResultKind(
        "the same tuning-opening scores as tuning-scores.csv (not pre-registered), as JSON",
        "rtplan eval --game {game} --split tuning",
        2,
    ),
    "clock-eval/*.csv": ResultKind(
        "the clock game's evaluation: expected score of each player against the pool per T0 "
        "(all games and unique games), paired differences against the best fixed budget and "
        "the best heuristic",
        "rtplan eval --game {game}",
        1,
    ),
    "clock-eval/holdout-*.json": ResultKind(
        "the same scores as holdout-scores.csv (the holdout split, a pre-registered "
        "replication), as JSON",
        "rtplan eval --game {game} --split holdout",
        2,
    ),
    "clock-eval/*.json": ResultKind(
        "the same scores as the CSV beside it, as JSON", "rtplan eval --game {game}", 2
    ),
    "clock-eval/*.png": ResultKind(
        "the clock game's figures: score per T0, the strategy profile (budget per normalised "
        "move) and the remaining clock over the game",
        "rtplan report",
        1,
    ),
    "clock-eval/holdout-*.png": ResultKind(
        "the clock game's holdout figures (a pre-registered second look, docs/preregistration.md)"
        ": score per T0, strategy profile, remaining clock",
        "rtplan report",
        2,
    ),
    "clock-eval/holdout-*.csv": ResultKind(
        "the clock game's holdout scores (a pre-registered replication on the holdout split's "
        "first 50 openings, docs/preregistration.md): per player and T0, and every gate minus "
        "every player, paired (holdout-pairs.csv)",
        "rtplan eval --game {game} --split holdout",
        2,
    ),
    "clock-eval/**.json": ResultKind(
        "one cell of the clock evaluation: a player against one opponent of the pool at one "
        "T0, every game's score, plies, options and clocks (under <split>/<player>/)",
        "rtplan eval --game {game}",
        2,
    ),
    "clock-gate-runs/**.json": ResultKind(
        "one cell of the first clock gates and the baselines against the pool (tuning "
        "openings, T0 300 and 2300): every game's score, options and clocks; the command is in "
        "the file (docs/results.md, clock gate: first runs)",
        "rtplan eval --game {game} --split tuning --episodes 16 --t0 300 2300",
        2,
    ),
    "counterfactual/**.json": ResultKind(
        "counterfactual budget values: every budget from copies of the same decision states "
        "(clock games: positions, every option at the same clocks), per state and re-drawn "
        "future (chunk-*.json), and where a budget beats the fixed one "
        "by more than 2 paired SE (summary.json); under plan-treeM/ every branch searches "
        "every M frames below the root and commits to the previous option's plan "
        "(--committed plan --tree-k M), and under budgets-1-...-K/ it branches the "
        "checkpoint's budgets and larger ones (--budgets)",
        "rtplan counterfactual --game {game} --continuation K",
        2,
    ),
    "counterfactual/**.csv": ResultKind(
        "clock games: the cross-fitted oracle room over the fixed budget by feature of the "
        "position (ply, clocks, the planner's uncertainty, whether the largest search changes "
        "the move), a row per quantile bin",
        "rtplan counterfactual --game {game} --t0 T0 --continuation K",
        2,
    ),
    "deploy/*.png": ResultKind(
        "the agent played live against the clock at each FPS: return (and its simulated-clock "
        "return on the same seeds), deadline miss rate and p95 slack",
        _LADDER,
        1,
    ),
    "deploy/*.csv": ResultKind(
        "the deployment experiment, a row per FPS: return ± SE, deployed - simulated (paired), "
        "miss rate, latency and slack, the budgets played",
        _LADDER,
        2,
    ),
    "deploy/*.json": ResultKind(
        "one FPS of the deployment experiment (or all of them, deploy.json): returns, paired "
        "difference, latency per k, misses, slack",
        _LADDER,
        2,
    ),
    "deploy/*.jsonl": ResultKind(
        "one FPS of the deployment experiment as logs: a line per frame (fps_F.jsonl: action, "
        "budget, landing, provenance, latency, slack) or per episode (fps_F.episodes.jsonl: "
        "the inputs, the return, the session's counters)",
        _LADDER,
        2,
    ),
    "deploy/**.jsonl": ResultKind(
        "a forced budget's (k<K>/) or a gate file's (gate-<sha256>/) deployment at the breaking "
        "point's FPS as logs: a line per frame (fps_F.jsonl) or per episode (fps_F.episodes.jsonl)",
        _AT_BREAK,
        2,
    ),
    "deploy/**.png": ResultKind(
        "the same experiment for one forced budget (k<K>/) or one gate file (gate-<sha256>/) at "
        "the breaking point's FPS: the latency a latency-aware gate is trained against, or the "
        "live comparison of two gates",
        _AT_BREAK,
        2,
    ),
    "deploy/**.csv": ResultKind(
        "a forced budget's (k<K>/) or a gate file's (gate-<sha256>/) deployment at the "
        "breaking point's FPS, a row per FPS",
        _AT_BREAK,
        2,
    ),
    "deploy/**.json": ResultKind(
        "a forced budget's (k<K>/) or a gate file's (gate-<sha256>/) deployment at the "
        "breaking point's FPS: returns, paired difference, latency, misses",
        _AT_BREAK,
        2,
    ),
    # The deploy ladder past the breaking point before and after issue 42's no-cliff work
    # (docs/results.md, "Deployment past the breaking point"): no-cliff/ the loaded runs,
    # no-cliff/quiet/ the quiet ones, each side's files in run<i>/before/ and run<i>/after/.
    "no-cliff/*.csv": ResultKind(
        "the deploy ladder past the breaking point before and after the no-cliff work (a late "
        "search no longer delays the next decision), a row per run and FPS: misses / landings",
        "rtplan deploy --game {game} --fps F ... --episodes 3 --max-frames 200 --no-pin, from a "
        "checkout of 05c75c6 (before) and of the no-cliff branch (after; merged as 90704d3)",
        2,
    ),
    "quiet/*.csv": ResultKind(
        "the deploy ladder past the breaking point before and after the no-cliff work on a "
        "quiet machine, a row per run and FPS: misses / landings, and the FPS as a multiple of "
        "the breaking FPS",
        "python -m bench.deploy_ladder",
        2,
    ),
    **{
        f"{side}/*{suffix}": ResultKind(
            f"one side ({side}) of the deploy ladder before and after the no-cliff work, "
            + ("a row per FPS" if suffix == ".csv" else "one FPS or all: returns, latency, misses"),
            "python -m bench.deploy_ladder",
            2,
        )
        for side in ("before", "after")
        for suffix in (".csv", ".json")
    },
    **{
        f"{side}/*.jsonl": ResultKind(
            f"one side ({side}) of the deploy ladder before and after the no-cliff work, one FPS "
            "as logs: a line per frame (fps_F.jsonl) or per episode (fps_F.episodes.jsonl)",
            "python -m bench.deploy_ladder",
            2,
        )
        for side in ("before", "after")
    },
    "games/*.jsonl": ResultKind(
        "a clock-evaluation game where the gate spent big, re-played from its cell with each "
        "move annotated (budget, the gate's probabilities, both clocks, the planner's value, "
        "a note on the big spends): open it in the replay page",
        "rtplan annotate-games --game {game}",
        2,
    ),
    "planner-log.csv": ResultKind(
        "the planner's training log, a row per iteration", "rtplan train-planner --game {game}", 3
    ),
    "gate-log.csv": ResultKind(
        "the gate's training log (PPO), a row per iteration", "rtplan train-gate --game {game}", 3
    ),
}


def describe_result(rel: str) -> ResultKind | None:
    """The kind of the results file at `rel` (relative to the results root), with `{game}` in
    its command filled in from the file's first folder; None for a file of no known kind."""
    path = Path(rel)
    # A name's own kind first (e.g. clock-eval/holdout-*.png), then its folder's.
    folder = path.parent.name
    if re.fullmatch(r"(eval|tuning|holdout)-latency-[\d.]+fps", folder):
        folder = "latency-eval"  # rtplan eval --latency: <split>-latency-<F>fps/
    keys = [f"{folder}/{path.stem.split('-')[0]}-*{path.suffix}"] if "-" in path.stem else []
    keys.append(f"{folder}/*{path.suffix}")
    if len(path.parts) >= 4:  # <game>/<topic>/<sub folders>/<file>: the topic's kind
        keys.append(f"{path.parts[1]}/**{path.suffix}")
    keys.append(path.name)
    kind = next((RESULT_KINDS[k] for k in keys if k in RESULT_KINDS), None)
    if kind is None:
        return None
    game = path.parts[0] if len(path.parts) > 1 else "GAME"
    return ResultKind(kind.shows, kind.command.replace("{game}", game), kind.rank)


#: The folder `rtplan annotate-games` writes its annotated games (the replay page's) into.
REPLAY_TOPIC = "games"


def is_replay(rel: str) -> bool:
    """Whether the results file at `rel` is an annotated game the replay page shows: a
    `.jsonl` in a `games/` folder. Other `.jsonl` files are logs (`rtplan deploy`'s frames and
    episodes), listed as files."""
    path = Path(rel)
    return path.suffix in REPLAYS and path.parent.name == REPLAY_TOPIC


def is_log(rel: str) -> bool:
    """Whether the results file at `rel` is a `.jsonl` log (not an annotated game)."""
    return Path(rel).suffix in REPLAYS and not is_replay(rel)


def result_index(root: str | os.PathLike) -> list[ResultGroup]:
    """Every folder under `root` (the root first, then depth first in name order) that holds
    figures or tables. Titles are the folder's path with " · " between parts ("results" for
    the root), e.g. "snake-rt-v0 · calibration"."""
    base = Path(root)
    if not base.is_dir():
        return []
    groups = []
    for folder, dirs, files in os.walk(base):
        dirs.sort()
        here = Path(folder)
        rel = here.relative_to(base)
        shown = sorted(f for f in files if Path(f).suffix in FIGURES + TABLES + REPLAYS)
        if not shown:
            continue
        as_rel = [(rel / f).as_posix() for f in shown]
        groups.append(
            ResultGroup(
                title=" · ".join(rel.parts) or RESULTS,
                folder=here,
                figures=[p for p in as_rel if Path(p).suffix in FIGURES],
                tables=[p for p in as_rel if Path(p).suffix in TABLES or is_log(p)],
                replays=[p for p in as_rel if is_replay(p)],
            )
        )
    return groups


def is_listed(root: str | os.PathLike, path: str) -> Path | None:
    """The file `root/path` when the index lists it (a figure, table or replay inside `root`),
    else None: the one rule of which files the results page may fetch."""
    base = Path(root).resolve()
    target = (base / path).resolve()
    listed = FIGURES + TABLES + REPLAYS
    if target.is_relative_to(base) and target.suffix in listed and target.is_file():
        return target
    return None
