"""Settings of one committed-game gate training run (`rtplan train-gate`'s flags; the PPO knobs
both kinds share: `gate.config.PPOConfig`); imports no JAX."""

from __future__ import annotations

import dataclasses

from rtplan.gate.config import PPOConfig, kind_knob
from rtplan.harness.config import knob

#: `reward_mode` values: the option reward R_t of the SMDP.
REWARD_MODES = ("discounted", "raw")
#: Gate network kinds (`gate.committed.network.GateConfig.kind`).
GATE_KINDS = ("mlp", "paper")
#: The options' model of later budgets (`GateConfig.tree`).
GATE_TREES = ("always-k", "gate")
#: What a simulated miss plays (`planner.options.FALLBACKS`; this module imports no JAX).
LATENCY_FALLBACKS = ("game", "reflex")
#: What an option's committed frames play (`planner.options.COMMITMENTS`; this module imports
#: no JAX): `committed`'s values, and `rtplan eval --committed`'s choices.
COMMITMENTS = ("reflex", "plan")


@dataclasses.dataclass(frozen=True)
class GateConfig:
    """Shape of the gate network."""

    #: "mlp": an MLP over the planner's pooled features, its value, the time input and a small
    #: board encoder (the default: cheap on XLA:CPU, where small convs are slow). "paper": the
    #: paper's spatial branch (1x1 lift, residual 3x3 blocks with LayerNorm, global pooling).
    kind: str = "mlp"
    #: Channels of the paper branch ("paper"), or width of the board encoder ("mlp").
    channels: int = 64
    #: Residual blocks of the paper branch (unused by "mlp").
    blocks: int = 3
    #: Hidden units of the time embedding (projected to `channels`).
    time_hidden: int = 32
    #: Hidden units of each head (policy and value).
    head_hidden: int = 256
    #: What the options this gate picks expect of later budgets inside their search trees.
    #: "always-k": the paper's tree (every deeper edge spans the option's own k). "gate": at
    #: each of its decision states the tree asks this gate (argmax) for the budget the option
    #: starting there will get, so it plans against the gate's own future (docs/gate.md,
    #: "Switching k is costly"). Everything that plays the gate plays its options this way.
    tree: str = "always-k"
    #: Also see the frozen planner's uncertainty at the state, as engines' time managers do:
    #: its policy entropy over the legal actions (over log of their number) and the gap
    #: between its top two legal logits (`gate.stats.planner_stats`).
    stats: bool = False
    #: Also see what it remembers of its episode (`gate.committed.policy.GateMemory`): the budget it
    #: chose last, the planner value's change since then and the frames since it last
    #: switched budget. Every caller of `Gate.decide` then carries its memory.
    memory: bool = False

    def __post_init__(self) -> None:
        if self.kind not in GATE_KINDS:
            raise ValueError(f"gate kind {self.kind!r} is not one of {GATE_KINDS}")
        if self.tree not in GATE_TREES:
            raise ValueError(f"gate tree {self.tree!r} is not one of {GATE_TREES}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class GateTrainConfig(PPOConfig):
    """Settings of one PPO run of the gate over a frozen planner (paper table 3 defaults)."""

    # The shared knobs (`PPOConfig`, in its order) with this kind's defaults.
    iterations: int = kind_knob("iterations", 1000)
    num_envs: int = kind_knob("num_envs", 32, "Games played in parallel (all devices' together).")
    minibatches: int = kind_knob(
        "minibatches",
        16,
        "Minibatches per pass (they must divide num_envs / devices * meta_steps).",
    )
    gamma: float | None = kind_knob(
        "gamma", None, "Discount per frame; None: the planner's (0.997 Snake, 0.99 the others)."
    )
    ent_coef: float | None = kind_knob(
        "ent_coef", None, "Entropy bonus coefficient; None: 0.05 (Snake), 0.01 (the others)."
    )
    eval_every: int = kind_knob("eval_every", 10)
    checkpoint_every: int = kind_knob("checkpoint_every", 10)
    devices: int = kind_knob(
        "devices",
        1,
        "Data-parallel devices (on CPU one per core; with several processes all of theirs): "
        "each plays num_envs / devices of the games and the update averages their gradients.",
    )
    # This kind's own.
    meta_steps: int = knob(384, "Meta-steps (gate decisions) per game per rollout.")
    reward_mode: str = knob(
        "discounted",
        "Option reward R_t: 'discounted' sum_j gamma^j r_j (the paper's equation, consistent "
        "with the gamma^k bootstrap) or 'raw' sum_j r_j (its table and the reference code).",
    )
    truncation_bootstrap: bool = knob(
        True, "At the horizon, bootstrap from the truncated state's value (else treat as an end)."
    )
    init_k: int | None = knob(
        None,
        "Start the policy at this budget (e.g. the best fixed k on tuning seeds) with probability "
        "init_prob, the rest spread evenly; None: the network's own init (near-uniform).",
    )
    init_prob: float = knob(0.7, "Initial probability of init_k (with --init-k).")
    gate: str = knob("mlp", "Gate network: 'mlp' (cheap) or 'paper' (conv branch).")
    gate_channels: int = knob(64, "Gate board branch width.")
    gate_blocks: int = knob(3, "Residual blocks of the 'paper' gate.")
    gate_hidden: int = knob(256, "Hidden units of each gate head.")
    gate_stats: bool = knob(
        False,
        "Also feed the gate the planner's policy entropy and top-two logit gap at the state.",
    )
    gate_memory: bool = knob(
        False,
        "Also feed the gate its memory of the episode: the budget it chose last, the planner "
        "value's change since then and the frames since it last switched budget.",
    )
    gate_tree: str = knob(
        "always-k",
        "The options' model of later budgets: 'always-k' (the paper's tree) or 'gate' (the tree "
        "expects the gate's own argmax budget at each of its decision states).",
    )
    init_gate: str | None = knob(
        None,
        "Start from this gate checkpoint's params (fine-tuning, e.g. the shipped gate.msgpack; "
        "its network must be this run's); None: a fresh gate.",
    )
    latency: str = knob(
        "",
        "Simulate deployment: per-budget latency from deploy frame rows (fps_F.jsonl, several "
        "joined by commas) or an rtplan calibrate CSV (with latency_overhead_ms); each option "
        "then misses with its budget's probability at latency_fps and its landing frame plays "
        "the fallback (rtplan.gate.committed.latency). Empty: the simulated clock, no misses.",
    )
    latency_fps: float = knob(0.0, "The frame rate the misses are simulated at (with latency).")
    latency_overhead_ms: float | None = knob(
        None, "With a calibration CSV: fixed ms a deployed plan takes beyond its search."
    )
    latency_fallback: str = knob(
        "game",
        "What a missed landing frame plays: 'game' (the game's fallback action, the env "
        "server's default) or 'reflex'.",
    )
    committed: str | None = knob(
        None,
        "What an option's k-1 frames before its planned action play, in the rollouts and the "
        "evaluations: 'reflex' (the raw policy's argmax, the paper) or 'plan' (the previous "
        "option's plan where it reaches, then the reflex; needs tree_k >= 1); None: the planner "
        "checkpoint's (reflex for every shipped one). The gate file records it, and `rtplan "
        "eval` plays the gate under it only.",
    )
    tree_k: int | None = knob(
        None,
        "Frames of every edge below the search's root; None: the planner checkpoint's (0 for "
        "every shipped one: the option's own k). 1 searches every frame below the root, which "
        "gives --committed plan a plan of its own.",
    )
    budgets: tuple[int, ...] | None = knob(
        None,
        "The budgets the gate chooses among: the planner checkpoint's and larger ones (e.g. 1 2 "
        "3 4 5 6 7 8), each new k searching at the checkpoint's simulations per frame "
        "(planner.configs.with_budgets); None: the checkpoint's. The gate file records them, "
        "and `rtplan eval` and the services play the gate over them without the flag.",
    )
    eval_episodes: int = knob(16, "Greedy-gate evaluation episodes (on tuning seeds).")
    eval_max_meta_steps: int | None = knob(
        None, "Cap on meta-steps per evaluation episode; None: play to the horizon."
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.meta_steps < 1:
            raise ValueError(f"meta_steps must be >= 1, got {self.meta_steps}")
        if self.eval_episodes < 0:
            raise ValueError(f"eval_episodes must be >= 0, got {self.eval_episodes}")
        if self.num_envs % self.devices:
            raise ValueError(
                f"num_envs={self.num_envs} is not divisible by devices={self.devices} (each "
                "device plays its share of the games)"
            )
        if self.device_envs * self.meta_steps % self.minibatches:
            raise ValueError(
                f"minibatches={self.minibatches} does not divide a device's rollout of "
                f"{self.device_envs} x {self.meta_steps} meta-steps"
            )
        if self.reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode {self.reward_mode!r} is not one of {REWARD_MODES}")
        if not 0.0 < self.init_prob < 1.0:
            raise ValueError(f"init_prob must be in (0, 1), got {self.init_prob}")
        if self.gate not in GATE_KINDS:
            raise ValueError(f"gate {self.gate!r} is not one of {GATE_KINDS}")
        if self.gate_tree not in GATE_TREES:
            raise ValueError(f"gate_tree {self.gate_tree!r} is not one of {GATE_TREES}")
        if self.latency_fallback not in LATENCY_FALLBACKS:
            raise ValueError(
                f"latency_fallback {self.latency_fallback!r} is not one of {LATENCY_FALLBACKS}"
            )
        if self.committed is not None and self.committed not in COMMITMENTS:
            raise ValueError(f"committed {self.committed!r} is not one of {COMMITMENTS}")
        if self.tree_k is not None and self.tree_k < 0:
            raise ValueError(f"tree_k must be >= 0, got {self.tree_k}")
        if self.committed == "plan" and self.gate_tree == "gate":
            raise ValueError(
                "gate_tree 'gate' under committed 'plan' is not supported yet (issue 44: an "
                "option under a plan takes no Future); use gate_tree 'always-k'"
            )
        if self.init_gate is not None and self.init_k is not None:
            raise ValueError("init_gate and init_k both set the start: give one")
        if self.latency and not self.latency_fps > 0:
            raise ValueError(f"latency needs latency_fps > 0, got {self.latency_fps}")
        if not self.latency and (self.latency_fps or self.latency_overhead_ms is not None):
            raise ValueError("latency_fps and latency_overhead_ms need a latency source")

    @property
    def entropy_coef(self) -> float:
        """The entropy coefficient of the run."""
        if self.ent_coef is not None:
            return self.ent_coef
        from rtplan import (
            games,  # JAX: only when a run asks, so that building the flags stays light
        )

        return games.game_record(self.game_id).gate_entropy

    @property
    def device_envs(self) -> int:
        """Games each device plays."""
        return self.num_envs // self.devices

    @property
    def minibatch_size(self) -> int:
        """Samples per minibatch (all devices' slices together)."""
        return self.num_envs * self.meta_steps // self.minibatches

    @property
    def gate_config(self) -> GateConfig:
        """The gate network's shape."""
        return GateConfig(
            kind=self.gate,
            channels=self.gate_channels,
            blocks=self.gate_blocks,
            head_hidden=self.gate_hidden,
            tree=self.gate_tree,
            stats=self.gate_stats,
            memory=self.gate_memory,
        )
