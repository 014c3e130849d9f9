"""What a replay is asked and what it answers: :class:`ReplayParams` (the model, configuration,
level, mode, counts and implementation of a campaign), the target model and implementation they
name (the call-level view, or a system's thread level: conformance/systems.py), the command that
replays a trace alone, and :class:`ReplaySummary`, the campaign's figures.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any


BLOCK = 64  # traces per unit of work; fixed so results never depend on partitioning


class ReplayError(ValueError):
    """Bad input or environment for the replay job (exit 2)."""


@dataclass
class ReplayParams:
    model: str
    config_name: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    traces: int = 1000
    seed: int = 0
    length: int = 30
    mode: str = "coverage"  # coverage | random | exhaustive
    impl: str = "reference"  # reference | stdio:COMMAND
    prefix_depth: int = 4  # exhaustive mode: depth of the enumerated prefixes
    snapshots: bool = True
    minimise: bool = True
    timeout: float = 10.0
    #: cap on one port reply line in bytes (None: $CONQ_PORT_MAX_LINE_BYTES or the default)
    max_line_bytes: int | None = None
    #: test hook: a task attempt number that must fail once (proves retries are harmless)
    fail_first_attempt_of_partition: int | None = None
    #: also count coverage by symmetry class (``--symmetry``): each state's canonical form under the
    #: model's ``canonical`` (issue 18) is a ``canonical_state`` cover row, counted against the
    #: explorer's symmetric graph (spec/replay-coverage.md, "Coverage by symmetry class")
    symmetry: bool = False
    #: the protocol level (``--level``): ``call`` (one port call per model call) or ``thread``
    #: (consumer-lists only: the thread-step view of conformance/consumer_lists/thread_steps.py, the
    #: checker choosing the interleaving, the reference under the deterministic scheduler; the
    #: configuration is one of ``thread_steps.THREAD_CONFIGS``, default ``one-acquirer``)
    level: str = "call"


def _thread_level(params: ReplayParams):
    """The thread level of ``params.model``'s system (conformance/systems.py), or ReplayError."""
    from .. import systems

    with_threads = systems.names("thread_level")
    if params.model not in with_threads:
        raise ReplayError(f"--level thread: only {', '.join(with_threads)} has a thread-step level, not {params.model!r}")
    return systems.get(params.model).load("thread_level")


def target_model(params: ReplayParams):
    """The model the replay checks against: the call-level view of ``params.model`` (views.py), or
    at ``level="thread"`` its system's thread-step view (``thread_level.thread_model``).  ReplayError
    for an unknown level or a configuration the level does not offer."""
    from ..views import conformance_model

    if params.level == "call":
        return conformance_model(params.model, params.config_name, params.overrides)
    if params.level != "thread":
        raise ReplayError(f"--level must be call or thread, got {params.level!r}")
    level = _thread_level(params)
    try:
        # ``--set`` values from the command line are strings: the call level parses them through
        # the model's configuration; here the same parsing through a call-level load first
        overrides = dict(params.overrides)
        if overrides:
            from conq.model.kernel import config_dict

            parsed = config_dict(conformance_model(params.model, None, overrides).config)
            overrides = {k: parsed[k] for k in overrides}
        return level.thread_model(params.config_name or next(iter(level.THREAD_CONFIGS)), overrides)
    except ValueError as e:
        raise ReplayError(f"--level thread: {e}") from None


def target_impl(params: ReplayParams, model, timeout: float | None = None):
    """The implementation under test at ``params.level`` (the thread level's ``thread_impl``)."""
    from ..suite import make_impl

    t = params.timeout if timeout is None else timeout
    if params.level == "thread":
        return _thread_level(params).thread_impl(params.impl, timeout=t)
    return make_impl(params.impl, model.name, timeout=t, max_line_bytes=params.max_line_bytes)


def stable_hash(value: Any) -> int:
    """A 63-bit hash of a model value's ``repr``.  Coverage no longer uses it: the ``repr`` of a
    frozenset follows its iteration order, which follows Python's per-process salted ``hash`` of
    strings, so two executors could name one state differently.  Coverage keys are the stable
    fingerprints of :mod:`conq.model.engines.fingerprint` (a canonical encoding)."""
    return int.from_bytes(hashlib.blake2b(repr(value).encode(), digest_size=8).digest(), "big") >> 1


def _replay_command(p: ReplayParams) -> str:
    cmd = f"conq replay {p.model} --traces {p.traces} --seed {p.seed} --length {p.length} --mode {p.mode}"
    if p.config_name:
        cmd += f" --config {p.config_name}"
    cmd += "".join(f" --set {k}={v}" for k, v in p.overrides.items())
    if p.impl != "reference":
        cmd += f" --impl '{p.impl}'"
    if p.symmetry:
        cmd += " --symmetry"
    if p.level != "call":
        cmd += f" --level {p.level}"
    return cmd


@dataclass
class ReplaySummary:
    params: dict[str, Any]
    master: str
    partitions: int
    traces: int
    steps: int
    diverged: int
    seconds: float
    states_covered: int
    transitions_covered: int
    actions_covered: list[str]
    properties_witnessed: list[str]
    requirements_witnessed: list[str]
    graph_states: int | None = None
    graph_transitions: int | None = None
    #: reachable states no deeper (BFS) than the trace length: what walks of that length can reach
    graph_states_within_length: int | None = None
    state_fraction: float | None = None
    transition_fraction: float | None = None
    missed: str = ""
    violations: list[dict[str, Any]] = field(default_factory=list)
    out: str = ""
    #: the Spark job alone: generation, replay, aggregation and Parquet writes
    #: (no session start-up, no coverage truth)
    job_seconds: float = 0.0
    #: the sampling unit of the incidence counts (a trace, or a block in coverage mode) and how many
    unit: str = "trace"
    units: int = 0
    #: "explored" when coverage was measured against the exhaustive graph, else why not
    graph: str = ""
    #: Chao2 estimates (:class:`~conq.conformance.coverage_estimate.Estimate` as a dict)
    state_estimate: dict[str, Any] | None = None
    transition_estimate: dict[str, Any] | None = None
    #: (traces replayed, distinct states seen) at powers of two and at the end
    growth_points: list[list[int]] = field(default_factory=list)
    #: the rarest kinds of states seen (``coverage_estimate.rare_classes``)
    rare_classes: list[dict[str, Any]] = field(default_factory=list)
    #: ``--symmetry``: symmetry classes of the states seen (distinct ``model.canonical`` forms);
    #: with the graph: the classes of the call-level graph's states, the share of them seen, and
    #: the states of the model's symmetric graph (``explore(symmetry=True)``: the manifest's count)
    states_covered_canonical: int | None = None
    graph_states_canonical: int | None = None
    state_fraction_canonical: float | None = None
    symmetric_graph_states: int | None = None

    @property
    def ok(self) -> bool:
        return self.diverged == 0
