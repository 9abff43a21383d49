"""Counterfactual budget values of the committed games: every budget played from copies of one
decision state, with the same keys, each continued under one fixed budget (issue 27, part 1).

The simulator is perfect and pure: a state copied is the same game, so `Q(s, k)` for all k can
be measured side by side on identical copies, the randomness shared. What is shared and what is
drawn anew:

- Search: each branch carries the decision's option key and splits its keys per decision the
  way `planner.episodes.play` does, so branch k's first option and every continuation option
  get the same keys in every branch.
- Chance (Tetris pieces, ghost tie-breaks, food): the state holds the PRNG key of its future
  chance events. A gate cannot see that future, so its value is an average over it: `worlds`
  copies re-draw it (`Game.rekey`), one key per world shared by every budget (paired), and the
  spread over worlds is the noise a comparison must beat. `worlds=0` keeps the real future
  (one world: the branch of the played budget then equals the game as it was played).

Horizon: each branch is scored on the same frames `[s.frame, s.frame + horizon)`: its first
option, then the continuation budget, cut to the largest budget that still fits before the end
(budgets include 1 in every committed game, so the cut is exact), or to the game's end.

One module (past ~450 lines) on purpose: the states' sampling (`play_to`, `decision_states`),
the branching and the diagnosis share the key and rules conventions above, and `rtplan
fit-gate` replays states with the same `play_to`; split, each half would restate them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from rtplan import games
from rtplan.gate.counterfactual._chunks import run_chunks
from rtplan.gate.files import file_sha256
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.stats import standard_error
from rtplan.planner.batching import OptionRunner
from rtplan.planner.episodes import Chooser, Episodes, always, play_from, start
from rtplan.planner.options import Planner

#: A batch of plans under committed="plan": (actions `[B, H]`, -1 past each length; lengths
#: `[B]`), as `OptionOutput.plan` and `OptionOutput.plan_len` hold them.
Plan = tuple[jax.Array, jax.Array]
#: The rules every shipped planner plays (`PlannerConfig.committed`, `tree_k`): a counterfactual
#: file without the fields was measured under them.
_SHIPPED_RULES = {"committed": "reflex", "tree_k": 0}

__all__ = [
    "BranchValues",
    "branch_values",
    "capped",
    "chunk_rules",
    "cut",
    "decision_states",
    "diagnose",
    "paying",
    "play_to",
    "run_counterfactual",
]


@dataclasses.dataclass
class BranchValues:
    """`Q(s, k)` samples: the return over the horizon of each budget, per state and world."""

    values: np.ndarray  # [S, M, K] return of budget j from state s in world m
    ends: np.ndarray  # [S, M, K] the frame each branch stopped at (the horizon or the end)
    budgets: tuple[int, ...]  # [K] the budgets branched
    continuation: int  # the budget every branch continues with
    horizon: int | None  # frames scored per branch (None: to the game's end)
    frames: np.ndarray  # [S] each state's frame
    seeds: np.ndarray  # [S] the seed of the game each state comes from


def cut(choose: Chooser, budgets: Sequence[int], until: np.ndarray | None) -> Chooser:
    """`choose`, each budget it picks cut to the largest of `budgets` that ends by frame
    `until` `[E]` (None: never cut; budgets include 1, so the cut is exact)."""
    table = np.asarray(sorted(budgets))

    def cut_choose(states: games.State, alive: np.ndarray, t: int) -> np.ndarray:
        k = np.asarray(choose(states, alive, t))
        if until is None:
            return k
        room = until - np.asarray(states.frame)
        fits = table[None, :] <= np.minimum(k, room)[:, None]
        return np.where(fits.any(1), table[np.argmax(np.where(fits, table, 0), 1)], table[0])

    return cut_choose


def capped(continuation: int, budgets: Sequence[int], until: np.ndarray | None) -> Chooser:
    """Always-`continuation`, cut to the largest budget that ends by frame `until` `[E]`
    (None: never cut)."""
    return cut(always(continuation), budgets, until)


def chunk_rules(part: dict) -> dict:
    """The rules (`committed`, `tree_k`) a counterfactual chunk or summary was measured under:
    its own fields, else the shipped ones (the reflex's files never hold them)."""
    return {name: part.get(name, default) for name, default in _SHIPPED_RULES.items()}


def play_to(
    runner: OptionRunner,
    params,
    seeds: np.ndarray,
    until: np.ndarray,
    continuation: int,
    *,
    along: Chooser | None = None,
) -> tuple[Episodes, games.State, jax.Array]:
    """Games `seeds` `[E]` (started as `play` starts them) played along always-`continuation`
    (or the chooser `along`), each option cut to end by frame `until` `[E]`, to that frame or
    the game's end, under the runner's rules: under committed="plan" each option commits to
    its predecessor's plan (none at the start), as `rtplan eval --committed plan` plays.

    The one play that reaches a decision state: `decision_states` samples the states with it,
    and `rtplan fit-gate` (`supervised.state_inputs`) replays them with it from (seed, frame).

    Returns:
        (`Episodes` of the play, its `plan` what each game carries at the end; the states
        `[E]`; their carried option keys).
    """
    states, keys = start(runner.planner.game, seeds)
    play = cut(along or always(continuation), runner.budgets, until)
    return play_from(runner, params, states, keys, play, seeds=seeds, until=until)


def decision_states(
    runner: OptionRunner,
    params,
    seeds: np.ndarray,
    continuation: int,
    *,
    max_frame: int,
    rng: np.random.Generator,
    along: Chooser | None = None,
) -> tuple[games.State, jax.Array, np.ndarray, Plan | None]:
    """Decision states sampled along always-`continuation` play (or along the chooser `along`,
    a gate's own play): game i (from `seeds[i]`, as `play` starts it) is played to a frame
    drawn uniformly from `[0, max_frame)`; games that ended before it are dropped. Returns
    (states `[S]`, their carried keys, their seeds, and under committed="plan" the plan each
    game carries there: what the next option's committed frames play; None under "reflex")."""
    seeds = np.asarray(seeds)
    until = rng.integers(0, max_frame, len(seeds))
    played, states, keys = play_to(runner, params, seeds, until, continuation, along=along)
    keep = ~np.asarray(states.done)
    pick = jnp.asarray(np.flatnonzero(keep))
    plan = None if played.plan is None else jax.tree.map(lambda x: x[pick], played.plan)
    return jax.tree.map(lambda x: x[pick], states), keys[pick], seeds[keep], plan


def branch_rows(
    game: games.Game,
    states: games.State,
    keys: jax.Array,
    budgets: Sequence[int],
    worlds: int,
    world_key: jax.Array,
) -> tuple[games.State, jax.Array, np.ndarray]:
    """The branches of `states` `[S]`: row (s, m, j), budget fastest, is a copy of state s in
    world m (re-keyed with `fold_in(fold_in(world_key, s), m)`; `worlds` 0: as it is) with the
    state's own carried option key, to play budget j first. Returns (rows `[S*M*K]`, their
    keys, their first budgets)."""
    s, m, k = keys.shape[0], max(worlds, 1), len(budgets)
    state_of = jnp.asarray(np.repeat(np.arange(s), m * k))
    world_of = jnp.asarray(np.tile(np.repeat(np.arange(m), k), s))
    rows = jax.tree.map(lambda x: x[state_of], states)
    if worlds > 0:
        fold = jax.random.fold_in
        world_keys = jax.vmap(lambda i, w: fold(fold(world_key, i), w))(state_of, world_of)
        rows = jax.vmap(game.rekey)(rows, world_keys)
    return rows, keys[state_of], np.tile(np.asarray(budgets), s * m)


def branch_values(
    runner: OptionRunner,
    params,
    states: games.State,
    keys: jax.Array,
    *,
    continuation: int,
    horizon: int | None,
    worlds: int,
    world_key: jax.Array,
    seeds: np.ndarray | None = None,
    plan: Plan | None = None,
) -> BranchValues:
    """`Q(s, k)` for every budget k of `runner` from each of `states` `[S]` (carried option keys
    `keys`), in `worlds` re-drawn futures (0: the states' own future, one world).

    Under committed="plan" (the runner's planner) every branch of state s commits its first
    option's k-1 frames to `plan` `([S, H], [S])`, the plan the play that reached s carries
    (`decision_states`; None: no plan, the reflex), in every world and budget alike (paired),
    and each later option to its predecessor's plan, as `rtplan eval --committed plan` plays.

    Raises:
        ValueError: `horizon` is shorter than the largest budget, or the budgets lack 1 (the
            horizon could not be cut exactly).
    """
    budgets = tuple(runner.budgets)
    if horizon is not None and (horizon < max(budgets) or 1 not in budgets):
        raise ValueError(
            f"horizon {horizon} must be >= the largest budget {max(budgets)}, with 1 among the "
            f"budgets {budgets} (each branch is cut to the same frames)"
        )
    s = keys.shape[0]
    m, k = max(worlds, 1), len(budgets)
    rows, row_keys, first = branch_rows(
        runner.planner.game, states, keys, budgets, worlds, world_key
    )
    start = np.asarray(rows.frame)
    until = None if horizon is None else start + horizon
    later = capped(continuation, budgets, until)

    def choose(states: games.State, alive: np.ndarray, t: int) -> np.ndarray:
        return first if t == 0 else later(states, alive, t)

    # Rows are state-major (`branch_rows`): each state's plan repeated over its worlds and budgets.
    row_plan = None if plan is None else jax.tree.map(lambda x: jnp.repeat(x, m * k, 0), plan)
    played, _, _ = play_from(
        runner,
        params,
        rows,
        row_keys,
        choose,
        seeds=np.repeat(np.arange(s), m * k),
        until=until,
        plan=row_plan,
    )
    return BranchValues(
        values=played.returns.reshape(s, m, k),
        ends=played.frames.reshape(s, m, k),
        budgets=budgets,
        continuation=continuation,
        horizon=horizon,
        frames=np.asarray(states.frame),
        seeds=np.arange(s) if seeds is None else np.asarray(seeds),
    )


def paying(values: np.ndarray, c: int, *, z: float = 2.0):
    """Per state and budget, from `values` `[S, M, K]`: the paired difference with budget index
    `c` averaged over the worlds, its SE over the worlds (inf with one world), and whether it
    *pays* there (> `z` SE and > 0). Returns (mean, se, pays), each `[S, K]`."""
    diff = values - values[..., c : c + 1]
    mean = diff.mean(1)
    m = values.shape[1]
    se = diff.std(1, ddof=1) / np.sqrt(m) if m > 1 else np.full_like(mean, np.inf)
    return mean, se, (mean > z * se) & (mean > 0)


def cross_fitted_gain(values: np.ndarray, c: int) -> np.ndarray:
    """`[S]` per state, from `values` `[S, M, K]` (M >= 2 worlds): what an oracle gate gains
    over budget index `c` when it must pick its budget from noisy values. The budget that looks
    best on one half of the worlds (`c` unless another is strictly higher) is scored on the
    other half, both ways round, and the two gains averaged. Unlike the maximum of the means,
    this is not biased up by the noise: where no budget differs its expectation is 0, and a
    state where one budget truly pays counts that budget's gain, less what noisy picks lose."""
    m = values.shape[1]
    if m < 2:
        raise ValueError("cross-fitting needs at least two worlds per state")
    halves = values[:, : m // 2].mean(1), values[:, m // 2 :].mean(1)
    rows = np.arange(values.shape[0])

    def gain(pick: np.ndarray, score: np.ndarray) -> np.ndarray:
        j = np.where(pick.max(1) > pick[:, c], pick.argmax(1), c)
        return score[rows, j] - score[:, c]

    return (gain(*halves) + gain(*halves[::-1])) / 2


def diagnose(bv: BranchValues, *, z: float = 2.0) -> dict:
    """How much any budget beats the continuation budget k_c, state by state.

    Per state and budget j: the paired difference d_j = mean over worlds of Q(s, j) - Q(s, k_c)
    and its SE over worlds. A budget *pays* in a state where d_j > z * SE (and > 0); this needs
    at least two worlds. Reports the share of states where some budget pays (what bounds any
    gate's gain), the mean best gain there, the oracle's mean gain max(0, max_j d_j) over all
    states (an upper bound: the max of noisy means is biased up), the share of states where
    some budget would pay by chance alone if no budget differed (K-1 one-sided tests at `z`;
    with few worlds the SE is itself noisy, so the true rate is higher), and per budget the
    share of states where it pays and its mean difference with the states' SE. The
    cross-fitted oracle gain (`cross_fitted_gain`, its mean and SE over the states) is the
    honest version of the oracle's: what a gate that knew each state's best budget as well as
    half the worlds tell it would gain over k_c within the horizon.
    """
    values = bv.values
    c = bv.budgets.index(bv.continuation)
    m = values.shape[1]
    mean, se, pays = paying(values, c, z=z)
    pays[:, c] = False
    any_pays = pays.any(1)
    best_gain = np.where(pays, mean, -np.inf).max(1)
    per_budget = {
        str(b): {
            "pays": float(pays[:, j].mean()),
            "mean_difference": float(mean[:, j].mean()),
            "se": standard_error(mean[:, j]),
        }
        for j, b in enumerate(bv.budgets)
    }
    # With no real difference anywhere, each of the K-1 budgets would still "pay" in a share
    # P(N(0,1) > z) of the states (normal approximation): the share to compare against.
    from statistics import NormalDist

    alone = 1.0 - NormalDist().cdf(z)
    by_chance = 1.0 - (1.0 - alone) ** (len(bv.budgets) - 1)
    return {
        "states": int(values.shape[0]),
        "worlds": int(m),
        "continuation": bv.continuation,
        "horizon": bv.horizon,
        "z": z,
        "share_of_states_where_a_budget_pays": float(any_pays.mean()),
        "share_expected_by_chance": by_chance,
        "mean_gain_where_it_pays": float(best_gain[any_pays].mean()) if any_pays.any() else 0.0,
        "oracle_mean_gain": float(np.maximum(mean.max(1), 0.0).mean()),
        **_cross_fitted(values, c),
        "mean_return_of_continuation": float(values[..., c].mean()),
        "per_budget": per_budget,
    }


def _cross_fitted(values: np.ndarray, c: int) -> dict:
    if values.shape[1] < 2:
        return {}
    gain = cross_fitted_gain(values, c)
    return {
        "cross_fitted_oracle_gain": float(gain.mean()),
        "cross_fitted_oracle_gain_se": standard_error(gain),
    }


def run_counterfactual(
    game_id: str,
    *,
    states: int = 64,
    continuation: int,
    horizon: int | None = 32,
    worlds: int = 8,
    max_frame: int = 500,
    chunk: int = 8,
    seed: int = 0,
    committed: str | None = None,
    tree_k: int | None = None,
    budgets: Sequence[int] | None = None,
    planner_file: str | None = None,
    out: str | os.PathLike | None = None,
    command: str | None = None,
    log: Callable[[str], None] = print,
) -> dict:
    """Branches every budget from `states` decision states of train-range games `seed, seed+1,
    ...` (never a tuning or evaluation seed), sampled along always-`continuation` play at a
    frame drawn from `[0, max_frame)` per game, in `worlds` re-drawn futures; writes each chunk
    of `chunk` games to `<out>/<game>/counterfactual/<tag>/` as it finishes (a rerun keeps the
    chunks written: resumable), then `summary.json` (`diagnose`) beside them. Returns the
    summary.

    `committed` and `tree_k` (None: the planner checkpoint's, "reflex" and 0 for every shipped
    one) set what every option's committed frames play and the frames of every edge below the
    search's root, as `rtplan eval --committed --tree-k` plays them: the sampling play, every
    branch and its continuation. Any rules but (reflex, 0) write to
    `<out>/<game>/counterfactual/[plan-]tree<M>/<tag>/` and record both in every chunk and the
    summary; a resume refuses chunks of other rules.

    `budgets` (None: the checkpoint's) branches over more budgets, the checkpoint's and larger
    ones (`planner.configs.with_budgets`, as `rtplan eval --budgets` plays them; the
    continuation may be one of them), and writes below the rules' folder to
    `budgets-<K1>-...-<Kn>/<tag>/` (`harness.layout.budgets_folder`); every chunk records its
    budgets, and a resume refuses chunks of others. `rtplan fit-gate` fits a gate over them.

    Raises:
        ValueError: a clock game, budgets that are not the checkpoint's and larger ones, a
            continuation not among the budgets, or committed "plan"
            with tree_k 0: the plan of a tree whose edges below the root are an option's own
            k-1 reflex frames and its action commits the next option (of the same k) to reflex
            frames, so always-K, the continuation, plays exactly the reflex (the branches of
            another k would commit to a mix of the tree's reflex frames and its actions, which
            no evaluated condition plays): give tree_k >= 1.
    """
    from rtplan.harness.layout import budgets_folder, results_root, tree_folder
    from rtplan.planner.configs import with_budgets, with_rules
    from rtplan.planner.store import load_planner

    game = games.make(game_id)
    if games.kind_of(game) is not games.Kind.COMMITTED:
        raise ValueError(
            f"{game_id} is a clock game; counterfactual budgets are for committed games"
        )
    planner_file = str(ckpt.planner_file(game_id, planner_file))
    pcfg, params, _ = load_planner(game_id, planner_file)
    own_budgets = pcfg.budgets
    if budgets is not None:
        pcfg = with_budgets(pcfg, budgets)  # ValueError: not the checkpoint's and larger ones
    if continuation not in pcfg.budgets:
        raise ValueError(f"continuation k={continuation} is not one of {pcfg.budgets}")
    # ValueError: an unknown commitment, a negative tree_k, or a plan without a tree.
    pcfg = with_rules(pcfg, committed=committed, tree_k=tree_k, plan_needs_tree=True)
    tag = f"k{continuation}-h{horizon or 'end'}-w{worlds}-s{seed}"
    folder = Path(results_root(out)) / game_id / "counterfactual"
    head = {
        "game": game_id,
        "planner": ckpt.recorded_path(planner_file),
        "planner_sha256": file_sha256(planner_file),
    }
    rules = {"committed": pcfg.committed, "tree_k": pcfg.tree_k}
    if rules != _SHIPPED_RULES:  # the reflex's files stay as they were, without the fields
        folder = folder / tree_folder(pcfg.tree_k, plan=pcfg.committed == "plan")
        head.update(rules)
    if pcfg.budgets != own_budgets:  # the checkpoint's budgets' folders stay as they were
        folder = folder / budgets_folder(pcfg.budgets)
    head["budgets"] = list(pcfg.budgets)  # every chunk holds its budgets: a resume checks them
    folder = folder / tag
    k = len(pcfg.budgets)
    runner = OptionRunner(Planner(pcfg), max_batch=chunk * max(worlds, 1) * k)

    def label(first: int, seeds: np.ndarray) -> dict:
        rng = np.random.default_rng([first, 27])
        st, keys, kept, plan = decision_states(
            runner, params, seeds, continuation, max_frame=max_frame, rng=rng
        )
        bv = branch_values(
            runner,
            params,
            st,
            keys,
            continuation=continuation,
            horizon=horizon,
            worlds=worlds,
            world_key=jax.random.PRNGKey(first),
            seeds=kept,
            plan=plan,
        )
        return {
            "seeds": kept.tolist(),
            "frames": bv.frames.tolist(),
            "budgets": list(bv.budgets),
            "values": bv.values.tolist(),
            "ends": bv.ends.tolist(),
        }

    def summarize(parts: list[dict]) -> dict:
        shape = (-1, max(worlds, 1), k)
        values = [np.asarray(p["values"], np.float64).reshape(shape) for p in parts]
        bv = BranchValues(
            values=np.concatenate(values),
            ends=np.concatenate([np.asarray(p["ends"], np.int64).reshape(shape) for p in parts]),
            budgets=tuple(pcfg.budgets),
            continuation=continuation,
            horizon=horizon,
            frames=np.concatenate([np.asarray(p["frames"], np.int64) for p in parts]),
            seeds=np.concatenate([np.asarray(p["seeds"], np.int64) for p in parts]),
        )
        summary = diagnose(bv)
        seconds = sum(p["seconds"] for p in parts)
        branched_frames = bv.values.size * (horizon or 0)
        summary.update(head)
        summary.update(
            seconds=seconds,
            # What a label costs: simulated frames per decision state (all budgets, all worlds).
            frames_per_state=(branched_frames / len(bv.frames)) if horizon else None,
            seconds_per_state=seconds / max(len(bv.frames), 1),
            command=command,
        )
        return summary

    return run_chunks(
        folder,
        head=head,
        seed=seed,
        states=states,
        chunk=chunk,
        label=label,
        summarize=summarize,
        fixed={**_SHIPPED_RULES, "budgets": None},
        command=command,
        log=log,
    )
