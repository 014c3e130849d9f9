"""Black-box trace validation: can the model explain a log in which most steps are hidden?

The setting of TLA+ trace validation (Cirstea, Kuppe, Merz et al., "Validating Traces of
Distributed Programs Against TLA+ Specifications", 2024): a running system logs some of its
events -- an action, perhaps only some of its parameters, perhaps what was observed -- and
perhaps part of its state; everything else it does is *hidden*.  The log is valid when some
behaviour of the model produces it: a path whose logged steps match the events in order, with
any number of hidden steps before each.

The search keeps, after each event, the *set* of model states consistent with the prefix read so
far (the model is nondeterministic and the log partial: one state is not enough) and closes it
under hidden steps by breadth-first search before matching the next event.  Every state keeps
its parent, so a rejection shows a shortest model path to the states it was stuck in, and an
acceptance a witness path.  Bounds are counts: ``max_states`` caps the states of one closure;
a run that hits it and then rejects is *incomplete* (exit 4), never a rejection, because the
states left out might have explained the rest.  An acceptance is exact whatever the bound: its
witness path is a real behaviour of the model.

Which actions are hidden: the header's ``hidden`` list, else every action the log never names
(an action the log names is taken to be logged whenever it happens).  The vocabulary is the
model's own steps (``level`` "thread") or its call-level view (``level`` "call",
``conformance/views.py``): the one the log's events speak.
"""

from __future__ import annotations

import heapq
import json
import time
from dataclasses import dataclass, field
from typing import Any

from conq.model.kernel import Model, config_dict
from conq.model.engines.registry import load_model

from .adapters import REJECTED, short_repr
from .trace import ANY, Event, ObservedEvent, Trace, TraceError, hashable, jsonable

#: the default bound on the states of one closure (the states consistent at one point of the log)
MAX_STATES = 200_000
#: the most (action, observation) pairs a rejection lists as "what the model allowed next"
ALLOWED_LIMIT = 20
#: the most transitions a rejection lists that match the failed event's action but not the rest
NEAR_LIMIT = 8

LEVELS = ("thread", "call")


@dataclass
class Step:
    """One step of a model path: the action, its observation, and which log event it matched
    (None: a hidden step)."""

    action: tuple
    observation: Any
    event: int | None
    #: the model states the step goes from and to (not in the JSON: states are the model's own
    #: values); what a campaign counts as the coverage of an accepted log (issue 19)
    before: Any = field(default=None, repr=False, compare=False)
    after: Any = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"action": jsonable(self.action), "observation": jsonable(self.observation),
                **({"event": self.event} if self.event is not None else {"hidden": True})}


