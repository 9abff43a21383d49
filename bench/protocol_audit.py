"""An audit of the paper's committed-game protocol on conditions whose truth is known.

Usage: python -m bench.protocol_audit [--draws 20000] [--seed 0] [--cap-episodes 32]

The paper reports its committed-game gains (Pac-Man +10.3%, Tetris +65%, Snake +10.9%, gate
over the best fixed budget) from one evaluation per condition of 100 episodes, each condition
with its own fresh keys (unpaired), the best fixed budget picked as the highest of the four on
those same episodes, and the gate picked among its training checkpoints on 16 episodes each
(reference-notes sections 7 and 8). Snake's evaluation stops at 500 meta-steps.

This bench applies that protocol where the answer is known to be "no gain" and counts how often
it reports one anyway. The episodes are rtplan's own: every fixed-k episode of
`results/<game>/{tuning,eval,holdout}/k*.json` (564 per budget and game), resampled with
replacement, so each draw is what a fresh unpaired 100-episode evaluation of that budget could
have returned. Three known truths:
- **copies**: the "gate" is a copy of the best fixed budget and the baseline is that budget
  alone (true gain 0);
- **best of four**: the gate is a copy of the best budget, the baseline the highest of the four
  budgets' means on their own episodes, as the paper picks it (true gain 0, and the max favours
  the baseline);
- **picked gate**: 48 checkpoints, each a copy of a budget drawn at random, the one with the
  highest 16-episode mean picked, then evaluated on 100 fresh episodes against the best of four
  (true gain at most 0).
Reported per game and truth: the mean reported gain, its 95th percentile (the smallest gain this
protocol can tell from noise 19 times in 20), and how often it reports a gain at least the paper's.

`--cap-episodes N` also plays Snake's cap: every fixed budget on the first N tuning seeds
stopped at 500 decisions (meta-steps), as the reference does, beside the same seeds played to the
game's end (read from `rtplan eval`'s tuning files when they hold those seeds). A budget k
plays up to 500 k frames there, so the cap alone can order the budgets.

Prints the tables and appends the rows to bench/results/protocol_audit.csv.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from bench._common import RESULTS, ROOT, append_rows, git_commit, utc_now

RESULTS_CSV = RESULTS / "protocol_audit.csv"
#: The paper's reported gains over the best fixed budget (section 5), per game.
PAPER_GAIN = {"pacman-rt-v0": 0.103, "tetris-rt-v0": 0.65, "snake-rt-v0": 0.109}
#: The reference's evaluation: episodes per condition, per checkpoint screen, checkpoints.
EPISODES, SCREEN, CHECKPOINTS = 100, 16, 48
#: The reference's Snake evaluation cap, in meta-steps (decisions).
SNAKE_CAP = 500
SPLITS = ("tuning", "eval", "holdout")


def pooled_returns(game: str, root=ROOT / "results") -> dict[int, np.ndarray]:
    """Budget k -> every always-k episode's return in `root/<game>/<split>/k<k>.json`."""
    pools: dict[int, list[float]] = {}
    for split in SPLITS:
        for path in sorted((root / game / split).glob("k[0-9]*.json")):
            record = json.loads(path.read_text())
            pools.setdefault(int(path.stem[1:]), []).extend(record["returns"])
    if not pools:
        raise SystemExit(f"protocol_audit: no always-k results under {root / game}")
    return {k: np.asarray(v, np.float64) for k, v in sorted(pools.items())}


