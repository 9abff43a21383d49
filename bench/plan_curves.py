"""The fixed-k curves of the committed games under each commitment (issue 44 item 2), paired.

Usage: python -m bench.plan_curves [--results results] [--split tuning] [--games ...]

Reads what `rtplan eval` wrote for the split (same seeds in every folder):
- `<split>/`: the shipped search (tree_k 0: every edge below the root is the option's k), its
  committed frames the reflex (the paper);
- `<split>/tree1/`: every frame below the root searched (`--tree-k 1`), committed frames the
  reflex (the control: what the other tree alone changes);
- `<split>/plan-tree1/`: the same tree, committed frames the previous option's plan
  (`--committed plan --tree-k 1`; under tree_k 0 the plan's committed frames are the tree's
  reflex frames, so at a fixed k "plan" plays exactly the reflex).
Prints, per game and k, each setting's mean return +- SE and the paired differences (plan -
reflex on the same tree; plan - the shipped setting; plan - k1), mean +- paired SE; k1 has no
committed frame, so its row is the shipped one in every setting. A k past the checkpoint's
(`rtplan eval --budgets`, e.g. k6 k8) gets a row wherever a setting played it. A gate played
under the plan (`<split>/plan-tree1/gate*.json`) gets a row of its own, paired with k1 and with
every budget played under the plan (`<cond>_minus_k<j>`). Rows also go to `--csv`.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from bench._common import RESULTS, git_commit, utc_now
from rtplan.harness.stats import paired, standard_error

SETTINGS = {"shipped": "", "reflex-tree1": "/tree1", "plan-tree1": "/plan-tree1"}
GAMES = ("snake-rt-v0", "tetris-rt-v0", "pacman-rt-v0")


def _returns(root: Path, game: str, folder: str, k: int) -> tuple[list[int], list[float]] | None:
    path = root / game / folder / f"k{k}.json"
    if not path.exists():
        return None
    rec = json.loads(path.read_text())
    return list(rec["seeds"]), list(rec["returns"])


def _budgets(root: Path, game: str, split: str) -> list[int]:
    """Every k some setting played for `game` on `split`, ascending."""
    found = {
        int(m[1])
        for suffix in SETTINGS.values()
        for path in (root / game / f"{split}{suffix}").glob("k*.json")
        if (m := re.fullmatch(r"k(\d+)\.json", path.name))
    }
    return sorted(found)


def curves(root: Path, split: str, games) -> list[dict]:
    rows = []
    for game in games:
        k1 = _returns(root, game, split, 1)
        for k in _budgets(root, game, split):
            got = {}
            for name, suffix in SETTINGS.items():
                folder = split if k == 1 else f"{split}{suffix}"
                got[name] = _returns(root, game, folder, k)
            played = [pair for pair in got.values() if pair is not None]
            seeds = played[0][0]
            row = dict(game=game, k=k, episodes=len(seeds))
            for name, pair in got.items():
                if pair is None:
                    continue
                if pair[0] != seeds:
                    raise SystemExit(f"{game} k{k} {name}: other seeds than the other settings'")
                row[f"{name}_mean"] = round(sum(pair[1]) / len(pair[1]), 3)
                row[f"{name}_se"] = round(standard_error(pair[1]), 3)
            for a, b in (("plan-tree1", "reflex-tree1"), ("plan-tree1", "shipped")):
                if got[a] is not None and got[b] is not None:
                    mean, se = paired(got[a][1], got[b][1])
                    row[f"{a}_minus_{b}"] = round(mean, 3)
                    row[f"{a}_minus_{b}_se"] = round(se, 3)
            if got["plan-tree1"] is not None and k1 is not None:
                if k1[0] != seeds:
                    raise SystemExit(f"{game} k1: other seeds than k{k}'s")
                mean, se = paired(got["plan-tree1"][1], k1[1])
                row["plan-tree1_minus_k1"] = round(mean, 3)
                row["plan-tree1_minus_k1_se"] = round(se, 3)
            rows.append(row)
        rows += _gates(root, game, split, k1, {r["k"]: r for r in rows})
    return rows


def _gates(root: Path, game: str, split: str, k1, by_k: dict) -> list[dict]:
    """A row per gate played under the plan: its mean, and it minus k1 and minus each plan k."""
    rows = []
    folder = root / game / f"{split}/plan-tree1"
    for path in sorted(folder.glob("gate*.json")):
        rec = json.loads(path.read_text())
        seeds, returns = list(rec["seeds"]), list(rec["returns"])
        row = dict(game=game, k=path.stem, episodes=len(seeds))
        row["plan-tree1_mean"] = round(sum(returns) / len(returns), 3)
        row["plan-tree1_se"] = round(standard_error(returns), 3)
        # k1 commits no frame: its plan file, where one was played, else the split's own.
        versus = {k: _returns(root, game, f"{split}/plan-tree1", k) for k in by_k}
        versus[1] = versus.get(1) or k1
        for k, pair in sorted(versus.items()):
            if pair is None:
                continue
            if pair[0] != seeds:
                raise SystemExit(f"{game} {path.stem}: other seeds than k{k}'s")
            mean, se = paired(returns, pair[1])
            key = "plan-tree1_minus_k1" if k == 1 else f"minus_k{k}"
            row[key], row[f"{key}_se"] = round(mean, 3), round(se, 3)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=Path("results"))
    p.add_argument("--split", default="tuning")
    p.add_argument("--games", nargs="+", default=list(GAMES))
    p.add_argument("--csv", type=Path, default=RESULTS / "plan_curves.csv")
    args = p.parse_args(argv)
    rows = curves(args.results, args.split, args.games)

    def cell(row, name):
        m = row.get(f"{name}_mean")
        return "-" if m is None else f"{m:.1f} +- {row[f'{name}_se']:.1f}"

    def diff(row, name):
        m = row.get(name)
        return "-" if m is None else f"{m:+.1f} +- {row[f'{name}_se']:.1f}"

    print(f"\n{args.split} seeds, mean return +- SE; differences paired by seed\n")
    print("| game | k | shipped (tree_k 0, reflex) | tree_k 1, reflex | tree_k 1, plan "
          "| plan - reflex (tree_k 1) | plan (tree_k 1) - shipped "
          "| plan (tree_k 1) - k1 |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if not isinstance(r["k"], int):
            others = ", ".join(
                f"- k{k[len('minus_k') :]} {diff(r, k)}"
                for k in r
                if k.startswith("minus_k") and not k.endswith("_se")
            )
            print(f"| {r['game']} | {r['k']} | - | - | {cell(r, 'plan-tree1')} | - | - | "
                  f"{diff(r, 'plan-tree1_minus_k1')} ({others}) |")  # fmt: skip
            continue
        print(f"| {r['game']} | {r['k']} | {cell(r, 'shipped')} | {cell(r, 'reflex-tree1')} | "
              f"{cell(r, 'plan-tree1')} | {diff(r, 'plan-tree1_minus_reflex-tree1')} | "
              f"{diff(r, 'plan-tree1_minus_shipped')} | "
              f"{diff(r, 'plan-tree1_minus_k1')} |")  # fmt: skip
    if rows:
        fields = sorted({f for r in rows for f in r}, key=lambda f: (f not in ("game", "k"), f))
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        stamp = dict(date=utc_now(), commit=git_commit(short=True), split=args.split)
        with args.csv.open("w") as f:
            import csv

            w = csv.DictWriter(f, fieldnames=[*stamp, *fields])
            w.writeheader()
            for r in rows:
                w.writerow({**stamp, **r})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