@dataclass
class Validation:
    """The verdict on one log."""

    model: str
    config_name: str | None
    config: dict[str, Any]
    level: str
    source: str
    events: int
    hidden: list[str] | None  # None: every action the log never names
    verdict: str = "accepted"  # accepted | rejected | incomplete
    accepted: int = 0  # events matched (the longest accepted prefix)
    failed: dict[str, Any] | None = None  # the first event no consistent state explains
    last_line: int | None = None  # file line of the last accepted event (1: the header)
    frontier: int = 0  # states consistent with the accepted prefix (after hidden steps)
    allowed: list[dict[str, Any]] = field(default_factory=list)  # observable steps enabled there
    allowed_total: int = 0
    near: list[dict[str, Any]] = field(default_factory=list)  # steps matching the failed event's action
    path: list[Step] = field(default_factory=list)  # shortest path to the frontier / witness
    start: Any = None  # the initial state the path starts from (not in the JSON)
    states: int = 0  # states explored, over every closure
    largest: int = 0  # the largest closure
    truncated: list[int] = field(default_factory=list)  # event indexes whose closure hit the bound (0: before the first)
    max_states: int = MAX_STATES
    stopped: str | None = None  # the total bound (states, seconds, memory) that ended the run before a verdict

    @property
    def exit_code(self) -> int:
        return {"accepted": 0, "rejected": 1, "incomplete": 4}[self.verdict]

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "ok": self.verdict == "accepted",
            "exit_code": self.exit_code,
            "verdict": self.verdict,
            "model": self.model,
            "config_name": self.config_name,
            "config": self.config,
            "level": self.level,
            "trace": self.source,
            "events": self.events,
            "hidden": self.hidden if self.hidden is not None else "every action the log never names",
            "accepted_events": self.accepted,
            "last_accepted_line": self.last_line,
            "states_explored": self.states,
            "largest_closure": self.largest,
            "max_states": self.max_states,
            "truncated_at_events": self.truncated,
            "stopped_by": self.stopped,
        }
        if self.verdict == "accepted":
            doc["witness"] = [s.to_json() for s in self.path]
        else:
            doc["failed_event"] = self.failed
            doc["frontier_states"] = self.frontier
            doc["allowed_next"] = self.allowed
            doc["allowed_next_total"] = self.allowed_total
            doc["matching_action"] = self.near
            doc["path_to_frontier"] = [s.to_json() for s in self.path]
        return doc

    def describe(self) -> list[str]:
        head = f"{self.model} ({self.config_name or 'custom config'}, {self.level} level): {self.source}, {self.events} events"
        stats = f"{self.states:,} states explored, largest closure {self.largest:,} (bound {self.max_states:,})"
        if self.verdict == "accepted":
            n = len(self.path)
            lines = [f"{head}: ACCEPTED; {stats}",
                     f"witness: a model path of {n} step{'s' if n != 1 else ''} ({sum(1 for s in self.path if s.event is None)} hidden):"]
            lines += _path_lines(self.path)
            if self.truncated:
                lines.append(f"(closures truncated at the bound at events {self.truncated}: the witness is exact, "
                             "other explanations may exist)")
            return lines
        f = self.failed or {}
        if self.stopped:
            return [f"{head}: INCOMPLETE (stopped: {self.stopped}; not a verdict); {stats}",
                    f"events matched before the stop: {self.accepted} (through line {self.last_line})"]
        word = "REJECTED" if self.verdict == "rejected" else "INCOMPLETE (a closure hit --max-states; not a verdict)"
        where = f"line {self.last_line}" + (" (the header)" if self.last_line == 1 and not self.accepted else "")
        lines = [
            f"{head}: {word}; {stats}",
            f"longest accepted prefix: {self.accepted} event{'s' if self.accepted != 1 else ''} (through {where})",
            f"event {f.get('index')} (line {f.get('line')}) is explained by none of the {self.frontier:,} model states "
            f"consistent with that prefix: {f.get('event')}",
        ]
        if f.get("why"):
            lines.append(f"  {f['why']}")
        if self.near:
            lines.append("steps the model allowed that match the event's action:")
            for n in self.near:
                extra = f"; the state after differs: {json.dumps(n['differs'])}" if n.get("differs") else ""
                lines.append(f"  {json.dumps(n['action'])} -> {json.dumps(n['observation'])}{extra}")
        more = f" (first {len(self.allowed)} of {self.allowed_total})" if self.allowed_total > len(self.allowed) else ""
        lines.append(f"what the model allowed next (observable steps enabled in those states){more}:")
        lines += [f"  {json.dumps(a['action'])} -> {json.dumps(a['observation'])}" for a in self.allowed] or ["  nothing"]
        lines.append(f"a shortest model path to those states ({len(self.path)} step{'s' if len(self.path) != 1 else ''}):")
        lines += _path_lines(self.path)
        if self.truncated:
            lines.append(f"closures truncated at --max-states {self.max_states:,} at events {self.truncated}: "
                         "the states left out might explain the log; raise the bound")
        return lines


def _path_lines(path: list[Step]) -> list[str]:
    if not path:
        return ["  (the initial state)"]
    return [f"  {i:>3}. {json.dumps(jsonable(s.action))} -> {json.dumps(jsonable(s.observation))}"
            + (f"   [event {s.event}]" if s.event is not None else "   [hidden]")
            for i, s in enumerate(path, 1)]


# ------------------------------------------------------------------------------------------
# matching one event
# ------------------------------------------------------------------------------------------
_MISSING = object()


def _resolve(view: Any, path: tuple) -> Any:
    """The value at ``path`` (keys and list indexes) of a JSON view, or _MISSING."""
    v = view
    for k in path:
        if isinstance(v, dict):
            v = v.get(str(k), _MISSING)
        elif isinstance(v, list) and isinstance(k, int) and 0 <= k < len(v):
            v = v[k]
        else:
            return _MISSING
        if v is _MISSING:
            return v
    return v


class _Views:
    """``view()`` of model states as plain JSON (memoised: observed events revisit states)."""

    LIMIT = 100_000

    def __init__(self, model: Model):
        self.model = model
        self.memo: dict[Any, Any] = {}

    def __call__(self, s: Any) -> Any:
        v = self.memo.get(s)
        if v is None:
            if len(self.memo) >= self.LIMIT:
                self.memo.clear()
            v = self.memo[s] = json.loads(json.dumps(self.model.view(s), default=str))
        return v

    def differs(self, s: Any, observe: tuple) -> dict[str, Any]:
        """The observed paths whose value in ``s`` is not the logged one: path -> the model's value."""
        view = self(s)
        out = {}
        for path, want in observe:
            got = _resolve(view, path)
            if got is _MISSING or hashable(got) != hashable(want):
                out[_key(path)] = None if got is _MISSING else got
        return out

    def matches(self, s: Any, observe: tuple) -> bool:
        view = self(s)
        for path, want in observe:
            got = _resolve(view, path)
            if got is _MISSING or hashable(got) != hashable(want):
                return False
        return True


