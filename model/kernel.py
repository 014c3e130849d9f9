"""The model kernel: the one representation every engine works on.

A model, in the manner of Stateright's ``Model`` and P's split of system and
spec monitors, is a plain class with

* a **configuration**: a frozen dataclass of small, explicit bounds and
  behaviour switches (an upstream variant is a switch, never a copy);
* **initial states**, immutable and hashable (tuples of small ints are the
  house style: millions must fit in memory);
* the **actions** enabled in a state, in a deterministic order.  An action is
  a tuple ``(name, *params)`` of JSON-able scalars: it is what a driver (a
  conformance adapter, a trace) asks a system to do;
* a **step** function: the labelled successors of an action.  A step may have
  several outcomes (a send that may fail, a pull that may find nothing); each
  outcome carries an **observation**, what an outside party sees of it, so the
  conformance checker can hold an implementation to the model;
* named **properties**: ``always`` (state invariants), ``always_step``
  (transition invariants), ``sometimes`` (a witness that must be reachable) and
  ``leads_to`` (liveness, checked on the reachable graph under a stated weak
  fairness assumption).  Every ``always`` carries a witness predicate so that
  no invariant passes vacuously.

Engines (the explorer, the hypothesis adapter, the conformance checker, the
Spark replay, z3 cross-checks) use only what this module declares.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Container, Generic, Hashable, Iterable, Mapping, Sequence, TypeVar

S = TypeVar("S", bound=Hashable)

#: ``(name, *params)``: JSON-able scalars only, hashable, ordered.
Action = tuple
#: What an outsider sees of one outcome of a step: JSON-able and hashable
#: (``None``, ``str``, ``int``, ``bool`` or tuples of them).
Observation = Hashable
#: One labelled successor: the action taken, what was observed, the next state.
Successor = tuple  # (Action, Observation, S)


class Kind(str, enum.Enum):
    ALWAYS = "always"  # holds in every reachable state
    ALWAYS_STEP = "always-step"  # holds on every reachable transition
    SOMETIMES = "sometimes"  # holds in at least one reachable state
    LEADS_TO = "leads-to"  # every fair path from a P-state reaches a Q-state


@dataclass(frozen=True)
class Property:
    """A named claim about a model.

    ``check`` is a state predicate (ALWAYS, SOMETIMES), a transition predicate
    ``(state, action, observation, next_state) -> bool`` (ALWAYS_STEP), or the
    goal ``Q`` of ``P ~> Q`` (LEADS_TO, with ``trigger`` as ``P``).
    ``witness`` (same signature as ``check``) names the situation in which an
    invariant is really exercised; an explorer run fails if it is never reached.
    """

    name: str
    claim: str
    kind: Kind
    check: Callable[..., bool]
    witness: Callable[..., bool] | None = None
    trigger: Callable[[Any], bool] | None = None
    fairness: str = ""
    #: ALWAYS_STEP only: the action names the property speaks of (None: all).
    #: For any other action both ``check`` and ``witness`` are vacuous, so
    #: engines may skip the call (the explorer's hot path).
    actions: frozenset[str] | None = None

    def applies_to(self, action_name: str) -> bool:
        return self.actions is None or action_name in self.actions

    @property
    def is_invariant(self) -> bool:
        return self.kind in (Kind.ALWAYS, Kind.ALWAYS_STEP)


class CheckedAction(tuple):
    """An action label (equal to, and hashing as, the plain tuple) by which a model's successor
    function says: the check of every ``always_step`` property that applies to this transition has
    already been evaluated on it, and holds; so has every witness, which does not fire, except those
    named by the class's ``maybe`` (fired, or not decided).  An engine may then skip the step's
    checks, and its witnesses once all of ``maybe`` are witnessed.  Only a model that evaluated the
    very same property functions may return it (the consumer-lists fast path does, once per
    footprint: model/consumer_lists/fast.py); engines that ignore it lose nothing but time."""

    __slots__ = ()
    #: the witnesses this class's steps may fire (CheckedAction itself: none)
    maybe: frozenset[str] = frozenset()
    _classes: dict[frozenset[str], type] = {}

    def __reduce__(self):  # pickled as the plain action (the annotation is for this process's engine)
        return (tuple, (tuple(self),))

    @classmethod
    def subclass(cls, maybe: frozenset[str]) -> type[CheckedAction]:
        """The CheckedAction class of steps whose witnesses ``maybe`` may fire (one class per set)."""
        if not maybe:
            return CheckedAction
        found = CheckedAction._classes.get(maybe)
        if found is None:
            found = CheckedAction._classes[maybe] = type("CheckedAction", (CheckedAction,),
                                                         {"__slots__": (), "maybe": maybe})
        return found


def always(name: str, claim: str, check: Callable[[Any], bool], *, witness: Callable[[Any], bool]) -> Property:
    """A state invariant, with the witness that shows it is not vacuous."""
    return Property(name, claim, Kind.ALWAYS, check, witness=witness)


def always_step(
    name: str,
    claim: str,
    check: Callable[[Any, Action, Observation, Any], bool],
    *,
    witness: Callable[[Any, Action, Observation, Any], bool],
    actions: Iterable[str] | None = None,
) -> Property:
    """A transition invariant over ``(state, action, observation, next_state)``.

    ``actions``: when the claim is about some actions only, their names; the
    check must then hold (and the witness be false) for every other action."""
    return Property(name, claim, Kind.ALWAYS_STEP, check, witness=witness,
                    actions=frozenset(actions) if actions is not None else None)


def sometimes(name: str, claim: str, check: Callable[[Any], bool]) -> Property:
    """A state that must be reachable (a witness of behaviour, not of an invariant)."""
    return Property(name, claim, Kind.SOMETIMES, check)


def leads_to(
    name: str, claim: str, trigger: Callable[[Any], bool], goal: Callable[[Any], bool], *, fairness: str
) -> Property:
    """``trigger ~> goal``: on every fair path, a trigger state is followed by a goal state.

    ``fairness`` states the assumption in words; the classes it speaks of are
    the ones :meth:`Model.fair` returns (weak fairness per class).
    """
    return Property(name, claim, Kind.LEADS_TO, goal, trigger=trigger, fairness=fairness)


class PropertyViolation(AssertionError):
    """A property failed on a concrete path; the message is a readable trace."""

    def __init__(self, prop: Property, path: "Path", model: "Model", detail: str = ""):
        self.prop = prop
        self.path = path
        self.detail = detail
        super().__init__(
            f"{model.name}: property '{prop.name}' violated: {prop.claim}\n"
            + (f"{detail}\n" if detail else "")
            + model.format_path(path)
        )


@dataclass(frozen=True)
class Path:
    """A concrete run: an initial state and the labelled steps taken from it."""

    init: Any
    steps: tuple[Successor, ...] = ()

    @property
    def last(self) -> Any:
        return self.steps[-1][2] if self.steps else self.init

    def states(self) -> list[Any]:
        return [self.init] + [t for _, _, t in self.steps]

    def actions(self) -> list[Action]:
        return [a for a, _, _ in self.steps]

    def __len__(self) -> int:
        return len(self.steps)


class ModelError(ValueError):
    """A model or configuration was used wrongly (bad config field, unknown action...)."""


class StepContractError(ModelError):
    """The model broke the kernel's contract that a step is empty when its action is not enabled
    (``step(s, a)`` acts for an ``a`` that ``actions(s)`` does not list).  Engines that run ``step``
    for every action (the packed view) then see a move ``successors(s)`` does not have, and a path
    through it cannot be rebuilt.  Named, so that a model mutation which breaks it is reported as
    caught by this contract (model/engines/model_mutation.py), not as a failure of the engine."""

    #: the contract's name, as a claim's name is reported
    CONTRACT = "step-only-when-enabled"


class ConfigError(ModelError):
    """A configuration that a model refuses: every problem names its field.

    ``problems`` holds ``(field, problem)`` pairs; the message lists them as
    ``model: bad configuration: field: problem; field: problem``."""

    def __init__(self, model: str, problems: Sequence[tuple[str, str]]):
        self.model = model
        self.problems = list(problems)
        super().__init__(f"{model}: bad configuration: " + "; ".join(f"{f}: {p}" for f, p in self.problems))


def split_problem(problem: str) -> tuple[str, str]:
    """``"field: problem"`` -> ``("field", "problem")`` (``("", problem)`` without a field)."""
    field_name, sep, rest = problem.partition(": ")
    if sep and field_name and " " not in field_name:
        return field_name, rest
    return "", problem


def _json_type(t: type) -> str:
    return {int: "an integer", str: "a string", bool: "a boolean (true or false)"}.get(t, t.__name__)


#: the integers a configuration may hold: larger ones overflow the index-sized arithmetic of the
#: models and engines (issue 33: --set messages=99999999999999999999 was an OverflowError, exit 3)
_INT64 = (-(2**63), 2**63 - 1)


def _huge_int(value: Any) -> int | None:
    """The first integer in a (nested) tuple that does not fit in 64 bits, or None."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, (tuple, list)):
            stack.extend(v)
        elif isinstance(v, int) and not isinstance(v, bool) and not _INT64[0] <= v <= _INT64[1]:
            return v
    return None


