"""Hypothesis drives an implementation and the model side by side.

Each rule picks an action enabled in some model state consistent with what
the implementation showed so far, performs it on the implementation, and
narrows the consistent set by the observation and the implementation's
snapshot; an empty set fails the example.  Hypothesis then shrinks the run to
a minimal sequence of actions, which the failure message lists (and attaches
as ``error.actions``) so it can be replayed with :class:`~.checker.Checker`.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from conq.model.kernel import Model

from .adapters import InProcess, short_repr
from .checker import Checker, RunResult


class Diverged(AssertionError):
    def __init__(self, text: str, actions: list[tuple]):
        super().__init__(text)
        self.actions = actions


def machine_for(model: Model, driver_cls: type) -> type:
    class SideBySide(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.checker = Checker(model, InProcess(driver_cls))
            self.result = RunResult(seed=0, actions=[], observations=[])
            self.current: list[Any] = []

        @initialize()
        def start(self) -> None:
            self.checker.impl.start(model.name, self.checker.config, 0)
            current = self.checker._initial(self.result)
            if current is None:
                raise Diverged(self.result.divergence.describe(), [])
            self.current = current

        @rule(data=st.data())
        def act(self, data: st.DataObject) -> None:
            enabled = list(model.actions(self.current[0]))
            if not enabled:
                return
            action = enabled[data.draw(st.integers(0, len(enabled) - 1), label="action")]
            # one step of the same consistent-set tracking the checker does
            self.result.actions.append(action)
            observed = self.checker.impl.do(action)
            self.result.observations.append(observed)
            nxt, allowed, enabled_any = self.checker._advance(self.current, action, observed, self.result)
            if nxt and self.checker.snapshots:
                nxt, snap = self.checker._filter_snapshot(nxt)
            if not nxt:
                lines = "\n".join(f"  {i + 1}. {list(a)}" for i, a in enumerate(self.result.actions))
                raise Diverged(
                    f"{model.name}: the implementation diverged at step {len(self.result.actions)}: {list(action)} "
                    f"observed {short_repr(observed)}, the model allows {short_repr(allowed)}\nactions:\n{lines}",
                    list(self.result.actions),
                )
            problem = self.checker._check_invariants(nxt)
            if problem:
                raise Diverged(f"{model.name}: {problem} after {list(action)}", list(self.result.actions))
            self.current = nxt

        def teardown(self) -> None:
            self.checker.impl.close()

    SideBySide.__name__ = f"{model.name.replace('-', '_')}_side_by_side"
    return SideBySide