def _key(path: tuple) -> str:
    """A path as the log writes it (JSON Pointer escapes)."""
    return "/".join(str(k).replace("~", "~0").replace("/", "~1") for k in path)


def _as_observed(e: Event | ObservedEvent) -> ObservedEvent:
    """A recorded trace's event as an observed one (the action known, and its observation)."""
    if isinstance(e, ObservedEvent):
        return e
    return ObservedEvent(e.step, e.line or 0, e.action[0], tuple(enumerate(e.action[1:])), e.observation,
                         raw={"step": e.step, "action": jsonable(e.action), "observation": jsonable(e.observation)})


def _action_matcher(e: ObservedEvent):
    name, params = e.name, e.params

    def match(a: tuple) -> bool:
        if a[0] != name:
            return False
        for i, v in params:
            if i + 1 >= len(a) or a[i + 1] != v:
                return False
        return True

    return match


def _event_text(e: ObservedEvent) -> str:
    raw = {k: v for k, v in e.raw.items() if k != "step"}
    text = json.dumps(raw, separators=(",", ":"))
    return text if len(text) <= 400 else text[:400] + " ... [cut]"


# ------------------------------------------------------------------------------------------
# the search
# ------------------------------------------------------------------------------------------
def model_for(trace: Trace, model_name: str | None = None, config_name: str | None = None, level: str | None = None) -> tuple[Model, str]:
    """The model (thread level or its call-level view) a log is validated against: the named
    configuration (``config_name``, else the header's, else the model's default) with the
    header's ``config`` fields over it."""
    from .views import call_view, has_call_view

    name = model_name or trace.model
    if level is None:
        level = trace.level or ("call" if trace.kind == "recorded" and has_call_view(name) else "thread")
    if level not in LEVELS:
        raise TraceError(f"--level must be thread or call, got {level!r}")
    model = load_model(name, config_name or trace.config_name, trace.config if trace.config_given else None)
    if level == "call":
        if not has_call_view(name):
            raise TraceError(f"model '{name}' has no call-level view (its system declares none): use --level thread")
        model = call_view(model)
    return model, level


class _Stop(Exception):
    """A total bound ended the validation before a verdict."""


class _Budget:
    """The total bounds of one validation: states over every closure, seconds, resident memory
    (``conq validate --max-states/--max-seconds/--max-memory``).  Time and memory are read every
    1,024 states, so the search pays almost nothing for them; hitting one ends the run (exit 4)."""

    EVERY = 1024

    def __init__(self, max_states: int | None, max_seconds: float | None, max_memory_mb: float | None) -> None:
        self.max_states, self.max_seconds, self.max_memory_mb = max_states, max_seconds, max_memory_mb
        self.deadline = None if max_seconds is None else time.monotonic() + max_seconds
        self.states = 0
        self.result: Validation | None = None  # the validation under way (what a stop reports)

    def tick(self) -> None:
        self.states += 1
        if self.max_states is not None and self.states > self.max_states:
            raise _Stop(f"--max-states {self.max_states:,} (states over every closure)")
        if self.states % self.EVERY == 0:
            self.check()

    def check(self) -> None:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise _Stop(f"--max-seconds {self.max_seconds:g}")
        if self.max_memory_mb is not None:
            from conq.model.engines.explorer import rss_bytes

            rss = rss_bytes()
            if rss is not None and rss > self.max_memory_mb * 2**20:
                raise _Stop(f"--max-memory {self.max_memory_mb:g} MB (resident {rss / 2**20:,.0f} MB)")


def validate(model: Model, trace: Trace, *, level: str = "thread", source: str = "<trace>",
             max_states: int = MAX_STATES, max_total_states: int | None = None, max_seconds: float | None = None,
             max_memory_mb: float | None = None) -> Validation:
    """Search ``model`` for a behaviour that produces the log ``trace`` (see the module docstring).
    ``max_states`` bounds one closure (a cut closure that then rejects is incomplete); the total
    bounds -- ``max_total_states`` over every closure, ``max_seconds``, ``max_memory_mb`` -- end
    the run when hit, incomplete (exit 4) with ``stopped`` naming the bound."""
    if max_states < 1 or (max_total_states is not None and max_total_states < 1):
        raise ValueError("max_states must be at least 1")
    budget = _Budget(max_total_states, max_seconds, max_memory_mb)
    try:
        return _validate(model, trace, level, source, max_states, budget)
    except _Stop as stop:
        res = budget.result
        res.verdict, res.stopped = "incomplete", str(stop)
        res.states = budget.states
        return res


