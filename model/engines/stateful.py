"""Hypothesis adapter: any model as a ``RuleBasedStateMachine``.

The machine walks the model one labelled successor at a time, chosen by
hypothesis (so failures shrink towards short paths and first-listed
actions), and checks every ``always`` and ``always_step`` property after each
step.  A failure raises :class:`~conq.model.kernel.PropertyViolation`, whose
message is the readable, shrunk path plus a runnable reproducer: the action
list to hand to :meth:`Model.replay`.

The same property objects the explorer checks are checked here: invariants
are written once.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from conq.model.kernel import Kind, Model, Path, PropertyViolation, config_dict


def reproducer(model: Model, path: Path) -> str:
    """Python that replays ``path`` on the model and re-checks its invariants."""
    acts = json.dumps([[list(a), o] for a, o, _ in path.steps], default=list)
    return (
        "from conq.model.engines.registry import load_model\n"
        f"model = load_model({model.name!r}, overrides={config_dict(model.config)!r})\n"
        f"steps = [(tuple(a), o if not isinstance(o, list) else tuple(o)) for a, o in {acts}]\n"
        "model.check_path(model.replay(steps))"
    )


def state_machine(model: Model, *, max_examples: int = 100, stateful_step_count: int = 50) -> type:
    """A ``RuleBasedStateMachine`` subclass walking ``model``.

    Use as ``TestX = state_machine(m).TestCase`` in a test module.
    """
    props = model.property_list()
    inv = [p for p in props if p.kind is Kind.ALWAYS]
    inv_step = [p for p in props if p.kind is Kind.ALWAYS_STEP]
    sometimes = [p for p in props if p.kind is Kind.SOMETIMES]
    inits = list(model.init_states())

    class ModelMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.path_init: Any = None
            self.steps: list[tuple] = []
            self.state: Any = None

        def _fail(self, prop, detail: str = "") -> None:
            path = Path(self.path_init, tuple(self.steps))
            err = PropertyViolation(prop, path, model, detail)
            raise PropertyViolation(prop, path, model, detail + "\nreproducer:\n" + reproducer(model, path)) from err

        @initialize(index=st.integers(min_value=0, max_value=max(len(inits) - 1, 0)))
        def start(self, index: int) -> None:
            self.state = self.path_init = inits[index]
            for p in inv:
                if not p.check(self.state):
                    self._fail(p, "the initial state violates it")

        @rule(data=st.data())
        def step(self, data: st.DataObject) -> None:
            succ = model.successors(self.state)
            if not succ:
                event("deadlock reached")
                return
            k = data.draw(st.integers(min_value=0, max_value=len(succ) - 1), label="successor")
            a, o, t = succ[k]
            event(f"action {a[0]}")
            prev = self.state
            self.steps.append((a, o, t))
            self.state = t
            for p in inv_step:
                if not p.check(prev, a, o, t):
                    self._fail(p)

        @invariant()
        def invariants_hold(self) -> None:
            if self.state is None:
                return
            for p in inv:
                if not p.check(self.state):
                    self._fail(p)
            for p in sometimes:
                if p.check(self.state):
                    event(f"witnessed {p.name}")

    ModelMachine.__name__ = ModelMachine.__qualname__ = f"{model.__class__.__name__}Machine"
    ModelMachine.TestCase.settings = settings(
        max_examples=max_examples, stateful_step_count=stateful_step_count, deadline=None
    )
    return ModelMachine
