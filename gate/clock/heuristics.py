"""The clock games' time-management baselines: which option each mover plays, in pure JAX.

Option 0 is the policy-only reflex move (cost 0); option i >= 1 is the planner's budget
`budgets[i - 1]`, charged `simulations[i - 1]` ticks on the move (`games.clock`). Every baseline
is a `ClockChooser`, `choose(inputs, keys) -> [B] int32` option indices, built by a factory
(`always`, `random_option`, `policy_only`, `greedy`, `proportional`, `midpeak`, `uncertainty`,
and from the clock-aware bar's table `bar_nearest` and `bar_uncertainty`; `baselines` names them
all), so an evaluation plays any of them, or the gate, through one path. The rules are in
docs/gate.md ("Clock baselines"). It runs past ~450 lines because every rule shares the fitting
pieces (`affordable`, `_fit_down`) and `baselines` must name them all from one place.

An option *fits* when the mover's clock can pay it: cost <= remaining ticks (`timeout="reflex"`;
the clock would otherwise be clamped at 0 and the search get ticks it did not have), cost <
remaining in strict mode (spending down to 0 loses). Policy-only always fits. No baseline ever
plays an option that does not fit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from rtplan import games
from rtplan.gate.clock.config import BAR_NEAREST, BAR_RULES, BAR_UNCERTAINTY
from rtplan.planner.network import NetOutput
from rtplan.planner.options import Planner

__all__ = [
    "BAR_CONFIDENT",
    "BAR_NEAREST",
    "BAR_RULES",
    "BAR_UNCERTAINTY",
    "BAR_UNSURE",
    "CONFIDENT_SCALE",
    "MIDPEAK_CENTRE",
    "MIDPEAK_FLOOR",
    "MIDPEAK_MOVES",
    "MIDPEAK_WIDTH",
    "MIN_MOVES_LEFT",
    "SAFETY",
    "UNSURE_SCALE",
    "ClockChooser",
    "ClockInputs",
    "ClockOptions",
    "affordable",
    "always",
    "bar_nearest",
    "bar_uncertainty",
    "baselines",
    "clock_inputs",
    "greedy",
    "midpeak",
    "midpeak_grid",
    "midpeak_plan",
    "own_moves_left",
    "policy_only",
    "proportional",
    "proportional_allowance",
    "random_option",
    "uncertainty",
    "uncertainty_of",
]

#: The proportional rule spends this fraction of its per-move share of the clock ...
SAFETY = 0.8
#: ... and expects at least this many more moves of its own, however late the game.
MIN_MOVES_LEFT = 5
#: Midpeak's reference plan (reference-notes section 7): bell centre and width over the
#: normalised move number, the moves it plans, and the floor of the weights.
MIDPEAK_CENTRE = 0.35
MIDPEAK_WIDTH = 0.3
MIDPEAK_MOVES = 25
MIDPEAK_FLOOR = 0.15
#: `uncertainty` spends this multiple of the proportional allowance on a certain policy ...
CONFIDENT_SCALE = 0.5
#: ... and this multiple on a flat one.
UNSURE_SCALE = 2.0
#: `bar_uncertainty` plays one budget below the bar's at or below this uncertainty ...
BAR_CONFIDENT = 0.25
#: ... and one above at or above this one.
BAR_UNSURE = 0.6


@struct.dataclass
class ClockInputs:
    """What a clock baseline sees at `[B]` decision states (`clock_inputs` builds it)."""

    my_time: jax.Array  # [B] int32 the mover's remaining ticks
    opp_time: jax.Array  # [B] int32 the opponent's remaining ticks
    initial_time: jax.Array  # [B] int32 T0 of the game
    ply: jax.Array  # [B] int32 plies played so far (the game's frame)
    logits: jax.Array | None = None  # [B, A] the frozen planner's raw policy logits
    legal: jax.Array | None = None  # [B, A] bool legal moves
    value: jax.Array | None = None  # [B] the planner's value for the mover

    @property
    def move(self) -> jax.Array:
        """`[B]` int32 the mover's own move number (0 for its first move): ply // 2."""
        return self.ply // 2


#: `choose(inputs [B], keys [B]) -> [B] int32` option indices (0 policy-only, i the budget
#: `budgets[i - 1]`). Pure and jittable; only `random_option` reads its per-game keys.
ClockChooser = Callable[[ClockInputs, jax.Array], jax.Array]