def _validate(model: Model, trace: Trace, level: str, source: str, max_states: int, budget: _Budget) -> Validation:
    events = [_as_observed(e) for e in trace.events]
    views = _Views(model)
    # a recorded trace logs every step; an observed log hides what it does not name
    if trace.kind == "recorded":
        hidden_names: frozenset[str] | None = frozenset()
        hidden_list: list[str] | None = []
    elif trace.hidden is not None:
        hidden_names, hidden_list = frozenset(trace.hidden), list(trace.hidden)
    else:
        logged = {e.name for e in events if e.name is not None}
        hidden_names, hidden_list = None, None
    _check_observe_paths(model, views, events, source)

    def hidden(a: tuple) -> bool:
        return a[0] in hidden_names if hidden_names is not None else a[0] not in logged

    res = budget.result = Validation(model=model.name, config_name=getattr(model, "config_name", None),
                                     config=config_dict(model.config), level=level, source=source, events=len(events),
                                     hidden=hidden_list, max_states=max_states)
    res.last_line = 1
    budget.check()  # a bound already passed (memory) stops before the search
    successors = model.successors
    # layers[k]: the closure after event k (k = 0: before the first), state -> (depth, parent, parent layer,
    # action, observation); parent None for an initial state, action None for a state observation
    layers: list[dict[Any, tuple]] = []
    roots: dict[Any, tuple] = {}
    for s in model.init_states():
        roots.setdefault(s, (0, None, None, None, None))
    for k in range(len(events) + 1):
        res.accepted = k
        res.last_line = events[k - 1].line if k else 1
        done, succ, cut = _closure(roots, k, successors, hidden, max_states, budget)
        layers.append(done)
        res.states += len(done)
        res.largest = max(res.largest, len(done))
        if cut:
            res.truncated.append(k)
        if k == len(events):
            break
        e = events[k]
        roots = _advance(done, succ, e, k, views, successors)
        if not roots:
            res.verdict = "incomplete" if res.truncated else "rejected"
            res.accepted = k
            res.last_line = events[k - 1].line if k else 1
            _explain(res, e, k + 1, done, succ, hidden, views)
            res.path, res.start = _path(layers, k, min(done, key=lambda s: done[s][0]))
            return res
    res.accepted = len(events)
    res.last_line = events[-1].line if events else 1
    last = layers[-1]
    # the witness ends at the last event: the shortest path to a state it left (no trailing hidden steps)
    ends = [s for s, entry in last.items() if entry[2] != len(events)] or list(last)
    res.path, res.start = _path(layers, len(events), min(ends, key=lambda s: last[s][0]))
    return res


def _check_observe_paths(model: Model, views: _Views, events: list[ObservedEvent], source: str) -> None:
    """Every observed path starts with a field of the model's view (bad input otherwise)."""
    fields = views(next(iter(model.init_states())))
    if not isinstance(fields, dict):
        if any(e.observe for e in events):
            raise TraceError(f"{source}: field 'observe': model '{model.name}' has no named view fields to observe")
        return
    for e in events:
        for path, _ in e.observe:
            if str(path[0]) not in fields:
                key = _key(path)
                raise TraceError(f"{source}:{e.line}: field 'observe/{key}': '{path[0]}' is no field of the model's "
                                 f"view (fields: {', '.join(fields)})")


def _closure(roots: dict[Any, tuple], k: int, successors, hidden, max_states: int, budget: _Budget | None = None):
    """Every state reachable from ``roots`` by hidden steps, each with its shortest path
    (roots enter at their own depth: a multi-source breadth-first search by depth).
    Returns (state -> entry, state -> its successors, whether the bound cut it)."""
    best = dict(roots)
    heap = [(entry[0], i, s) for i, (s, entry) in enumerate(roots.items())]
    heapq.heapify(heap)
    done: dict[Any, tuple] = {}
    succ: dict[Any, list] = {}
    n = len(heap)
    cut = False
    while heap:
        d, _, s = heapq.heappop(heap)
        if s in done:
            continue
        if len(done) >= max_states:
            cut = True
            break
        if budget is not None:
            budget.tick()
        done[s] = best[s]
        out = succ[s] = successors(s)
        for a, o, t in out:
            if t in done or not hidden(a):
                continue
            prev = best.get(t)
            if prev is None or prev[0] > d + 1:
                best[t] = (d + 1, s, k, a, o)
                n += 1
                heapq.heappush(heap, (d + 1, n, t))
    return done, succ, cut