def config_type_problems(config: Any) -> list[str]:
    """Type problems of a configuration dataclass, judged against each field's default:
    a bool field takes a bool, an int field an int (not a bool), a tuple field a tuple, an
    enum field one of its members or their values, a str field a str.  ``"field: problem"``."""
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        return [f"config: expected a configuration record, got {type(config).__name__}"]
    problems = []
    for f in dataclasses.fields(config):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = f.default_factory()  # type: ignore[misc]
        else:
            continue
        v = getattr(config, f.name)
        if isinstance(default, enum.Enum):
            E = type(default)
            values = [m.value for m in E]
            if not isinstance(v, E) and not (isinstance(v, (str, int)) and not isinstance(v, bool) and v in values):
                problems.append(f"{f.name}: must be one of {values}, got {v!r}")
        elif isinstance(default, bool):
            if not isinstance(v, bool):
                problems.append(f"{f.name}: must be a boolean, got {v!r}")
        elif isinstance(default, int):
            if isinstance(v, bool) or not isinstance(v, int):
                problems.append(f"{f.name}: must be an integer, got {v!r}")
            elif not _INT64[0] <= v <= _INT64[1]:
                problems.append(f"{f.name}: {v} is out of range (a configuration integer fits in 64 bits)")
        elif isinstance(default, tuple):
            if not isinstance(v, tuple):
                problems.append(f"{f.name}: must be a list, got {v!r}")
            else:
                huge = _huge_int(v)
                if huge is not None:
                    problems.append(f"{f.name}: {huge} is out of range (a configuration integer fits in 64 bits)")
        elif isinstance(default, str):
            if not isinstance(v, str):
                problems.append(f"{f.name}: must be a string, got {v!r}")
    return problems