@dataclasses.dataclass(frozen=True)
class ClockOptions:
    """A clock game's options as the baselines see them (static)."""

    #: The planner's budgets k (option i >= 1 is `budgets[i - 1]`), ascending.
    budgets: tuple[int, ...]
    #: Ticks each budget costs (its MCTS simulations), aligned with `budgets`, ascending.
    simulations: tuple[int, ...]
    #: The most plies a game can last (`games.clock.ClockGame.max_plies`): the proportional rule's
    #: horizon.
    max_plies: int
    #: Strict timeout: an option fits only if it leaves the mover more than 0 ticks.
    strict: bool = False

    def __post_init__(self) -> None:
        sims = np.asarray(self.simulations)
        if len(self.budgets) != len(sims) or not len(sims):
            raise ValueError("budgets and simulations must be non-empty and aligned")
        if sims[0] <= 0 or np.any(np.diff(sims) <= 0):
            raise ValueError(f"simulations must be positive and ascending, got {self.simulations}")

    @classmethod
    def of(cls, planner: Planner) -> ClockOptions:
        """The options of a clock game's planner (its budgets, their simulations, the game's
        ply cap and timeout mode)."""
        game = planner.game
        if planner.kind is not games.Kind.CLOCK:
            raise ValueError(f"{game.id} is not a clock game")
        cfg = planner.config
        return cls(
            budgets=tuple(cfg.budgets),
            simulations=tuple(cfg.simulations),
            max_plies=game.max_plies,
            strict=game.timeout == "strict",
        )

    @property
    def costs(self) -> np.ndarray:
        """`[n + 1]` int32 ticks of each option: 0 (policy-only), then the simulations."""
        return np.asarray((0, *self.simulations), np.int32)

    def index(self, k: int) -> int:
        """The option index of budget k (0: policy-only)."""
        return 0 if k == 0 else self.budgets.index(k) + 1

    def budget(self, index: np.ndarray) -> np.ndarray:
        """The budgets k of option indices (0 for policy-only; `planner.episodes`' `ks`)."""
        return np.asarray((0, *self.budgets))[np.asarray(index)]


def clock_inputs(states: games.State, out: NetOutput | None = None) -> ClockInputs:
    """The `ClockInputs` of `[B]` clock-game states, with the planner's outputs `out` at them
    (`Planner.evaluate`; None for the baselines that read only the clocks)."""
    inner = states.inner
    me = states.current_player[:, None]
    return ClockInputs(
        my_time=jnp.take_along_axis(inner.clocks, me, 1)[:, 0],
        opp_time=jnp.take_along_axis(inner.clocks, 1 - me, 1)[:, 0],
        initial_time=inner.initial_time,
        ply=states.frame,
        logits=None if out is None else out.logits,
        legal=None if out is None else states.legal_action_mask,
        value=None if out is None else out.value,
    )


# ---- the rules' shared pieces --------------------------------------------------------------


def affordable(options: ClockOptions, my_time: jax.Array) -> jax.Array:
    """`[B, n + 1]` bool: the options the mover's clock `[B]` can pay (policy-only always)."""
    costs = jnp.asarray(options.costs)
    t = jnp.asarray(my_time)[..., None]
    fits = costs < t if options.strict else costs <= t
    return fits | (jnp.arange(costs.shape[0]) == 0)


def _fit_down(wanted: jax.Array, fits: jax.Array) -> jax.Array:
    """`[B]` the largest fitting option at or below `wanted` `[B]` (policy-only if none)."""
    idx = jnp.arange(fits.shape[-1])
    ok = fits & (idx <= wanted[..., None])
    return jnp.max(jnp.where(ok, idx, 0), axis=-1).astype(jnp.int32)


def _within(options: ClockOptions, my_time: jax.Array, allowance: jax.Array) -> jax.Array:
    """`[B]` the largest fitting option that costs at most `allowance` `[B]` ticks."""
    fits = affordable(options, my_time) & (jnp.asarray(options.costs) <= allowance[..., None])
    return _fit_down(jnp.full(fits.shape[:-1], fits.shape[-1] - 1), fits)