def _advance(done: dict, succ: dict, e: ObservedEvent, k: int, views: _Views, successors) -> dict[Any, tuple]:
    """The roots of the next closure: the states event ``e`` (0-based ``k``) leads to from ``done``."""
    roots: dict[Any, tuple] = {}
    observe = e.observe
    if e.name is None:  # a state observation: the consistent states it keeps
        for s, entry in done.items():
            if views.matches(s, observe):
                roots[s] = (entry[0], s, k, None, None)
        return roots
    match = _action_matcher(e)
    want = e.observation
    rejected = want == REJECTED and e.action is not None
    for s, entry in done.items():
        d = entry[0] + 1
        enabled = False
        for a, o, t in succ[s]:
            if not match(a):
                continue
            enabled = True
            if want is not ANY and o != want:
                continue
            if observe and not views.matches(t, observe):
                continue
            prev = roots.get(t)
            if prev is None or prev[0] > d:
                roots[t] = (d, s, k, a, o)
        if rejected and not enabled and (not observe or views.matches(s, observe)):
            # a definite "not enabled" answer (["error", 13]): the action did nothing
            prev = roots.get(s)
            if prev is None or prev[0] > entry[0]:
                roots[s] = (entry[0], s, k, e.action, REJECTED)
    return roots


def _explain(res: Validation, e: ObservedEvent, index: int, done: dict, succ: dict, hidden, views: _Views) -> None:
    """What the model allowed where the log could not go on."""
    res.frontier = len(done)
    res.failed = {"index": index, "line": e.line, "event": _event_text(e)}
    allowed: dict[tuple, None] = {}
    near: dict[tuple, dict] = {}
    match = _action_matcher(e) if e.name is not None else None
    for s in done:
        for a, o, t in succ[s]:
            if not hidden(a):
                allowed.setdefault((a, o), None)
            if match is not None and match(a) and len(near) < NEAR_LIMIT:
                key = (a, o)
                if key not in near:
                    item = {"action": jsonable(a), "observation": jsonable(o)}
                    if e.observe and (e.observation is ANY or o == e.observation):
                        item["differs"] = views.differs(t, e.observe)
                    near[key] = item
    res.allowed_total = len(allowed)
    res.allowed = [{"action": jsonable(a), "observation": jsonable(o)} for a, o in list(allowed)[:ALLOWED_LIMIT]]
    res.near = list(near.values())
    near_obs = {o for _, o in near}
    if e.name is None:
        sample = views.differs(next(iter(done)), e.observe) if done else {}
        res.failed["why"] = (f"no consistent state shows that state; one of them has {short_repr(sample, 400)}"
                             if sample else "")
    elif not near:
        hid = " (it is hidden here: the log's other lines never name it)" if hidden((e.name,)) else ""
        res.failed["why"] = f"no consistent state enables an action '{e.name}' with these parameters{hid}"
    elif e.observation is not ANY and e.observation not in near_obs:
        res.failed["why"] = "the action is enabled, but never with the logged observation"
    else:
        res.failed["why"] = "the action is enabled with that observation, but the state after it differs from the logged one"


def _path(layers: list[dict], k: int, s: Any) -> tuple[list[Step], Any]:
    """The model path recorded for state ``s`` of closure ``k``, from an initial state, and that
    initial state."""
    steps: list[Step] = []
    while True:
        d, ps, pk, a, o = layers[k][s]
        if ps is None:
            break
        if a is not None:
            steps.append(Step(a, o, None if pk == k else k, before=ps, after=s))
        s, k = ps, pk
    steps.reverse()
    return steps, s


def validate_file(model_name: str, path: str, *, config_name: str | None = None, level: str | None = None,
                  max_states: int = MAX_STATES, **bounds: Any) -> Validation:
    """Read and validate a log file against a registered model (``conq validate``).  Bad input --
    an unreadable or malformed file, a header naming another model -- is a :class:`TraceError`
    naming the file, line and field."""
    from conq.model.engines.registry import MODELS, model_class

    from .trace import read

    known = model_name in MODELS  # else a user's model, FILE.py:Class or module:Class
    expected = model_name if known else model_class(model_name).name
    trace = read(path, require_known_model=known, kinds=("recorded", "observed"))
    if trace.model != expected:
        raise TraceError(f"{path}:1: field 'model': the log is of model '{trace.model}', not '{expected}'")
    model, level = model_for(trace, model_name, config_name, level)
    return validate(model, trace, level=level, source=str(path), max_states=max_states, **bounds)