def int_range(problems: list[str], config: Any, name: str, lo: int | None = None, hi: int | None = None, why: str = "") -> None:
    """Append ``name``'s range problem (if it is an int out of ``lo..hi``) to ``problems``."""
    v = getattr(config, name)
    if isinstance(v, bool) or not isinstance(v, int):
        return  # a type problem, reported by config_type_problems
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        if lo is not None and hi is not None:
            bound = f"between {lo} and {hi}"
        elif lo is not None:
            bound = f"at least {lo}"
        else:
            bound = f"at most {hi}"
        problems.append(f"{name}: must be {bound}, got {v}" + (f" ({why})" if why else ""))


C = TypeVar("C")


class Model(Generic[S]):
    """Base class of every model.  Subclasses set ``name``, ``Config`` and
    implement :meth:`init_states`, :meth:`actions`, :meth:`step` and
    :meth:`properties`; :meth:`successors` may be overridden by a faster
    equivalent (the explorer's hot path) as long as it yields the same
    successors in the same order.  A model validates its configuration in
    :meth:`validate_config` (called on every construction and by
    :func:`config_from_overrides`: bad input never reaches the state machine)
    and declares the actions a trace may name in :attr:`ACTIONS`.
    """

    #: registry name, e.g. ``"consumer-lists"``
    name: ClassVar[str] = "model"
    #: frozen dataclass of the configuration
    Config: ClassVar[type]
    #: The actions a trace, a driver or a port may name for this model: action name -> the
    #: names of its parameters.  ``None``: not declared (traces are then not checked for
    #: unknown actions).  A model with a call-level view (``conformance/views.py``) declares
    #: the view's calls too: traces of it speak either vocabulary.
    ACTIONS: ClassVar[Mapping[str, tuple[str, ...]] | None] = None
    #: The JSON type of each action parameter, by parameter name (``int``, ``str``, ``bool``;
    #: an ``int`` is never a ``bool``): a trace's parameter of another type is bad input, not a
    #: divergence.  The values a configuration allows come from :meth:`param_range`.
    PARAM_TYPES: ClassVar[Mapping[str, type]] = {}

    def __init__(self, config: Any | None = None):
        self.config = config if config is not None else self.Config()
        self._properties: tuple[Property, ...] | None = None
        check_config(type(self), self.config)

    # -- configuration ---------------------------------------------------
    @classmethod
    def validate_config(cls, config: Any) -> list[str]:
        """Every problem of ``config`` for this model, each ``"field: problem"``
        (empty: the model accepts it).  Checks types (against the defaults of
        :attr:`Config`), ranges and relations between fields.  Subclasses extend
        the list: ``problems = super().validate_config(config)``, then their own
        ranges (skipping fields that already have a type problem)."""
        return config_type_problems(config)

    @classmethod
    def param_range(cls, config: Any, action: str, param: str) -> Container[Any] | None:
        """The values parameter ``param`` of ``action`` may take under ``config`` (e.g.
        ``range(consumers)``), or None when any value of its type may be right."""
        return None

    @classmethod
    def param_problem(cls, config: Any | None, action: str, param: str, value: Any) -> str | None:
        """Why ``value`` cannot be parameter ``param`` of ``action`` (its type, then its range
        under ``config`` when given), or None."""
        want = cls.PARAM_TYPES.get(param)
        if want is not None and (not isinstance(value, want) or (want is not bool and isinstance(value, bool))):
            return f"parameter {param} of '{action}' is {_json_type(want)}, got {value!r}"
        domain = cls.param_range(config, action, param) if config is not None and want is not None else None
        if domain is not None and value not in domain:
            if isinstance(domain, range) and domain.step == 1:
                allowed = f"in {domain.start}..{domain.stop - 1}" if len(domain) else "nothing (none configured)"
            else:
                allowed = f"one of {sorted(domain)!r}"
            return f"parameter {param} of '{action}' must be {allowed} in this configuration, got {value!r}"
        return None

    @classmethod
    def action_problem(cls, action: Sequence[Any], config: Any | None = None) -> str | None:
        """Why ``action`` is no action of this model (unknown name, wrong number of
        parameters, a parameter of the wrong type or, given the ``config``, out of its range),
        or None.  Judged against :attr:`ACTIONS`; None when undeclared."""
        if cls.ACTIONS is None:
            return None
        if not isinstance(action, (tuple, list)) or not action or not isinstance(action[0], str):
            return f"an action is [name, *parameters], got {action!r}"
        name = action[0]
        params = cls.ACTIONS.get(name)
        if params is None:
            return f"unknown action '{name}' (known: {', '.join(sorted(cls.ACTIONS))})"
        if len(action) - 1 != len(params):
            takes = f"{len(params)} parameter{'s' if len(params) != 1 else ''}" + (f" ({', '.join(params)})" if params else "")
            return f"action '{name}' takes {takes}, got {len(action) - 1}: {list(action)!r}"
        for param, value in zip(params, action[1:]):
            problem = cls.param_problem(config, name, param, value)
            if problem:
                return problem
        return None

    @classmethod
    def configs(cls) -> dict[str, Any]:
        """Named configurations; the first is the default."""
        return {"default": cls.Config()}

    @classmethod
    def describe_configs(cls) -> dict[str, str]:
        """One line per named configuration (what it is for)."""
        return {name: "" for name in cls.configs()}

    # -- the state machine -------------------------------------------------
    def init_states(self) -> Sequence[S]:
        raise NotImplementedError

    def actions(self, state: S) -> Iterable[Action]:
        raise NotImplementedError

    def step(self, state: S, action: Action) -> Iterable[tuple[Observation, S]]:
        """The outcomes of ``action`` in ``state``: ``(observation, next_state)``
        pairs in a deterministic order; empty when the action is not enabled."""
        raise NotImplementedError

    def successors(self, state: S) -> list[Successor]:
        return [(a, o, t) for a in self.actions(state) for o, t in self.step(state, a)]

    def packed(self) -> Any:
        """A packed view of this model for the explorer (:class:`conq.model.engines.packing.Packed`: states
        as integers, successors and checks memoised on the fields they read), or None (the
        default: the explorer works on the states themselves).  Only a model whose state is a flat
        tuple of fields with finite declared domains can offer one; it must give the same
        successors, in the same order, as :meth:`successors` (model/engines/packing.py says how)."""
        return None

    # -- properties ---------------------------------------------------------
    def properties(self) -> Sequence[Property]:
        raise NotImplementedError

    def property_list(self) -> tuple[Property, ...]:
        if self._properties is None:
            props = tuple(self.properties())
            names = [p.name for p in props]
            dupes = {n for n in names if names.count(n) > 1}
            if dupes:
                raise ModelError(f"{self.name}: duplicate property names {sorted(dupes)}")
            for p in props:
                if p.is_invariant and p.witness is None:
                    raise ModelError(f"{self.name}: invariant '{p.name}' has no witness")
            self._properties = props
        return self._properties

    def property(self, name: str) -> Property:
        for p in self.property_list():
            if p.name == name:
                return p
        raise ModelError(
            f"{self.name}: no property named '{name}' (known: {', '.join(p.name for p in self.property_list())})"
        )

    def fair(self, action: Action, observation: Observation) -> Hashable | None:
        """The weak-fairness class of a step, or None when the step is not
        fair (the environment may never take it).  Liveness properties are
        checked assuming: a class that stays enabled is eventually taken."""
        return None

    # -- views ----------------------------------------------------------------
    def view(self, state: S) -> Any:
        """A readable, JSON-able view of a state (for counterexamples and reports)."""
        return state

    def observe(self, state: S) -> Any:
        """What an implementation can report of a state (conformance snapshots)."""
        return self.view(state)

    def canonical(self, state: S) -> S:
        """Representative of the state's symmetry class (identity: no reduction)."""
        return state

    def orbit(self, state: S) -> Iterable[S]:
        """Every state of ``state``'s symmetry class, itself included: the states :meth:`canonical`
        maps to one representative (identity: the state alone).  A model that overrides
        :meth:`canonical` overrides this too; the soundness tests and, for :attr:`orbit_properties`,
        the engines use it."""
        return (state,)

    #: names of state properties (invariants, their witnesses, ``sometimes``) that are *not*
    #: invariant under the renamings of :meth:`canonical` (a witness that reads an order of
    #: indices, say).  With symmetry reduction the engines evaluate them on every member of the
    #: representative's :meth:`orbit` (an invariant holds on all, a witness fires on one), and a
    #: witness's path is rebuilt to end at the member that fired (results._concretise).
    orbit_properties: frozenset[str] = frozenset()

    #: How :meth:`view` splits into the parts a counterexample reports changes of
    #: (:mod:`conq.model.engines.changes`): a top-level key of the view whose value is a list -> the name
    #: of one of its items (``{"consumers": "c"}``: ``c0``, ``c1``, by an item's ``id`` when it has
    #: one), or ``(prefix, field)`` to file a list's items under another part's field
    #: (``{"rejected_by": ("m", "rejected_by")}``: ``m0.rejected_by``).  Everything else is
    #: :attr:`view_root`.
    view_parts: ClassVar[Mapping[str, str | tuple[str, str]]] = {}
    view_root: ClassVar[str] = "state"

    def actors(self, action: Action, observation: Observation) -> tuple[str, str]:
        """Who does a step to whom (the first name is the one that acted): a counterexample's
        arrows go from it to the part the step changed (:mod:`conq.model.engines.changes`)."""
        return ("driver", self.name)

    def format_action(self, action: Action, observation: Observation) -> str:
        """``name(arg, ...)`` with JSON arguments, then ``→ observation`` if there is one."""
        from conq.model.engines.changes import label

        return label(self, action, observation)

    def format_path(self, path: Path, *, states: bool = False, cycle: Path | None = None) -> str:
        """A path as text: per step who acted, the action and the fields it changed
        (``states``: the full state after every step too); a lasso's ``cycle`` after it."""
        from conq.model.engines.changes import explain, format_trail

        return format_trail(explain(self, path, cycle), states=states)

    # -- running paths ----------------------------------------------------
    def replay(self, actions: Iterable[tuple[Action, Observation] | Action], init: S | None = None) -> Path:
        """Re-run a path given as actions (optionally with the observation to
        pick among outcomes); raises :class:`ModelError` at the first step the
        model does not allow."""
        state = self.init_states()[0] if init is None else init
        steps: list[Successor] = []
        for i, item in enumerate(actions, 1):
            if len(item) == 2 and isinstance(item[0], tuple):
                action, want = item
                pick = True
            else:
                action, want, pick = tuple(item), None, False
            outcomes = list(self.step(state, tuple(action)))
            if pick:
                outcomes = [(o, t) for o, t in outcomes if o == want]
            if not outcomes:
                raise ModelError(
                    f"{self.name}: step {i}: {action!r}"
                    + (f" with observation {want!r}" if pick else "")
                    + f" is not enabled in state {_compact(self.view(state))}"
                )
            o, t = outcomes[0]
            steps.append((tuple(action), o, t))
            state = t
        return Path(init=self.init_states()[0] if init is None else init, steps=tuple(steps))

    def check_path(self, path: Path) -> None:
        """Check every invariant along a path; raise :class:`PropertyViolation` at the first failure."""
        props = self.property_list()
        inv = [p for p in props if p.kind is Kind.ALWAYS]
        inv_step = [p for p in props if p.kind is Kind.ALWAYS_STEP]
        for p in inv:
            if not p.check(path.init):
                raise PropertyViolation(p, Path(path.init), self)
        for i, (a, o, t) in enumerate(path.steps):
            prev = path.steps[i - 1][2] if i else path.init
            for p in inv_step:
                if not p.check(prev, a, o, t):
                    raise PropertyViolation(p, Path(path.init, path.steps[: i + 1]), self)
            for p in inv:
                if not p.check(t):
                    raise PropertyViolation(p, Path(path.init, path.steps[: i + 1]), self)


