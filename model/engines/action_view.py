"""A packed view for a model written as ``actions`` and ``step`` (issue 36): one section per action.

The kernel's successor function is ``[(a, o, t) for a in actions(s) for o, t in step(s, a)]``.  A
model whose ``actions(s)`` lists the enabled actions of a fixed, configuration-wide order (its
*universe*) and whose ``step(s, a)`` is empty when ``a`` is not enabled (the kernel's contract for
``step``) has the same successors, in the same order, as the concatenation over its universe of
``step(s, a)``.  So each action of the universe is a :class:`~conq.model.engines.packing.Section`
running the model's own ``step`` for it, remembered by the fields that ``step`` read: a worker
whose guard fails reads its guard's fields and stops, and its empty outcome holds for every state
that agrees on them.  Nothing of the model is written again: the per-model part is its layout (each
field's domain, from the configuration), its universe and, per action, the fields its guard always
reads first (the section's *root*).

A model's tests check, on every reachable state of small configurations, that these successors
equal ``successors(s)`` (labels, observations and states, in order): an ``actions`` that is not
the universe filtered, or a ``step`` that steps when its action is not enabled, shows there.

States may nest (``(fed, queues, running, ...)`` of tuples): :class:`Layout` numbers the fields of a
nested layout, and a field may itself be a tuple of varying length (a queue of event ids) with the
tuples it can hold as its domain.
"""

from __future__ import annotations

from itertools import permutations
from typing import Any, Callable, Iterable, Sequence

from conq.model.engines.packing import Codec, Packed, Section, StepChecks


class Layout:
    """The fields of a nested state, numbered in the order they are declared: ``field(name,
    domain)`` returns the field's index for the shape (nested tuples of indices) the caller
    builds."""

    def __init__(self) -> None:
        self.domains: list[Any] = []
        self.names: list[str] = []

    def field(self, name: str, domain: Iterable[Any]) -> int:
        self.domains.append(domain if isinstance(domain, range) else tuple(domain))
        self.names.append(name)
        return len(self.domains) - 1

    def fields(self, name: str, n: int, domain: Callable[[int], Iterable[Any]] | Iterable[Any]) -> tuple[int, ...]:
        """``n`` fields ``name[0]`` .. ``name[n-1]`` as one tuple of the shape; ``domain``: one for
        all, or a function of the index."""
        return tuple(self.field(f"{name}[{i}]", domain(i) if callable(domain) else domain) for i in range(n))


def sequences(items: Sequence[Any], longest: int) -> list[tuple]:
    """Every tuple of distinct ``items`` of at most ``longest`` of them, in every order (the
    contents of a queue of them)."""
    out: list[tuple] = []
    for k in range(min(longest, len(items)) + 1):
        out += permutations(items, k)
    return out


def action_view(model: Any, layout: Layout, shape: Any, universe: Sequence[tuple],
                roots: Callable[[tuple], Iterable[int]] | None = None,
                applies: Sequence[Callable[[Any], bool] | None] | None = None) -> Packed:
    """The packed view of ``model`` (a kernel model stepping by ``actions``/``step``): its states
    laid out by ``layout``/``shape``, one section per action of ``universe`` (in that order) rooted
    at ``roots(action)``; ``applies[k]``, when given, is a test of the state before ``step`` is
    asked for the ``k``-th action (a model of several kinds of state whose step of one kind's
    action cannot take another kind's state)."""
    codec = Codec(layout.domains, layout.names, shape)
    checks = StepChecks(model.property_list())
    step = model.step

    def section(a: tuple, ok: Callable[[Any], bool] | None) -> Section:
        def run(s: Any, out: list) -> bool:
            if ok is not None and not ok(s):
                return False
            for o, t in step(s, a):
                out.append((a, o, t))
            return False

        return Section(codec, run, roots(a) if roots is not None else (), checks, " ".join(map(str, a)))

    guards = list(applies) if applies is not None else [None] * len(universe)
    return Packed(codec, model.init_states(), [], [section(a, ok) for a, ok in zip(universe, guards)], None)