def own_moves_left(ply, *, max_plies: int, min_moves_left: int = MIN_MOVES_LEFT):
    """The mover's own moves expected from ply `ply` on, this one included, if the game runs
    to `max_plies`: (max_plies - ply + 1) // 2, at least `min_moves_left`. Works on ints and
    arrays alike (the GTP engine calls it with ints)."""
    return jnp.maximum(min_moves_left, (max_plies - jnp.asarray(ply) + 1) // 2)


def proportional_allowance(remaining, moves_left, *, floor=0.0, lag=0.0, safety: float = SAFETY):
    """The proportional time manager's allowance for the next move (one definition, used by
    the tick baselines and by `rtplan gtp` in seconds): `safety` * max(remaining / moves_left,
    floor) - lag, at least 0.

    Args:
        remaining: the mover's remaining time (ticks or seconds), int/float or `[B]` array.
        moves_left: the moves that time must last (`own_moves_left`, or byo-yomi stones).
        floor: the smallest share per move (GTP: a byo-yomi period's share per stone).
        lag: time lost per move outside the search (GTP's round trip; 0 in ticks).
        safety: the fraction of the share spent.

    Returns:
        `[]` or `[B]` float32 allowance, in the units of `remaining`.
    """
    share = jnp.maximum(jnp.asarray(remaining, jnp.float32) / moves_left, floor)
    return jnp.maximum(safety * share - lag, 0.0)


# ---- the baselines --------------------------------------------------------------------------


def policy_only(options: ClockOptions) -> ClockChooser:
    """Policy-only every move: the reflex (masked argmax of the raw policy), no search."""
    del options
    return lambda inputs, keys: jnp.zeros(inputs.my_time.shape, jnp.int32)


def always(options: ClockOptions, k: int) -> ClockChooser:
    """Always-k: budget k whenever it fits, else the largest budget that fits, else
    policy-only (the clock never pays for a search it cannot afford)."""
    wanted = options.index(k)

    def choose(inputs: ClockInputs, keys: jax.Array) -> jax.Array:
        fits = affordable(options, inputs.my_time)
        return _fit_down(jnp.full(inputs.my_time.shape, wanted), fits)

    return choose


def greedy(options: ClockOptions) -> ClockChooser:
    """The largest option that fits in the remaining time, else policy-only."""
    return always(options, options.budgets[-1])


def random_option(options: ClockOptions) -> ClockChooser:
    """Uniform over the options that fit (policy-only included), one draw per game from its
    own key, so a game's draws do not depend on its batch."""

    def choose(inputs: ClockInputs, keys: jax.Array) -> jax.Array:
        logits = jnp.where(affordable(options, inputs.my_time), 0.0, -jnp.inf)
        return jax.vmap(jax.random.categorical)(keys, logits).astype(jnp.int32)

    return choose


def proportional(
    options: ClockOptions, *, safety: float = SAFETY, min_moves_left: int = MIN_MOVES_LEFT
) -> ClockChooser:
    """The GTP engine's proportional manager on the tick clock: allowance = `safety` *
    remaining / own moves left to the ply cap (`proportional_allowance`, no lag); the largest
    option that fits in it, else policy-only."""

    def choose(inputs: ClockInputs, keys: jax.Array) -> jax.Array:
        moves = own_moves_left(
            inputs.ply, max_plies=options.max_plies, min_moves_left=min_moves_left
        )
        allowance = proportional_allowance(inputs.my_time, moves, safety=safety)
        return _within(options, inputs.my_time, allowance)

    return choose


def midpeak_plan(
    initial_time,
    simulations: Sequence[int],
    centre=MIDPEAK_CENTRE,
    width=MIDPEAK_WIDTH,
    moves: int = MIDPEAK_MOVES,
    *,
    floor: float = MIDPEAK_FLOOR,
) -> jax.Array:
    """Midpeak's plan: the option of each of the mover's first `moves` moves for a clock T0.

    The reference's plan (reference-notes section 7) with its centre and width as arguments:
    1. x_i = linspace(0, 1, moves), w_i = max(exp(-((x_i - centre) / width)^2 / 2), floor);
    2. ideal_i = T0 w_i / sum(w);
    3. snap each ideal_i down to the largest budget costing at most it (the smallest budget if
       none does);
    4. passes over the moves in descending w_i (ties: the earlier move first) upgrade a move to
       the next larger budget whenever the ticks left over (T0 less the plan's cost) pay the
       difference, until a pass upgrades nothing.

    Args:
        initial_time: `[]` T0 in ticks (may be traced).
        simulations: the budgets' costs in ticks, ascending (`ClockOptions.simulations`).
        centre: `[]` the bell's centre over the normalised move number (may be traced).
        width: `[]` the bell's standard deviation (may be traced).
        moves: the moves planned (static).
        floor: the smallest weight.

    Returns:
        `[moves]` int32 option indices, each in 1..len(simulations) (never policy-only).
    """
    sims = jnp.asarray(simulations, jnp.int32)
    n = sims.shape[0]
    x = jnp.linspace(0.0, 1.0, moves)
    w = jnp.maximum(jnp.exp(-0.5 * ((x - centre) / width) ** 2), floor)
    ideal = jnp.asarray(initial_time, jnp.float32) * w / w.sum()
    # Budgets ascending: the count of those at or below ideal_i, less one, is the snapped one.
    plan = jnp.maximum(jnp.sum(sims[None, :] <= ideal[:, None], -1) - 1, 0)
    order = jnp.argsort(-w, stable=True)
    left = jnp.asarray(initial_time, jnp.int32) - sims[plan].sum()
    never = jnp.iinfo(jnp.int32).max  # the largest budget has no next one

    def visit(i, carry):
        plan, left, changed = carry
        m = order[i]
        j = plan[m]
        step = jnp.where(j < n - 1, sims[jnp.minimum(j + 1, n - 1)] - sims[j], never)
        up = step <= left
        return plan.at[m].add(up.astype(plan.dtype)), jnp.where(up, left - step, left), changed | up

    def one_pass(carry):
        plan, left, _ = carry
        return jax.lax.fori_loop(0, moves, visit, (plan, left, jnp.zeros((), bool)))

    plan, _, _ = jax.lax.while_loop(lambda c: c[2], one_pass, (plan, left, jnp.ones((), bool)))
    return (plan + 1).astype(jnp.int32)


def midpeak(
    options: ClockOptions,
    *,
    centre: float = MIDPEAK_CENTRE,
    width: float = MIDPEAK_WIDTH,
    moves: int = MIDPEAK_MOVES,
    floor: float = MIDPEAK_FLOOR,
    tuned: Mapping[int, tuple[float, float]] | None = None,
) -> ClockChooser:
    """Midpeak: own move m plays `midpeak_plan(T0, ...)[m]`, the smallest budget after the
    plan's `moves` moves; a planned option that does not fit falls to the largest that does,
    else policy-only.

    Args:
        options: the game's options.
        centre: the bell's centre (reference 0.35).
        width: the bell's width (reference 0.3).
        moves: the moves planned (reference 25).
        floor: the smallest weight (reference 0.15).
        tuned: T0 -> (centre, width) tuned for that clock (`midpeak_grid` lists the candidates);
            a game whose T0 is not in it uses `centre` and `width`.
    """
    table = dict(tuned or {})
    t0s = jnp.asarray(list(table) or [-1], jnp.int32)
    shapes = jnp.asarray(list(table.values()) or [(centre, width)], jnp.float32)  # [T, 2]

    def shape_of(t0):
        hit = t0 == t0s
        row = shapes[jnp.argmax(hit)]
        return jnp.where(hit.any(), row[0], centre), jnp.where(hit.any(), row[1], width)

    def plan_of(t0):
        c, s = shape_of(t0)
        return midpeak_plan(t0, options.simulations, c, s, moves, floor=floor)

    def choose(inputs: ClockInputs, keys: jax.Array) -> jax.Array:
        plans = jax.vmap(plan_of)(inputs.initial_time)  # [B, moves]
        move = inputs.move
        planned = jnp.take_along_axis(plans, jnp.minimum(move, moves - 1)[:, None], 1)[:, 0]
        wanted = jnp.where(move < moves, planned, 1)
        return _fit_down(wanted, affordable(options, inputs.my_time))

    return choose


def midpeak_grid(
    centres: Sequence[float] = (0.15, 0.25, 0.35, 0.5, 0.65),
    widths: Sequence[float] = (0.15, 0.3, 0.5, 1.0),
) -> tuple[tuple[float, float], ...]:
    """The (centre, width) pairs to sweep when tuning midpeak per T0 (the defaults hold the
    reference's (0.35, 0.3); width 1.0 is nearly flat: an even spread)."""
    return tuple((float(c), float(s)) for c in centres for s in widths)


def uncertainty_of(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """`[B]` float32 in [0, 1]: how unsure the policy is, u = (H / ln L + 1 - (p1 - p2)) / 2,
    with p the softmax of the legal logits, H its entropy, L the number of legal moves
    (at least 2) and p1 >= p2 its two largest probabilities. 0: one certain move; 1: flat."""
    p = jax.nn.softmax(jnp.where(legal, logits, -jnp.inf), axis=-1)
    entropy = -jnp.sum(jnp.where(p > 0, p * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0), -1)
    legal_n = jnp.maximum(legal.sum(-1), 2).astype(jnp.float32)
    top2 = jax.lax.top_k(p, 2)[0]
    gap = top2[..., 0] - top2[..., 1]
    return jnp.clip(0.5 * (entropy / jnp.log(legal_n) + 1.0 - gap), 0.0, 1.0)


def uncertainty(
    options: ClockOptions,
    *,
    confident: float = CONFIDENT_SCALE,
    unsure: float = UNSURE_SCALE,
    safety: float = SAFETY,
) -> ClockChooser:
    """Search statistics: the proportional allowance scaled by how unsure the planner's policy
    is at the root, allowance = (confident + (unsure - confident) u) * proportional allowance,
    u = `uncertainty_of(logits, legal)`; the largest option that fits in it, else policy-only.
    Reads `inputs.logits` and `inputs.legal` (`clock_inputs(states, out)`)."""

    def choose(inputs: ClockInputs, keys: jax.Array) -> jax.Array:
        moves = own_moves_left(inputs.ply, max_plies=options.max_plies)
        base = proportional_allowance(inputs.my_time, moves, safety=safety)
        u = uncertainty_of(inputs.logits, inputs.legal)
        return _within(options, inputs.my_time, (confident + (unsure - confident) * u) * base)

    return choose


def _bar_option(options: ClockOptions, bar: Mapping[int, int]) -> Callable[[jax.Array], jax.Array]:
    """`option(initial_time [B]) -> [B]` the option index of the bar's budget at each game's T0:
    the budget tuned at the nearest tuned T0 by ratio (|log T0 - log t|; ties: the shorter
    clock). Checks the table now."""
    if not bar:
        raise ValueError("the clock-aware bar needs a table T0 -> k (rtplan eval --tune-fixed)")
    t0s = sorted(bar)
    if t0s[0] <= 0:
        raise ValueError(f"the bar's clocks must be positive, got {t0s}")
    if odd := sorted({bar[t] for t in t0s} - set(options.budgets)):
        raise ValueError(f"the bar's budgets {odd} are not the planner's {list(options.budgets)}")
    logs = np.log(np.asarray(t0s, np.float32))
    index = np.asarray([options.index(bar[t]) for t in t0s], np.int32)

    def option(initial_time: jax.Array) -> jax.Array:
        t = jnp.log(jnp.maximum(jnp.asarray(initial_time, jnp.float32), 1.0))
        return jnp.asarray(index)[jnp.argmin(jnp.abs(t[..., None] - logs), axis=-1)]

    return option


def bar_nearest(options: ClockOptions, bar: Mapping[int, int]) -> ClockChooser:
    """The clock-aware bar at any clock: always-k with k the fixed budget tuned at the nearest
    tuned T0 (`bar`: T0 -> k, `rtplan eval --tune-fixed`'s `per_t0`); at a tuned T0 it plays that
    T0's budget exactly, as the composed `k-per-t0` condition does."""

    bar_option = _bar_option(options, bar)

    def choose(inputs: ClockInputs, keys: jax.Array) -> jax.Array:
        wanted = bar_option(inputs.initial_time)
        return _fit_down(wanted, affordable(options, inputs.my_time))

    return choose


def bar_uncertainty(
    options: ClockOptions,
    bar: Mapping[int, int],
    *,
    confident: float = BAR_CONFIDENT,
    unsure: float = BAR_UNSURE,
) -> ClockChooser:
    """The bar spent by the position: the bar's budget at this T0 (`bar_nearest`), one budget
    larger where the planner's policy is unsure (`uncertainty_of` >= `unsure`) and one smaller
    (never below the smallest search) where it is sure (<= `confident`). A whole-game rule: what
    a sure move saves, a later unsure one spends."""

    bar_option = _bar_option(options, bar)

    def choose(inputs: ClockInputs, keys: jax.Array) -> jax.Array:
        base = bar_option(inputs.initial_time)
        u = uncertainty_of(inputs.logits, inputs.legal)
        step = jnp.where(u >= unsure, 1, jnp.where(u <= confident, -1, 0))
        wanted = jnp.clip(base + step, 1, len(options.budgets))
        return _fit_down(wanted, affordable(options, inputs.my_time))

    return choose


def baselines(
    options: ClockOptions,
    *,
    tuned: Mapping[int, tuple[float, float]] | None = None,
    bar: Mapping[int, int] | None = None,
) -> dict[str, ClockChooser]:
    """Every baseline by condition name: `k<k>` (always-k) per budget, `random`,
    `policy-only`, `greedy`, `proportional`, `midpeak` (with `tuned` shapes per T0, if
    given) and `uncertainty`; with the clock-aware bar's table `bar` (T0 -> k), also
    `bar-nearest` and `bar-uncertainty`."""
    every = {
        **{f"k{k}": always(options, k) for k in options.budgets},
        "random": random_option(options),
        "policy-only": policy_only(options),
        "greedy": greedy(options),
        "proportional": proportional(options),
        "midpeak": midpeak(options, tuned=tuned),
        "uncertainty": uncertainty(options),
    }
    if bar:
        every[BAR_NEAREST] = bar_nearest(options, bar)
        every[BAR_UNCERTAINTY] = bar_uncertainty(options, bar)
    return every