def check_config(model_cls: type[Model], config: Any) -> None:
    """Raise :class:`ConfigError` when ``model_cls`` refuses ``config``."""
    try:
        problems = model_cls.validate_config(config)
    except (TypeError, ValueError, AttributeError, IndexError, KeyError) as e:  # a check tripped on a bad value
        problems = [f"config: cannot be checked: {type(e).__name__}: {e}"]
    if problems:
        raise ConfigError(model_cls.name, [split_problem(p) for p in problems])


def config_from_overrides(model_cls: type[Model], base: Any, overrides: Mapping[str, Any]) -> Any:
    """Apply ``key=value`` overrides to a config: strings as typed on a command
    line, or JSON values as a trace header or reproducer carries them.  The
    result is validated by the model's :meth:`Model.validate_config`
    (:class:`ConfigError`, naming each bad field)."""
    fields = {f.name: f for f in dataclasses.fields(base)}
    changes: dict[str, Any] = {}
    for key, raw in overrides.items():
        if key not in fields:
            raise ConfigError(
                model_cls.name, [(key, f"unknown config field '{key}' (fields: {', '.join(sorted(fields))})")]
            )
        current = getattr(base, key)
        try:
            changes[key] = _coerce(raw, current)
        except (ValueError, TypeError) as e:
            raise ConfigError(model_cls.name, [(key, str(e))]) from None
    config = dataclasses.replace(base, **changes)
    check_config(model_cls, config)
    return config


