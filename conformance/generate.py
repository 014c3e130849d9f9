"""Trace generators over any model: seeded random walks, exhaustive
enumeration up to a depth, and a coverage-guided mode.

Every generator is reproducible: a random walk is a function of
``(model, config, seed, length)`` alone, so a trace found anywhere (a Spark
executor, a CI run) is regenerated exactly from its seed.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any, Iterator

from conq.model.kernel import Model, config_dict

from .trace import Event, Trace

#: the observation of a call the implementation refused as not enabled (error 13)
REFUSED = ("error", 13)


def derive_seed(root: int, index: int) -> int:
    """The seed of trace ``index`` under ``root``: independent of partitioning,
    so any trace is reproducible alone from ``(root, index)``."""
    digest = hashlib.blake2b(f"{root}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1  # non-negative, fits a signed 64-bit column


def _trace(model: Model, seed: int, generator: dict[str, Any]) -> Trace:
    return Trace(
        model=model.name,
        config=config_dict(model.config),
        config_name=getattr(model, "config_name", None),
        seed=seed,
        generator=generator,
    )


def random_walk(model: Model, seed: int, length: int, *, with_state: bool = False) -> Trace:
    """A walk of at most ``length`` steps, each successor chosen uniformly."""
    rng = random.Random(seed)
    inits = model.init_states()
    state = inits[rng.randrange(len(inits))]
    tr = _trace(model, seed, {"mode": "random", "length": length})
    successors = model.successors
    for n in range(1, length + 1):
        succ = successors(state)
        if not succ:
            break
        a, o, t = succ[rng.randrange(len(succ))]
        tr.events.append(Event(n, a, o, model.observe(t) if with_state else None))
        state = t
    return tr


class CoverageMemory(dict):
    """What a coverage-guided generator has seen: visits per state, and the
    first path that reached each state (so a later trace can go straight back
    to the frontier of what has been explored)."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: dict[Any, tuple] = {}
        self.succ: dict[Any, list] = {}  # successor lists, computed once per state

    def successors(self, model: Model, state: Any) -> list:
        found = self.succ.get(state)
        if found is None:
            found = self.succ[state] = model.successors(state)
        return found


def coverage_guided(
    model: Model, seed: int, length: int, seen: CoverageMemory, *, with_state: bool = False, probe: float = 0.0
) -> Trace:
    """A walk aimed at the unexplored: it first replays the path to a
    *frontier* state (one with a successor never visited; the least visited
    such state, ties broken by the seed), then goes on choosing the least
    visited successor.  ``seen`` is updated, so successive traces spread over
    the state space instead of retracing the likely paths.

    ``probe`` > 0: after each step, with that probability, the trace also sends a
    call that the state reached has disabled (one this trace saw enabled before),
    observed as the refusal ``("error", 13)``; the state does not change (issue 35:
    generated traces probe preconditions).  0 keeps every seed's trace as it was."""
    rng = random.Random(seed)
    inits = model.init_states()
    state = inits[rng.randrange(len(inits))]
    seen[state] = seen.get(state, 0) + 1
    seen.paths.setdefault(state, ())
    tr = _trace(model, seed, {"mode": "coverage", "length": length})
    frontier = [s for s in seen.paths if any(t not in seen for _, _, t in seen.successors(model, s))]
    prefix: tuple = ()
    if frontier:
        least = min(seen[s] for s in frontier)
        target = sorted((s for s in frontier if seen[s] == least), key=repr)[rng.randrange(sum(1 for s in frontier if seen[s] == least))]
        prefix = seen.paths[target][:length]
    path: list = []
    offered: dict[tuple, None] = {}  # every call this trace saw enabled (probe)
    if probe:
        offered.update(dict.fromkeys(x[0] for x in seen.successors(model, state)))
    for n in range(1, length + 1):
        if n <= len(prefix):
            a, o, t = prefix[n - 1]
        else:
            succ = seen.successors(model, state)
            if not succ:
                break
            least_t = min(seen.get(t, 0) for _, _, t in succ)
            pick = [x for x in succ if seen.get(x[2], 0) == least_t]
            a, o, t = pick[rng.randrange(len(pick))]
        path.append((a, o, t))
        seen[t] = seen.get(t, 0) + 1
        seen.paths.setdefault(t, tuple(path))
        tr.events.append(Event(len(tr.events) + 1, a, o, model.observe(t) if with_state else None))
        state = t
        if probe:
            offered.update(dict.fromkeys(x[0] for x in seen.successors(model, state)))
            if rng.random() < probe:
                now = {x[0] for x in seen.successors(model, state)}
                disabled = [x for x in offered if x not in now]
                if disabled:
                    tr.events.append(Event(len(tr.events) + 1, disabled[rng.randrange(len(disabled))], REFUSED,
                                           model.observe(state) if with_state else None))
    return tr


def exhaustive(model: Model, depth: int) -> Iterator[Trace]:
    """Every path of exactly ``depth`` steps, or shorter where it ends in a
    state with no successor, depth-first in the model's action order."""
    for i, init in enumerate(model.init_states()):
        stack: list[tuple[Any, list[Event]]] = [(init, [])]
        while stack:
            state, events = stack.pop()
            succ = model.successors(state) if len(events) < depth else []
            if not succ:
                tr = _trace(model, i, {"mode": "exhaustive", "length": depth})
                tr.events = events
                yield tr
                continue
            for a, o, t in reversed(succ):
                stack.append((t, events + [Event(len(events) + 1, a, o)]))


def count_exhaustive(model: Model, depth: int) -> int:
    """How many traces :func:`exhaustive` yields at ``depth``, counted without enumerating
    them (paths counted per state and remaining depth, memoised)."""
    memo: dict[tuple[Any, int], int] = {}

    def paths(state: Any, left: int) -> int:
        if left == 0:
            return 1
        key = (state, left)
        found = memo.get(key)
        if found is None:
            succ = model.successors(state)
            found = memo[key] = sum(paths(t, left - 1) for _, _, t in succ) if succ else 1
        return found

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * depth + 1000))
    try:
        return sum(paths(s, depth) for s in model.init_states())
    finally:
        sys.setrecursionlimit(limit)


def action_sequences(model: Model, depth: int) -> Iterator[list[tuple]]:
    """Every distinct action sequence of 1..``depth`` calls that the model enables, shortest
    first (breadth-first, in the model's action order).  Observations are not fixed: a sequence
    stands for all its outcomes, so each is one replay against an implementation.  Shortest-first
    is what makes a mutation engine *certain* to kill a mutant with a short counterexample."""
    frontier: list[tuple[list[tuple], list[Any]]] = [([], list(model.init_states()))]
    for _ in range(depth):
        nxt: list[tuple[list[tuple], list[Any]]] = []
        for seq, states in frontier:
            by_action: dict[tuple, dict[Any, None]] = {}
            for s in states:
                for a, _o, t in model.successors(s):
                    by_action.setdefault(a, {})[t] = None
            for a, targets in by_action.items():
                path = seq + [a]
                yield path
                nxt.append((path, list(targets)))
        frontier = nxt
