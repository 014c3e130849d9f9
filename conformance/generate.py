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


def coverage_guided(
    model: Model, seed: int, length: int, seen: set[Any], *, with_state: bool = False
) -> Trace:
    """A walk that prefers steps into states (and actions) not yet in ``seen``;
    ``seen`` is updated, so successive calls spread over the state space."""
    rng = random.Random(seed)
    inits = model.init_states()
    state = inits[rng.randrange(len(inits))]
    seen.add(state)
    tr = _trace(model, seed, {"mode": "coverage", "length": length})
    for n in range(1, length + 1):
        succ = model.successors(state)
        if not succ:
            break
        fresh = [s for s in succ if s[2] not in seen or (s[0][0], s[1]) not in seen]
        a, o, t = (fresh or succ)[rng.randrange(len(fresh or succ))]
        seen.add(t)
        seen.add((a[0], o))
        tr.events.append(Event(n, a, o, model.observe(t) if with_state else None))
        state = t
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
