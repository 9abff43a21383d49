"""Settings of one clock-gate training run (`rtplan train-gate` on a clock game; the PPO knobs
both kinds share: `gate.config.PPOConfig`); imports no JAX."""

from __future__ import annotations

import dataclasses

from rtplan.gate.config import PPOConfig, kind_knob
from rtplan.harness.config import knob

#: The condition names of the clock-aware bar's rules (`heuristics.baselines` holds them once
#: the bar is tuned). Here, not beside the rules, so this JAX-free module can tell them apart.
BAR_NEAREST = "bar-nearest"
BAR_UNCERTAINTY = "bar-uncertainty"
BAR_RULES = frozenset({BAR_NEAREST, BAR_UNCERTAINTY})

#: T0 per episode in self-play, drawn uniformly (the paper's set, reference-notes section 5c).
TRAIN_CLOCKS = (100, 300, 600, 900, 1200, 1800, 2300, 2900, 3500, 4100, 4800, 5700)


@dataclasses.dataclass(frozen=True)
class ClockGateConfig:
    """Shape of the recurrent clock gate (`gate.clock.network.ClockGateNet`)."""

    #: Width of the board encoder (one Dense over the flattened planes: small convs are slow on
    #: XLA:CPU) and of the planner-feature encoder.
    encoder: int = 64
    #: Hidden units of the time-feature encoder.
    time_hidden: int = 32
    #: GRU state size.
    hidden: int = 128
    #: Hidden units of the policy/value head after the GRU.
    head_hidden: int = 128
    #: A baseline whose choice is added to the logits as `prior_scale` x its one-hot
    #: ("proportional", or any name of `gate.clock.heuristics.baselines` that reads only the
    #: clocks); "none": no prior. A fresh gate then plays mostly the baseline's choice and
    #: learns where to deviate from it.
    prior: str = "none"
    #: The prior's weight in logits (3: about 0.8 of a fresh gate's probability over 5 options).
    prior_scale: float = 3.0
    #: The gate also reads how unsure the frozen planner is at the position: the two numbers
    #: of `gate.stats.planner_stats` (entropy over legal moves, top-two logit gap).
    stats: bool = False
    #: The clock-aware bar's table as sorted (T0, k) pairs, recorded in the gate so a bar rule
    #: (`bar-nearest`) can be its prior wherever the gate plays; empty: no bar.
    bar: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        # A gate file's JSON holds the pairs as lists.
        object.__setattr__(self, "bar", tuple(sorted((int(t), int(k)) for t, k in self.bar)))

    def with_bar(self, bar: dict[int, int] | None) -> ClockGateConfig:
        """This shape with the bar's table (T0 -> k) recorded where the prior is one of the
        bar's rules (`BAR_RULES`), which read it wherever the gate plays."""
        if not bar or self.prior not in BAR_RULES:
            return self
        return dataclasses.replace(self, bar=tuple(bar.items()))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClockGateTrainConfig(PPOConfig):
    """Settings of one recurrent PPO run of a clock game's gate (self-play over random clocks)."""

    # The shared knobs (`PPOConfig`, in its order) with this kind's defaults.
    iterations: int = kind_knob("iterations", 200)
    num_envs: int = kind_knob(
        "num_envs", 16, "Games played in parallel (self-play: both sides are the gate)."
    )
    minibatches: int = kind_knob(
        "minibatches", 4, "Minibatches of chunks per pass (they must divide the chunks)."
    )
    gamma: float = kind_knob("gamma", 0.99, "Discount per own move (per-side GAE).")
    ent_coef: float = kind_knob(
        "ent_coef", 0.01, "Entropy bonus coefficient (the reference's clock PPO: 0.01)."
    )
    eval_every: int = kind_knob("eval_every", 5)
    checkpoint_every: int = kind_knob("checkpoint_every", 2)
    devices: int = kind_knob(
        "devices", 1, "Devices each option group is split across (jax.shard_map)."
    )
    # This kind's own.
    plies: int = knob(64, "Plies per game per rollout (each ply is one side's decision).")
    chunk: int = knob(16, "Plies per recurrent training chunk (each stores its start state).")
    opponents: str = knob(
        "",
        "Comma-separated baselines mixed into self-play (names of rtplan.gate.clock.heuristics."
        "baselines, e.g. the pool: policy-only,k2,k8,k32,k128,random); empty: pure self-play.",
    )
    opponent_share: float = knob(
        0.5, "Share of training games where one side (drawn per game) is one of `opponents`."
    )
    opening_plies: int = knob(
        6, "Training games start from an even number of random moves, up to this many."
    )
    gate_encoder: int = knob(64, "Width of the gate's board and planner-feature encoders.")
    gate_hidden: int = knob(128, "GRU state size.")
    gate_head: int = knob(128, "Hidden units of the gate's head.")
    gate_prior: str = knob(
        "none",
        "A baseline added to the gate's logits as a prior (e.g. proportional: a fresh gate "
        "plays mostly its choice and learns where to deviate); none: no prior.",
    )
    gate_prior_scale: float = knob(3.0, "Weight of the prior's one-hot in the gate's logits.")
    gate_stats: bool = knob(
        False,
        "The gate also reads how unsure the planner is at the position (its policy's entropy "
        "over the legal moves and top-two gap, as the committed gates' --gate-stats).",
    )
    bar: str = knob(
        "",
        "The clock-aware bar's table (rtplan eval --tune-fixed's fixed-per-t0.json): its rules "
        "bar-nearest and bar-uncertainty become opponents and eval opponents by name.",
    )
    eval_seeds: int = knob(
        8, "Tuning openings per evaluation clock (each played twice, colours swapped)."
    )
    eval_clocks: str = knob("300,2300", "Comma-separated T0s of the in-training evaluation.")
    eval_opponent: str = knob(
        "32",
        "Opponent of the in-training evaluation: a budget (always-k; 0 policy-only) or a "
        "baseline's name, e.g. proportional.",
    )

    def __post_init__(self) -> None:
        # Runs saved before opponents had names hold a budget (an int).
        object.__setattr__(self, "eval_opponent", str(self.eval_opponent))
        super().__post_init__()
        for name in ("plies", "chunk"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.plies % self.chunk:
            raise ValueError(f"chunk={self.chunk} does not divide plies={self.plies}")
        if self.num_chunks % self.minibatches:
            raise ValueError(
                f"minibatches={self.minibatches} does not divide the {self.num_chunks} chunks "
                f"({self.num_envs} games x {self.plies // self.chunk} chunks each)"
            )
        if not 0.0 <= self.opponent_share <= 1.0:
            raise ValueError(f"opponent_share must be in [0, 1], got {self.opponent_share}")
        if self.opening_plies < 0:
            raise ValueError(f"opening_plies must be >= 0, got {self.opening_plies}")
        if self.eval_seeds < 0:
            raise ValueError(f"eval_seeds must be >= 0, got {self.eval_seeds}")
        self.eval_t0s  # noqa: B018  (parses, so a bad list fails at start-up)

    @property
    def num_chunks(self) -> int:
        """Training chunks per rollout: `num_envs` x `plies / chunk`."""
        return self.num_envs * (self.plies // self.chunk)

    @property
    def opponent_names(self) -> tuple[str, ...]:
        """The baselines mixed into self-play (checked against the game's baselines by the
        trainer)."""
        return tuple(n.strip() for n in self.opponents.split(",") if n.strip())

    @property
    def eval_t0s(self) -> tuple[int, ...]:
        """The in-training evaluation's clocks."""
        try:
            t0s = tuple(int(t) for t in self.eval_clocks.split(",") if t.strip())
        except ValueError as e:
            raise ValueError(f"eval_clocks must list ints, got {self.eval_clocks!r}") from e
        if any(t < 0 for t in t0s):
            raise ValueError(f"eval_clocks must be >= 0, got {t0s}")
        return t0s

    @property
    def gate_config(self) -> ClockGateConfig:
        """The gate network's shape (without the bar's table: the trainer reads `bar` and
        records it with `ClockGateConfig.with_bar`)."""
        return ClockGateConfig(
            encoder=self.gate_encoder,
            hidden=self.gate_hidden,
            head_hidden=self.gate_head,
            prior=self.gate_prior,
            prior_scale=self.gate_prior_scale,
            stats=self.gate_stats,
        )


def eval_opponent_name(opponent: str | int) -> str:
    """The baseline name of an in-training evaluation opponent: a budget k is `k<k>`, 0
    `policy-only`, a name itself."""
    text = str(opponent)
    if text.isdigit():
        return f"k{int(text)}" if int(text) else "policy-only"
    return text