def _coerce(raw: Any, current: Any) -> Any:
    if not isinstance(raw, str):
        # A JSON value (from a trace header or a reproducer): lists become tuples.
        if isinstance(current, enum.Enum):
            try:
                return type(current)(raw)
            except (ValueError, TypeError):
                raise ValueError(f"expected one of {[m.value for m in type(current)]}, got {raw!r}") from None
        if isinstance(raw, list):
            return _tuples(raw)
        if type(raw) is not type(current) and not (isinstance(current, int) and type(raw) is int):
            raise ValueError(f"expected {type(current).__name__}, got {raw!r}")
        return raw
    if isinstance(current, bool):
        low = raw.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"expected a boolean, got {raw!r}")
    if isinstance(current, int):
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"expected an integer, got {raw!r}") from None
    if isinstance(current, tuple):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            raise ValueError(f"expected a JSON list, got {raw!r}") from None
        if not isinstance(value, list):
            raise ValueError(f"expected a JSON list, got {raw!r}")
        return _tuples(value)
    if isinstance(current, enum.Enum):
        try:
            return type(current)(raw)
        except ValueError:
            raise ValueError(f"expected one of {[m.value for m in type(current)]}, got {raw!r}") from None
    return raw


def _tuples(value: Any) -> Any:
    """JSON lists (at any depth) -> tuples: configurations are frozen and hashable."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


def _compact(value: Any) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return repr(value)


def config_dict(config: Any) -> dict[str, Any]:
    """JSON-able dict of a configuration (enums by value, tuples as lists)."""

    def conv(v: Any) -> Any:
        if isinstance(v, enum.Enum):
            return v.value
        if isinstance(v, tuple):
            return [conv(x) for x in v]
        return v

    return {f.name: conv(getattr(config, f.name)) for f in dataclasses.fields(config)}