def _means(pool: np.ndarray, n: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """`[draws]` means of n episodes resampled from `pool`."""
    return pool[rng.integers(0, len(pool), size=(draws, n))].mean(axis=1)


def audit(pools: dict[int, np.ndarray], draws: int, rng: np.random.Generator) -> dict:
    """Reported gains `[draws]` per truth ("copies", "best of four", "picked gate")."""
    ks = sorted(pools)
    best = max(ks, key=lambda k: pools[k].mean())  # the truth, over all 564 episodes
    fixed = np.stack([_means(pools[k], EPISODES, draws, rng) for k in ks])  # [K, draws]
    best_of_four = fixed.max(axis=0)
    gate = _means(pools[best], EPISODES, draws, rng)
    copies = gate / _means(pools[best], EPISODES, draws, rng) - 1
    # Picked gate: each checkpoint a copy of a random budget, screened on 16 episodes.
    which = rng.integers(0, len(ks), size=(draws, CHECKPOINTS))
    screens = np.stack([_means(pools[k], SCREEN, draws * CHECKPOINTS, rng) for k in ks])
    screen = np.take_along_axis(screens.reshape(len(ks), draws, CHECKPOINTS), which[None], 0)[0]
    picked = np.asarray(ks)[np.take_along_axis(which, screen.argmax(1)[:, None], 1)[:, 0]]
    fresh = np.stack([_means(pools[k], EPISODES, draws, rng) for k in ks])
    picked_gate = fresh[np.searchsorted(ks, picked), np.arange(draws)]
    return {
        "best": best,
        "copies": copies,
        "best of four": gate / best_of_four - 1,
        "picked gate": picked_gate / best_of_four - 1,
    }


def snake_cap(episodes: int) -> list[dict]:
    """Every fixed budget on the first `episodes` tuning seeds, to the end and stopped at the
    reference's 500 decisions (the same games: a seed plays the same game under both)."""
    from rtplan.jax_setup import use_compile_cache

    use_compile_cache()
    from rtplan.harness.checkpoint import planner_file
    from rtplan.planner.episodes import always, eval_runner, play, seeds_of
    from rtplan.planner.store import load_planner

    game = "snake-rt-v0"
    cfg, params, _ = load_planner(game, str(planner_file(game)))
    from rtplan.planner.options import Planner

    runner = eval_runner(Planner(cfg), episodes)
    seeds = seeds_of("tuning", episodes)
    rows = []
    for k in cfg.budgets:
        start = time.perf_counter()
        capped = play(runner, params, seeds, always(k), max_decisions=SNAKE_CAP)
        # To the end: `rtplan eval`'s tuning file when it holds these seeds, else played.
        saved = ROOT / "results" / game / "tuning" / f"k{k}.json"
        record = json.loads(saved.read_text()) if saved.exists() else {"seeds": []}
        if record["seeds"][:episodes] == [int(s) for s in seeds]:
            full = np.asarray(record["returns"][:episodes], np.float64)
            full_frames = float(np.mean(record["frames"][:episodes]))
        else:
            played = play(runner, params, seeds, always(k))
            full, full_frames = played.returns, float(played.frames.mean())
        rows.append(
            {
                "k": k,
                "full": full,
                "capped": capped.returns,
                "frames_full": full_frames,
                "frames_capped": float(capped.frames.mean()),
                "seconds": time.perf_counter() - start,
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=20000, help="resampled evaluations")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cap-episodes", type=int, default=0, help="Snake's cap (0: skip)")
    parser.add_argument("--csv", default=str(RESULTS_CSV))
    args = parser.parse_args()
    from rtplan.harness.stats import paired, standard_error

    rng = np.random.default_rng(args.seed)
    rows, commit, date = [], git_commit(short=True), utc_now()
    print(
        f"The paper's protocol on known truths ({args.draws} resampled evaluations of "
        f"{EPISODES} unpaired episodes per condition):\n"
    )
    print("| game | truth | best k | mean gain | 95th pct | P(gain >= paper's) | paper's |")
    print("|---|---|---|---|---|---|---|")
    for game, paper in PAPER_GAIN.items():
        result = audit(pooled_returns(game), args.draws, rng)
        for truth in ("copies", "best of four", "picked gate"):
            gain = result[truth]
            row = {
                "date": date,
                "commit": commit,
                "game": game,
                "truth": truth,
                "best_k": result["best"],
                "draws": args.draws,
                "mean_gain": round(float(gain.mean()), 4),
                "p95_gain": round(float(np.quantile(gain, 0.95)), 4),
                "p_paper": round(float((gain >= paper).mean()), 5),
                "paper_gain": paper,
            }
            rows.append(row)
            print(
                f"| {game} | {truth} | k{row['best_k']} | {row['mean_gain']:+.1%} | "
                f"{row['p95_gain']:+.1%} | {row['p_paper']:.4f} | {paper:+.1%} |"
            )
    if args.cap_episodes:
        print(f"\nSnake stopped at {SNAKE_CAP} decisions ({args.cap_episodes} tuning seeds):\n")
        print("| k | to the end | frames | capped | frames | capped - k1 capped (paired) |")
        print("|---|---|---|---|---|---|")
        cap = snake_cap(args.cap_episodes)
        k1 = cap[0]["capped"]
        for r in cap:
            d, se = paired(r["capped"], k1)
            print(
                f"| k{r['k']} | {r['full'].mean():.2f} +- {standard_error(r['full']):.2f} | "
                f"{r['frames_full']:.0f} | {r['capped'].mean():.2f} +- "
                f"{standard_error(r['capped']):.2f} | {r['frames_capped']:.0f} | "
                f"{d:+.2f} +- {se:.2f} |"
            )
            rows.append(
                {
                    "date": date,
                    "commit": commit,
                    "game": "snake-rt-v0",
                    "truth": f"cap{SNAKE_CAP} k{r['k']}",
                    "draws": args.cap_episodes,
                    "mean_gain": round(float(r["capped"].mean() / k1.mean() - 1), 4),
                    "full_mean": round(float(r["full"].mean()), 3),
                    "capped_mean": round(float(r["capped"].mean()), 3),
                    "seconds": round(r["seconds"], 1),
                }
            )
    fields = [
        "date", "commit", "game", "truth", "best_k", "draws", "mean_gain", "p95_gain",
        "p_paper", "paper_gain", "full_mean", "capped_mean", "seconds",
    ]  # fmt: skip
    append_rows(args.csv, rows, fields)
    print(f"\nappended {len(rows)} rows to {args.csv}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
