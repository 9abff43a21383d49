"""Loading a served game: the device, its planner and gate checkpoints, their compiled options."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import jax

from rtplan import games
from rtplan.gate.clock.gate import CLOCK_GATE_KIND, ClockGate, load_clock_gate
from rtplan.gate.committed.policy import Gate, load_gate
from rtplan.gate.compiled import CompiledClockGate, CompiledGate
from rtplan.gate.files import with_gate_budgets
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.checkpoint import CheckpointError
from rtplan.planner import Planner, PlannerConfig
from rtplan.planner.compiled import CompiledOptions
from rtplan.planner.configs import with_rules
from rtplan.planner.store import load_planner
from rtplan.planner_service._errors import GateLoadError


class DeviceError(ValueError):
    """A device spec that is malformed or names a device this machine does not have."""


def resolve_device(spec: str) -> jax.Device:
    """The JAX device of a spec: `cpu`, `cpu:N`, `cuda` or `cuda:N` (the N-th GPU).

    Raises:
        DeviceError: a malformed spec, no GPU backend, or an index past the devices present.
    """
    kind, _, index = spec.strip().lower().partition(":")
    if kind not in ("cpu", "cuda", "gpu") or (index and not index.isdigit()):
        raise DeviceError(f"device {spec!r} is not one of cpu, cpu:N, cuda, cuda:N")
    platform = "cpu" if kind == "cpu" else "gpu"
    try:
        devices = jax.devices(platform)
    except RuntimeError:
        have = ", ".join(str(d) for d in jax.devices())
        raise DeviceError(
            f"device {spec!r} not available: JAX has no {platform} backend here (devices: {have})"
        ) from None
    n = int(index or 0)
    if n >= len(devices):
        raise DeviceError(f"device {spec!r} not available: {len(devices)} {platform} device(s)")
    return devices[n]


@dataclasses.dataclass(frozen=True)
class LoadedGame:
    """One served game: its deterministic planner, parameters on the device, executables."""

    game_id: str
    config: PlannerConfig
    planner: Planner
    params: object
    checkpoint: str
    # The gate picks k for `gate` requests (a clock game's `ClockGate` also policy-only, from
    # the state the request carries); None: forced k only.
    gate: Gate | ClockGate | None = None
    gate_params: object = None  # its variables, on the device
    gate_checkpoint: str | None = None
    # The value, the options per k and (a `CompiledGate`) the gate's decision and options:
    # decisions at batch 1, options at the engine's search rungs; compiled by `Engine.compile()`.
    options: CompiledOptions | None = None

    @property
    def budgets(self) -> tuple[int, ...]:
        return self.config.budgets

    @property
    def clock_gate(self) -> bool:
        """The gate is a clock game's recurrent gate: gated requests carry its state."""
        return isinstance(self.gate, ClockGate)

    @property
    def simulations(self) -> tuple[int, ...]:
        return self.config.simulations


def load_game(
    game_id: str,
    path: str,
    gate_file: str | None,
    device: jax.Device,
    compiler_options: Mapping[str, object],
    ladder: tuple[int, ...] = (1,),
    rules: Mapping[str, object] | None = None,
) -> LoadedGame:
    """One served game: its planner (and gate) on `device`, options ready to compile at the
    batch sizes of `ladder`.

    `rules`: a committed-action game's rules of play, `planner.configs.with_rules`'s
    `committed` and `tree_k` (None values keep the checkpoint's); a clock game keeps its own.
    The gate is checked against the planner under them (a gate plays under its own rules).

    Raises:
        ValueError / CheckpointError: a planner checkpoint that does not load, or rules it
            cannot play under (committed "plan" under tree_k 0).
        GateLoadError: a gate that does not load over the planner (names the file).
    """
    cfg, params, _ = load_planner(game_id, path)
    if rules and games.kind_of(game_id) is not games.Kind.CLOCK:
        try:
            cfg = with_rules(cfg, **rules, plan_needs_tree=True)
        except ValueError as e:
            raise ValueError(f"{game_id}: {e}") from None
    gate = gate_params = None
    if gate_file is not None:
        # Checked against the planner as shipped: the gate records that exact config.
        gate, gate_params = load_gate_file(gate_file, Planner(cfg), path)
        gate_params = jax.device_put(gate_params, device)
        cfg = gate.planner.config  # a committed gate's budgets (`load_gate_file`)
    # Serving plays the argmax of the improved policy: the same state always gets the same
    # plan, whatever the seed (training samples with gumbel_scale 1).
    cfg = dataclasses.replace(cfg, gumbel_scale=0.0)
    planner = Planner(cfg)
    params = jax.device_put(params, device)
    kw = dict(device=device, compiler_options=compiler_options, ladder=ladder)
    if gate is None:
        options = CompiledOptions(planner, params, **kw)
    elif isinstance(gate, ClockGate):
        options = CompiledClockGate(planner, params, gate, gate_params, **kw)
    else:
        options = CompiledGate(planner, params, gate, gate_params, **kw)
    return LoadedGame(
        game_id=game_id,
        config=cfg,
        planner=planner,
        params=params,
        checkpoint=path,
        gate=gate,
        gate_params=gate_params,
        gate_checkpoint=gate_file,
        options=options,
    )


def load_gate_file(
    path: str, planner: Planner, planner_file: str
) -> tuple[Gate | ClockGate, object]:
    """(gate, params) of a gate file over `planner`: a clock gate where its metadata says so
    (`CLOCK_GATE_KIND`), else a committed-game gate, whose planner (`gate.planner`, the one to
    serve) plays the budgets its file records (`gate.files.with_gate_budgets`: the planner
    checkpoint's, or `train-gate --budgets`'); any failure names the file."""
    try:
        meta = ckpt.load_metadata(path)
        clock = meta.get("kind") == CLOCK_GATE_KIND
        if not clock:
            planner = Planner(with_gate_budgets(planner.config, meta, path))
        load = load_clock_gate if clock else load_gate
        gate, params, _ = load(path, planner, planner_file=planner_file)
        if not clock and gate.config.memory:
            # Its memory would have to travel in each Plan request, as a clock gate's state
            # does; until a gate with memory earns that (docs/gate.md), the service refuses it.
            raise ValueError(
                "a gate with memory (--gate-memory) plays in rtplan eval and train-gate only; "
                "the planner service serves gates without it"
            )
    except (CheckpointError, ValueError, OSError) as e:
        game_id = planner.config.game_id
        raise GateLoadError(f"gate checkpoint {path} does not load for {game_id}: {e}") from e
    return gate, params
