"""The traces and their rows, as an executor makes them: trace ``i`` regenerated from ``(root seed,
i)`` and its block of :data:`~.params.BLOCK`, replayed through the checker, and turned into a
``trace`` row and ``cover`` rows (states and transitions by stable fingerprint, actions, properties
witnessed and the requirements they cover).  Plain Python: the Spark tasks, ``--only`` and the
in-process estimate all run it.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator

from .params import BLOCK, ReplayError, ReplayParams, _replay_command, target_impl, target_model


def _exhaustive_prefixes(model, depth: int) -> list[list[tuple]]:
    from ..generate import exhaustive

    return [tr.actions() for tr in exhaustive(model, depth)]


def replay_blocks(params: ReplayParams, blocks: Iterable[int]) -> Iterator[tuple]:
    """Rows for the traces of the given blocks.  Row shapes:
    ("trace", index, seed, steps, ok, kind, step, detail, minimised_json, replay_cmd)
    ("cover", kind, key, first_index, units, class)   -- one per distinct key per block

    ``key`` of a ``state`` is its stable fingerprint (:func:`~conq.model.engines.fingerprint.fingerprint`),
    of a ``transition`` the fingerprint of ``(fp(state), (action, observation), fp(next state))``;
    ``units`` (states and transitions only) is how many sampling units of the given blocks met the
    key (a unit is a trace, or a block in coverage mode: :mod:`.coverage_estimate`), so units add up
    across blocks and partitions; ``class`` (states only) is the state's kind for the rarity table.
    """
    return _replay(params, blocks, per_block=True)


#: per-process cache of what a partition needs before its first trace and
#: that depends on nothing but the parameters (model, property requirements,
#: exhaustive prefixes); a reused Python worker builds it once
_SETUP: dict[str, tuple] = {}


def _setup(params: ReplayParams) -> tuple:
    from conq.model.kernel import Kind

    key = json.dumps([params.model, params.config_name, params.overrides, params.mode, params.prefix_depth, params.level],
                     sort_keys=True, default=str)
    got = _SETUP.get(key)
    if got is None:
        model = target_model(params)
        sometimes = [p for p in model.property_list() if p.kind is Kind.SOMETIMES or p.witness is not None]
        checks = [
            (p.check if p.kind is Kind.SOMETIMES else p.witness, p.name)
            for p in sometimes if p.kind is not Kind.ALWAYS_STEP
        ]
        prop_reqs = _property_requirements(model.name)
        hits = {name: [("property", name)] + [("requirement", r) for r in prop_reqs.get(name, ())] for _, name in checks}
        prefixes = _exhaustive_prefixes(model, params.prefix_depth) if params.mode == "exhaustive" else []
        got = _SETUP[key] = (model, checks, hits, prefixes)
    return got


def _replay(params: ReplayParams, blocks: Iterable[int], per_block: bool, runs: dict | None = None) -> Iterator[tuple]:
    """The rows of :func:`replay_blocks`; with ``per_block=False`` the cover
    rows are aggregated over all the given blocks (one per distinct key, with
    its least index and the sum of its units), emitted after the last trace row.
    ``runs``: filled with ``index -> (model, run)`` (:func:`replay_run`)."""
    from conq.model.engines.fingerprint import fingerprint

    from .. import generate
    from ..checker import Checker
    from ..coverage_estimate import state_class
    model, checks, hits, prefixes = _setup(params)
    # the states of a call-level view are states of its model (settled ones), so the model's own
    # canonical form names their symmetry class (conformance/consumer_lists/calls.py keeps ``base``)
    canon = getattr(model, "base", model).canonical if params.symmetry else None
    impl = target_impl(params, model)
    checker = Checker(model, impl, snapshots=params.snapshots, record=True)
    base_cmd = _replay_command(params)
    first: dict[tuple, int] = {}
    units: dict[tuple, int] = {}  # state/transition key -> sampling units that met it
    classes: dict[tuple, str] = {}  # state key -> its kind
    unit_keys: set[tuple] = set()  # the state/transition keys met in the current unit
    thread = params.level == "thread"
    by_block = params.mode == "coverage"  # the sampling unit: a block (coverage mode) or a trace
    # Fingerprints are memoised per process (states are hashable; the dict's salted hash never
    # leaves this process): a walk meets the same states over and over.
    fps: dict[Any, int] = {}
    tfps: dict[Any, tuple] = {}

    def fp(s) -> int:
        h = fps.get(s)
        if h is None:
            if len(fps) >= 200_000:
                fps.clear()
            h = fps[s] = fingerprint(s)
        return h

    def end_unit() -> None:
        for k in unit_keys:
            units[k] = units.get(k, 0) + 1
        unit_keys.clear()

    def cover_rows():
        for (kind, key), idx in first.items():
            yield ("cover", kind, str(key), idx, units.get((kind, key)), classes.get((kind, key)))

    try:
        for block in (blocks if per_block else sorted(blocks)):
            if per_block:
                first, units, classes = {}, {}, {}
            seen = generate.CoverageMemory()
            for index in range(block * BLOCK, min((block + 1) * BLOCK, params.traces)):
                seed = generate.derive_seed(params.seed, index)
                if params.mode == "random":
                    run = checker.walk(seed, params.length)
                elif params.mode == "coverage":
                    tr = generate.coverage_guided(model, seed, params.length, seen)
                    run = checker.replay(tr.actions(), seed)
                elif params.mode == "exhaustive":
                    prefix = prefixes[index % len(prefixes)]
                    run = checker.replay(prefix, seed) if params.length <= len(prefix) else _prefix_then_walk(checker, model, prefix, seed, params.length)
                else:
                    raise ReplayError(f"unknown mode {params.mode!r}")
                if runs is not None:
                    runs[index] = (model, run)
                d = run.divergence
                minimised = None
                if d is not None and params.minimise and d.kind != "port":
                    minimised = json.dumps([list(a) for a in checker.minimise(run)])
                yield (
                    "trace", index, seed, run.steps, d is None,
                    d.kind if d else None, d.step if d else None, d.describe() if d else None,
                    minimised, f"{base_cmd} --only {index}",
                )
                # Blocks come in ascending order and indices ascend within a block, so the
                # first time a key is met is its least index (also across merged blocks).
                for s in run.visited:
                    key = ("state", fp(s))
                    unit_keys.add(key)
                    if key not in first:
                        first[key] = index
                        classes[key] = state_class(model, s, by_step=thread)
                        if canon is not None:  # first sight of a member: the class's least index too
                            first.setdefault((CANONICAL, fp(canon(s))), index)
                        for pred, name in checks:
                            if pred(s):
                                for k in hits[name]:
                                    first.setdefault(k, index)
                for tr_ in run.transitions:
                    got = tfps.get(tr_)
                    if got is None:
                        if len(tfps) >= 200_000:
                            tfps.clear()
                        s, label, t = tr_
                        # at thread level every thread step is the action "step": its observation's
                        # label names the model step that ran (thread_steps.py, "Each reply's observation")
                        name = label[1][0][0] if thread else label[0][0]
                        got = tfps[tr_] = (("transition", fingerprint((fp(s), label, fp(t)))), ("action", name))
                    tkey, akey = got
                    unit_keys.add(tkey)
                    first.setdefault(tkey, index)
                    first.setdefault(akey, index)
                if not by_block:
                    end_unit()
            if by_block:
                end_unit()
            if per_block:
                yield from cover_rows()
        if not per_block:
            yield from cover_rows()
    finally:
        impl.close()


#: the cover kind of a state's symmetry class (``ReplayParams.symmetry``): key = fingerprint of
#: ``model.canonical(state)``
CANONICAL = "canonical_state"


def replay_one(params: ReplayParams, index: int) -> tuple:
    """The ``trace`` row of one trace, computed alone in this process (no
    Spark): the trace is regenerated from ``(root seed, index)`` and its block."""
    if not 0 <= index < params.traces:
        raise ReplayError(f"--only {index}: the run has traces 0..{params.traces - 1}")
    for row in replay_blocks(params, [index // BLOCK]):
        if row[0] == "trace" and row[1] == index:
            return row
    raise AssertionError("unreachable: the block always yields its traces")


def replay_run(params: ReplayParams, index: int) -> tuple[Any, Any]:
    """``(model, run)`` of trace ``index``, replayed alone in this process (as :func:`replay_one`):
    what ``conq replay --only N --export`` writes."""
    if not 0 <= index < params.traces:
        raise ReplayError(f"--only {index}: the run has traces 0..{params.traces - 1}")
    runs: dict = {}
    for _row in _replay(params, [index // BLOCK], per_block=True, runs=runs):
        pass
    return runs[index]


def _prefix_then_walk(checker, model, prefix, seed, length):
    """An exhaustive prefix followed by a seeded online walk to ``length`` steps."""
    import random

    rng = random.Random(seed)
    acts = list(prefix)

    def choose(current, n):
        if n <= len(acts):
            return acts[n - 1]
        enabled = list(model.actions(current[0]))
        return enabled[rng.randrange(len(enabled))] if enabled else None

    return checker._run(seed, choose, length)


def _property_requirements(model: str) -> dict[str, list[str]]:
    """property name -> requirement ids whose checks name it (from the catalog)."""
    from conq.spec import catalog

    out: dict[str, list[str]] = {}
    try:
        areas = catalog.load()
    except catalog.CatalogError:
        return out
    for a in areas:
        for r in a.requirements:
            for c in r.checks:
                m, _, prop = c.partition(":")
                if m == model and prop:
                    out.setdefault(prop, []).append(r.id)
    return out
