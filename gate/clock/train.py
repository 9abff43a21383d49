"""The clock gate's trainer: recurrent PPO by self-play over random clocks, options grouped.

One `harness` algorithm (`ClockGatePPO`): its rollout, learning step, evaluation and checkpoint
state share the same jitted pieces and self-play carry (baseline opponents mixed in included),
so it stays one file past ~450 lines.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from rtplan import games
from rtplan.gate.clock.config import TRAIN_CLOCKS, ClockGateTrainConfig, eval_opponent_name
from rtplan.gate.clock.gate import CLOCK_GATE_KIND, ClockGate, ClockGateCarry, clock_gate_player
from rtplan.gate.clock.heuristics import baselines, clock_inputs
from rtplan.gate.clock.network import NO_OPTION
from rtplan.gate.clock.players import chooser_player, read_bar
from rtplan.gate.clock.ppo import ClockChunks, make_clock_update
from rtplan.gate.gae import side_gae
from rtplan.gate.trainer import GateTrainer
from rtplan.harness.run import Run
from rtplan.planner.batching import SKIP, OptionRunner
from rtplan.planner.episodes import seeds_of
from rtplan.planner.matches import clock_opening, play_match
from rtplan.planner.options import OptionOutput, Planner

__all__ = ["ClockGatePPO", "ClockGateState", "SelfPlay", "clock_gate_trainer"]

#: `SelfPlay.opp_side` of a game both of whose sides are the gate.
SELF_PLAY = -1


@struct.dataclass
class SelfPlay:
    """The running training games `[B]`: both sides are the gate, each with its own state, or
    (mixed training) one side is a baseline opponent."""

    states: games.State  # [B]
    carry: jax.Array  # [B, 2, hidden] each side's GRU state, by player id
    last: jax.Array  # [B, 2] int32 each side's last option (NO_OPTION: none yet)
    start: jax.Array  # [B] bool the next ply is the first of its episode
    keys: jax.Array  # [B, 2] per-game keys (option sampling, search, the next opening)
    spent: jax.Array  # [B] int32 ticks both sides spent in the running episode
    opp_side: jax.Array  # [B] int32 the player id a baseline plays (SELF_PLAY: none)
    opp_index: jax.Array  # [B] int32 which of the run's `opponents` it is


@struct.dataclass
class ClockGateState:
    """Everything that changes during a run (all of it is checkpointed: a resume is exact)."""

    params: Any  # gate variables
    opt_state: Any  # Adam state
    games: SelfPlay  # [B] games in flight
    key: jax.Array  # [2] learner key (minibatch order)


def _stack(steps: list):
    return jax.tree.map(lambda *x: jnp.stack(x), *steps)


@functools.lru_cache(maxsize=4)
def _runner(pcfg, max_batch: int, devices: int) -> OptionRunner:
    return OptionRunner(Planner(pcfg), max_batch=max_batch, devices=devices)


class ClockGatePPO(GateTrainer):
    """Recurrent PPO of a clock game's gate by self-play, driven by `harness.run.Run` (the
    frozen planner, Adam, metadata and checkpoint: `gate.trainer.GateTrainer`).

    One iteration:

    1. Rollout: `plies` host steps of `num_envs` auto-reset games. Each episode draws T0 from
       `TRAIN_CLOCKS` and starts from a random opening (keys split from `PRNGKey(seed)`: the
       train range, disjoint from the tuning and evaluation seeds). Each ply: one jitted call
       evaluates the frozen planner and steps the mover's gate (its own GRU state, by player id)
       and samples an option among those its clock can pay; the `OptionRunner` runs each
       chosen budget once per group of games that chose it (only the chosen options are
       computed; policy-only is the masked argmax of the planner's logits, free); one jitted
       call applies the moves and starts new games where one ended (zeroed GRU states).
       With `opponents`, a share of the games (drawn per episode) has one side, at random,
       played by a baseline of `gate.clock.heuristics.baselines`: its plies are not the gate's
       decisions (out of the loss and of the GAE's chains, `decides` False) and do not step
       the gate's state of that side.
       The MCTS move is the planner's own option move (`Planner.option`: mctx's Gumbel action
       at the planner's gumbel_scale, 0 when shipped, i.e. deterministic), exactly as every
       evaluation and the services play it.
    2. Per-side GAE (`gate.gae.side_gae`, gamma per own move), then `epochs` x `minibatches`
       Adam steps of the clipped loss over chunks of `chunk` plies replayed from their stored
       GRU states (`gate.clock.ppo.clock_ppo_loss`).
    """

    kind = CLOCK_GATE_KIND
    what = "clock gate"
    config_key = "clock_gate_config"
    progress = {"loss": "loss", "budget": "mean_budget", "ent": "entropy", "eval": "eval_score"}

    def __init__(self, cfg: ClockGateTrainConfig) -> None:
        super().__init__(cfg.game_id, cfg.planner, lr=cfg.lr, max_grad_norm=cfg.max_grad_norm)
        self.cfg = cfg
        pcfg = self.planner_config
        self.planner = Planner(pcfg)
        self.game = self.planner.game
        bar = read_bar(cfg.bar) if cfg.bar else None
        self.gate = ClockGate(self.planner, cfg.gate_config.with_bar(bar))
        self.options = self.gate.options
        self.budgets = self.options.budgets
        self.n = self.gate.num_options
        every = baselines(self.options, bar=bar)
        self._eval_opponent = eval_opponent_name(cfg.eval_opponent)
        if self._eval_opponent not in every:
            raise ValueError(
                f"eval_opponent={cfg.eval_opponent!r} is not 0, a budget of "
                f"{self.options.budgets} or a baseline of {list(every)}"
            )
        self._eval_chooser = every[self._eval_opponent]
        if unknown := [n for n in cfg.opponent_names if n not in every]:
            raise ValueError(f"opponents: unknown baseline(s) {unknown}; known: {list(every)}")
        self._opponents = tuple(every[n] for n in cfg.opponent_names)
        self._ks = np.asarray((SKIP, *self.options.budgets))  # option index -> runner budget
        self._sims = self.options.costs.astype(np.int64)  # option index -> ticks
        self.runner = _runner(pcfg, max(cfg.num_envs, 2 * cfg.eval_seeds, 1), cfg.devices)
        self.columns = (
            "loss",
            "policy_loss",
            "value_loss",
            "entropy",
            "approx_kl",
            "clip_frac",
            "grad_norm",
            "mean_budget",
            *(f"opt_{b}" for b in ("policy", *self.options.budgets)),
            "no_choice",
            "episodes",
            "episode_plies",
            "clock_used",
            "option_cost_ratio",
            "padded_cost_ratio",
            "mixed_games",
            "score_vs_opponents",
            "rollout_s",
            "learn_s",
            *(f"eval_t{t}" for t in cfg.eval_t0s),
            "eval_score",
            "eval_budget",
        )
        self._decide = jax.jit(self._decide_fn)
        self._finish = jax.jit(self._finish_fn)
        self._fresh_games = jax.jit(self._fresh_games_fn)
        self._start_games = jax.jit(self._start_games_fn, static_argnums=1)
        self._bootstrap = jax.jit(self._bootstrap_fn)
        self._learn = jax.jit(self._learn_fn)
        self._evaluate_net = jax.jit(self.planner.evaluate)
        self._apply = jax.jit(self._apply_fn)

    # ---- pure pieces (jitted in __init__) ----

    def _fresh_games_fn(self, keys: jax.Array) -> games.State:
        """New training games `[B]` from per-game keys: an opening and a T0 drawn per game."""

        def one(key):
            init_key, t0_key = jax.random.split(key)
            state = clock_opening(self.game, init_key, self.cfg.opening_plies)
            t0 = jnp.asarray(TRAIN_CLOCKS, jnp.int32)[
                jax.random.randint(t0_key, (), 0, len(TRAIN_CLOCKS))
            ]
            return self.game.set_initial_time(state, t0)

        return jax.vmap(one)(keys)

    def _opponents_fn(self, keys: jax.Array) -> tuple[jax.Array, jax.Array]:
        """`[B]` (opp_side, opp_index) of new games from their keys: a baseline with
        probability `opponent_share` (none without `opponents`), on a side drawn at random."""
        n = len(self._opponents)
        if n == 0 or self.cfg.opponent_share == 0.0:
            return jnp.full(keys.shape[:1], SELF_PLAY, jnp.int32), jnp.zeros(keys.shape[:1], int)

        def one(key):
            mixed, side, which = jax.random.split(jax.random.fold_in(key, 1), 3)
            opp = jax.random.bernoulli(mixed, self.cfg.opponent_share)
            side = jax.random.randint(side, (), 0, 2)
            return jnp.where(opp, side, SELF_PLAY), jax.random.randint(which, (), 0, n)

        side, index = jax.vmap(one)(keys)
        return side.astype(jnp.int32), index.astype(jnp.int32)

    def _start_games_fn(self, key: jax.Array, n: int) -> SelfPlay:
        keys = jax.random.split(key, (n, 2))
        opp_side, opp_index = self._opponents_fn(keys[:, 0])
        return SelfPlay(
            states=self._fresh_games_fn(keys[:, 0]),
            carry=jnp.zeros((n, 2, self.gate.config.hidden), jnp.float32),
            last=jnp.full((n, 2), NO_OPTION, jnp.int32),
            start=jnp.ones((n,), bool),
            keys=keys[:, 1],
            spent=jnp.zeros((n,), jnp.int32),
            opp_side=opp_side,
            opp_index=opp_index,
        )

    def _decide_fn(self, params, planner_params, sp: SelfPlay):
        split = jax.vmap(lambda k: jax.random.split(k, 4))(sp.keys)
        carried, sample, search, reset = (split[:, i] for i in range(4))
        states = sp.states
        out = self.planner.evaluate(planner_params, states)
        mover = states.current_player

        def side(x):
            return jnp.take_along_axis(x, mover.reshape(-1, *(1,) * (x.ndim - 1)), 1)[:, 0]

        own = ClockGateCarry(h=side(sp.carry), last=side(sp.last))
        new, x, logits, value, mask = self.gate.step(params, own, states, out)
        option = jax.vmap(jax.random.categorical)(sample, logits).astype(jnp.int32)
        theirs = mover == sp.opp_side  # a baseline's ply: not the gate's decision
        if self._opponents:
            inputs = clock_inputs(states, out)
            picks = jnp.stack([choose(inputs, sample) for choose in self._opponents])
            option = jnp.where(theirs, picks[sp.opp_index, jnp.arange(option.shape[0])], option)
        log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), option[:, None], 1)[:, 0]
        is_mover = (jnp.arange(2)[None, :] == mover[:, None]) & ~theirs[:, None]
        sp = sp.replace(
            carry=jnp.where(is_mover[..., None], new.h[:, None, :], sp.carry),
            last=jnp.where(is_mover, option[:, None], sp.last),
            keys=carried,
        )
        record = dict(
            inputs=x,
            mover=mover,
            start=sp.start,
            decides=~theirs,
            mask=mask,
            action=option,
            log_prob=log_prob,
            value=value,
        )
        reflex = self.planner.masked_argmax(out.logits, states.legal_action_mask)
        return sp, record, option, reflex, search, reset

    def _apply_fn(self, states, option, reflex, out: OptionOutput):
        """The next states and costs: policy-only plays `reflex` for free, else the option."""
        po = option == 0
        free = jax.vmap(self.game.step)(states, reflex, jnp.zeros_like(reflex))
        return games.tree_where(po, free, out.next_state), jnp.where(po, 0, out.cost)

    def _finish_fn(self, sp: SelfPlay, option, reflex, out: OptionOutput, reset_keys):
        nxt, cost = self._apply_fn(sp.states, option, reflex, out)
        done = nxt.done
        spent = sp.spent + cost
        t0 = sp.states.inner.initial_time
        mixed = done & (sp.opp_side != SELF_PLAY)
        gate_side = jnp.clip(1 - sp.opp_side, 0, 1)
        gate_reward = jnp.take_along_axis(nxt.inner.rewards, gate_side[:, None], 1)[:, 0]
        stats = dict(
            episodes=done.sum(),
            mixed_games=mixed.sum(),
            mixed_score_sum=jnp.where(mixed, (gate_reward + 1.0) / 2.0, 0.0).sum(),
            plies_sum=jnp.where(done, nxt.frame, 0).sum(),
            clock_used_sum=jnp.where(done, spent / jnp.maximum(2.0 * t0, 1.0), 0.0).sum(),
        )
        record = dict(reward=nxt.inner.rewards, done=done)
        fresh = self._fresh_games_fn(reset_keys)
        opp_side, opp_index = self._opponents_fn(reset_keys)
        sp = SelfPlay(
            states=games.tree_where(done, fresh, nxt),
            carry=jnp.where(done[:, None, None], 0.0, sp.carry),
            last=jnp.where(done[:, None], NO_OPTION, sp.last),
            start=done,
            keys=sp.keys,
            spent=jnp.where(done, 0, spent),
            opp_side=jnp.where(done, opp_side, sp.opp_side),
            opp_index=jnp.where(done, opp_index, sp.opp_index),
        )
        return sp, record, stats

    def _bootstrap_fn(self, params, planner_params, sp: SelfPlay):
        """`[B, 2]` each side's value at its next decision: the mover's gate value at the
        current state, and minus it for the other side (zero-sum: its next state is unseen)."""
        states = sp.states
        out = self.planner.evaluate(planner_params, states)
        mover = states.current_player
        h = jnp.take_along_axis(sp.carry, mover[:, None, None], 1)[:, 0]
        last = jnp.take_along_axis(sp.last, mover[:, None], 1)[:, 0]
        _, _, _, value, _ = self.gate.step(params, ClockGateCarry(h=h, last=last), states, out)
        return jnp.where(jnp.arange(2)[None, :] == mover[:, None], value[:, None], -value[:, None])

    def _learn_fn(self, params, opt_state, steps: dict, carries, bootstrap, key):
        cfg = self.cfg
        adv, target = side_gae(
            steps["reward"],
            steps["value"],
            steps["done"],
            steps["mover"],
            steps["decides"],
            bootstrap,
            gamma=cfg.gamma,
            lam=cfg.lam,
        )
        length = cfg.chunk

        def chunked(x):  # [T, B, ...] -> [C * B, L, ...] (chunk-major, then game)
            t, b = x.shape[:2]
            x = x.reshape(t // length, length, b, *x.shape[2:])
            return jnp.swapaxes(x, 1, 2).reshape(t // length * b, length, *x.shape[3:])

        batch = ClockChunks(
            inputs=jax.tree.map(chunked, steps["inputs"]),
            carry=carries.reshape(-1, *carries.shape[2:]),
            mover=chunked(steps["mover"]),
            start=chunked(steps["start"]),
            decides=chunked(steps["decides"]),
            mask=chunked(steps["mask"]),
            action=chunked(steps["action"]),
            log_prob=chunked(steps["log_prob"]),
            advantage=chunked(adv),
            target=chunked(target),
        )
        update = make_clock_update(
            self.gate.net,
            self.optimizer,
            epochs=cfg.epochs,
            minibatches=cfg.minibatches,
            clip=cfg.clip,
            vf_coef=cfg.vf_coef,
            ent_coef=cfg.ent_coef,
        )
        return update(params, opt_state, batch, key)

    # ---- rollout ----

    def _options(self, states, option: np.ndarray, keys, alive=None):
        """Runs each game's chosen budget, grouped (policy-only and `~alive` games skipped)."""
        ks = self._ks[option]
        if alive is not None:
            ks = np.where(alive, ks, SKIP)
        return self.runner(self.planner_params, keys, states, ks)

    def rollout(self, params, sp: SelfPlay):
        """`plies` plies of every game: (games, time-major steps, chunk carries, stats)."""
        import time

        steps, stats, carries = [], [], []
        cost = dict(chosen=0, padded=0, every=0)
        option_s = 0.0
        for t in range(self.cfg.plies):
            if t % self.cfg.chunk == 0:
                carries.append(sp.carry)
            sp_next, record, option, reflex, search, reset = self._decide(
                params, self.planner_params, sp
            )
            option = np.asarray(option)
            start = time.perf_counter()
            out = self._options(sp.states, option, search)
            option_s += time.perf_counter() - start
            self._count_cost(option, cost)
            sp, rec2, stat = self._finish(sp_next, option, reflex, out, reset)
            steps.append(dict(record, **rec2))
            stats.append(stat)
        return sp, _stack(steps), jnp.stack(carries), jax.device_get(_stack(stats)), cost

    def _count_cost(self, option: np.ndarray, cost: dict) -> None:
        """Simulations run: the chosen options, as padded by the runner's ladder, and what
        computing every option for every game would cost (the reference's way)."""
        for i in set(option.tolist()) - {0}:
            n = int((option == i).sum())
            cost["chosen"] += n * self._sims[i]
            cost["padded"] += self.runner.bucket(n) * self._sims[i]
        cost["every"] += len(option) * int(self._sims.sum())

    # ---- harness.Algorithm ----

    def metadata(self) -> dict[str, Any]:
        return {**super().metadata(), "train_clocks": list(TRAIN_CLOCKS)}

    def init(self) -> ClockGateState:
        key, init_key, games_key = jax.random.split(jax.random.PRNGKey(self.cfg.seed), 3)
        params, opt_state = self.fresh(init_key)
        return ClockGateState(
            params=params,
            opt_state=opt_state,
            games=self._start_games(games_key, self.cfg.num_envs),
            key=key,
        )

    def step(self, state: ClockGateState) -> tuple[ClockGateState, dict]:
        import time

        key, learn_key = jax.random.split(state.key)
        start = time.perf_counter()
        sp, steps, carries, stats, cost = self.rollout(state.params, state.games)
        boot = self._bootstrap(state.params, self.planner_params, sp)
        rollout_s = time.perf_counter() - start
        params, opt_state, lstats = self._learn(
            state.params, state.opt_state, steps, carries, boot, learn_key
        )
        metrics = {k: float(v) for k, v in jax.device_get(lstats).items()}
        metrics["learn_s"] = time.perf_counter() - start - rollout_s
        metrics["rollout_s"] = rollout_s
        decides = np.asarray(steps["decides"])
        option = np.asarray(steps["action"])[decides]  # the gate's own decisions
        metrics["mean_budget"] = float(self.options.budget(option).mean())
        for i, b in enumerate(("policy", *self.options.budgets)):
            metrics[f"opt_{b}"] = float((option == i).mean())
        metrics["no_choice"] = float((np.asarray(steps["mask"])[decides].sum(-1) <= 1).mean())
        episodes = int(stats["episodes"].sum())
        metrics["episodes"] = episodes
        metrics["frames"] = decides.size
        mixed = int(stats["mixed_games"].sum())
        metrics["mixed_games"] = mixed
        metrics["score_vs_opponents"] = (
            float(stats["mixed_score_sum"].sum()) / mixed if mixed else None
        )
        metrics["episode_plies"] = float(stats["plies_sum"].sum()) / episodes if episodes else None
        metrics["clock_used"] = (
            float(stats["clock_used_sum"].sum()) / episodes if episodes else None
        )
        metrics["option_cost_ratio"] = cost["chosen"] / cost["every"]
        metrics["padded_cost_ratio"] = cost["padded"] / max(cost["chosen"], 1)
        new = ClockGateState(params=params, opt_state=opt_state, games=sp, key=key)
        return new, metrics

    # ---- evaluation: the greedy gate against one baseline on tuning openings ----

    def evaluate(self, state: ClockGateState, iteration: int) -> tuple[float, dict]:
        """The greedy gate against `eval_opponent` (always-k, policy-only or a heuristic) at
        each of `eval_clocks` on the first `eval_seeds` tuning openings, colours swapped; the
        score is the mean over the clocks."""
        del iteration
        cfg = self.cfg
        seeds = seeds_of("tuning", cfg.eval_seeds)
        opponent = chooser_player(self._eval_opponent, self._eval_chooser)
        # The greedy gate with this iteration's params (its choose compiles once per call).
        gate = clock_gate_player(self.gate, jax.device_get(state.params))
        columns, all_budgets = {}, []
        for t0 in cfg.eval_t0s:
            played = play_match(
                self.planner,
                self.planner_params,
                gate,
                opponent,
                seeds,
                max_plies=self.game.max_plies,
                opening_plies=cfg.opening_plies,
                initial_time=t0,
            )
            columns[f"eval_t{t0}"] = float(played.returns.mean())
            all_budgets.append(np.concatenate(played.ks))
        mean = float(np.mean(list(columns.values()))) if columns else 0.0
        columns["eval_score"] = mean
        columns["eval_budget"] = float(np.concatenate(all_budgets).mean()) if all_budgets else 0.0
        return mean, columns

    def saved_extra(self, state: ClockGateState) -> dict[str, Any]:
        return {"games": state.games}

    def template_extra(self, meta: dict) -> dict[str, Any]:
        """The games' shapes (a run saved before mixed training has no opponents' fields)."""
        games_shape = jax.eval_shape(
            lambda k: self._start_games_fn(k, self.cfg.num_envs), jax.random.PRNGKey(0)
        )
        if "opponents" not in meta.get("train_config", {}):  # saved before mixed training
            games_shape = {
                f.name: getattr(games_shape, f.name)
                for f in dataclasses.fields(SelfPlay)
                if not f.name.startswith("opp_")
            }
        return {"games": games_shape}

    def restore(self, tree: dict, meta: dict) -> ClockGateState:
        del meta
        games_ = jax.tree.map(jnp.asarray, tree["games"])
        if isinstance(games_, dict):  # saved before mixed training: every game is self-play
            n = games_["start"].shape[0]
            games_ = SelfPlay(
                **games_,
                opp_side=jnp.full((n,), SELF_PLAY, jnp.int32),
                opp_index=jnp.zeros((n,), jnp.int32),
            )
        return ClockGateState(
            params=tree["params"],
            opt_state=tree["opt_state"],
            games=games_,
            key=jnp.asarray(tree["key"]),
        )


def clock_gate_trainer(
    cfg: ClockGateTrainConfig, out_dir: str | Path, **kwargs: Any
) -> Run[ClockGateState]:
    """A `harness.run.Run` of clock-gate PPO into `out_dir` (kwargs: `Run`'s resume, argv,
    progress, tensorboard). `run()` trains; `state` holds the `ClockGateState`."""
    return Run(ClockGatePPO(cfg), cfg, out_dir, **kwargs)
