"""Packed states: a model's flat tuple state as one integer, and successors and checks memoised on
the fields they read (issue 18).

Why: the explorer spends its time building, hashing and comparing state tuples, and running the
model's readable step and property functions on states that differ only in fields those functions
never look at.  A model whose state is a flat tuple of fields, each with a finite declared domain
(:meth:`conq.model.kernel.Model.field_domains`), can hand the explorer a :class:`Packed` view:

* :class:`Codec`: each field's value is its index in the field's domain, packed into a fixed bit
  range of one Python int (the consumer-lists reference: 55 bits, so one machine word).  The
  encoding is fixed by the configuration alone (never by discovery order), so every process,
  Spark executor or explorer worker packs a state to the same integer.  A value outside its
  declared domain is a :class:`PackingError` naming the field: a model bug, never hidden.
* :class:`Section`: one part of the successor function (one thread's steps, say) run through the
  model's own readable code and remembered by the values of the fields it *read*.  Fields it may
  not read are replaced by :class:`Poison` objects (one per field) on which every use but copying
  or comparing with itself raises :class:`FootprintRead` naming the field; the section is then run
  again with that field known.  A run that completes read only known fields, so its outcome holds
  for every state that agrees on them (the model is deterministic): the memo is keyed by
  ``state & mask``.  Which fields a section reads depends on where it is (an idle thread reads its
  program counter and stops), so the mask is kept per value of a small *root* of fields the
  section always reads (its program counter, say): two dictionary look-ups per section and state.
  A step is stored as ``(action, observation, keep, set)`` and its successor is
  ``(state & keep) | set``: no tuple is built.
* The transition invariants (``always_step``) are evaluated when a step is recorded, on the
  poisoned transition; a check that reads an unknown field makes that field known (so the
  recorded verdict holds for every state with the key), and a step whose checks all hold is
  labelled a :class:`~conq.model.kernel.CheckedAction` naming the witnesses that fired or could
  not be decided (the engines' existing contract).
* :func:`memoised_predicate`: a state predicate (an invariant, a witness, a liveness trigger or
  goal) remembered the same way, with one mask that grows as the predicate reads fields.

Soundness rests on two things a test checks on every reachable state of the small configurations
(tests/model/test_packing.py): the model's step and property functions are deterministic functions
of the fields they read, and every read of a field goes through an operation :class:`Poison`
intercepts (comparison, truth, arithmetic, hashing, indexing, iteration, ``len``).  What it does not
intercept (``is``, ``isinstance``, ``type``, ``repr``) a model's step or property must not use on a
field's value to decide anything, with one exception that cannot change a verdict: ``s[f] is not
t[f]`` as a first test before ``s[f] != t[f]`` (a field the step left alone is the same object, or
the same poison, on both sides; a field it wrote is known after it), so that a transition check
reads a field's earlier value only where the step changed it and the rest of the test needs it.
Any other exception raised on a poisoned state makes the section or predicate read the whole state,
which is always right.
"""

from __future__ import annotations

from itertools import compress
from operator import is_not
from typing import Any, Callable, Iterable, Sequence

from conq.model.kernel import CheckedAction, Kind

#: entries per memo before it is cleared (a bound on memory; clearing costs only time)
MEMO_LIMIT = 1_000_000


class PackingError(ValueError):
    """A state field holds a value outside the domain its model declared (a model bug)."""


class FootprintRead(BaseException):
    """A memoised function used the value of field ``field``, which it was not given.  A
    BaseException, so that a model's or a property's ``except Exception`` cannot swallow it."""

    def __init__(self, field: int):
        super().__init__(field)
        self.field = field


class Poison:
    """Stands for the value of field ``field`` while it is not known: copying it is allowed (a step
    may copy the whole state), comparing it with itself too (an unchanged field equals itself in
    every real state); any other use raises :class:`FootprintRead`."""

    __slots__ = ("field",)

    def __init__(self, field: int) -> None:
        self.field = field

    def __eq__(self, other: Any) -> bool:
        if other is self:
            return True
        raise FootprintRead(self.field)

    def __ne__(self, other: Any) -> bool:
        if other is self:
            return False
        raise FootprintRead(self.field)

    def __repr__(self) -> str:
        return f"<field {self.field}: not read>"


def _read(self: Poison, *_args: Any) -> Any:
    raise FootprintRead(self.field)


for _name in (
    "lt le gt ge bool index int float hash contains len iter getitem "
    "add radd sub rsub mul rmul floordiv rfloordiv mod rmod neg pos invert abs "
    "and rand or ror xor rxor lshift rlshift rshift rrshift iadd isub iand ior ixor"
).split():
    setattr(Poison, f"__{_name}__", _read)


#: values that hold no other value (a label's or observation's usual parts)
_ATOMS = frozenset((int, str, bool, float, type(None)))


def _poison_in(x: Any) -> Poison | None:
    """A poison inside a label or observation (a field's value copied into it), or None."""
    t = type(x)
    if t is Poison:
        return x
    if t in _ATOMS:
        return None
    if isinstance(x, tuple):
        for y in x:
            ty = type(y)
            if ty is Poison:
                return y
            if ty not in _ATOMS:
                p = _poison_in(y)
                if p is not None:
                    return p
    return None


class _RangeCodes:
    """The codes of a ``range`` domain (step 1), however large, without a table: an int's offset."""

    __slots__ = ("start", "stop")

    def __init__(self, r: range):
        self.start, self.stop = r.start, r.stop

    def get(self, v: Any) -> int | None:
        if type(v) is int and self.start <= v < self.stop:
            return v - self.start
        return None


class Codec:
    """Flat tuple states <-> integers, from each field's finite domain (a sequence of distinct
    values; its index is the code; a ``range`` is used as it is, however large).  ``names``: a
    readable name per field, for errors."""

    def __init__(self, domains: Sequence[Iterable[Any]], names: Sequence[str] | None = None, shape: Any = None):
        self.width = len(domains)
        self.values: list[Sequence] = []
        self.codes: list[Any] = []
        self.shift: list[int] = []
        self.bits: list[int] = []
        self.fmask: list[int] = []  # the field's bit range, in place
        self.names = list(names) if names is not None else [f"field {i}" for i in range(self.width)]
        at = 0
        for i, dom in enumerate(domains):
            if isinstance(dom, range) and dom.step == 1:
                vals: Sequence = dom
                codes: Any = _RangeCodes(dom)
                size = dom.stop - dom.start
            else:
                vals = tuple(dom)
                codes = {}
                for k, v in enumerate(vals):
                    if v in codes:
                        raise PackingError(f"{self.names[i]}: its domain lists {v!r} twice (or values equal to each other)")
                    codes[v] = k
                size = len(vals)
            if size <= 0:
                raise PackingError(f"{self.names[i]}: empty domain")
            b = (size - 1).bit_length()  # 0 for a field of one value: it is known, never packed
            self.values.append(vals)
            self.codes.append(codes)
            self.shift.append(at)
            self.bits.append(b)
            self.fmask.append(((1 << b) - 1) << at)
            at += b
        self.total_bits = at
        self.full = (1 << at) - 1
        self._dec = [(vals, sh, (1 << b) - 1) for vals, sh, b in zip(self.values, self.shift, self.bits)]
        self._enc = list(zip(self.codes, self.shift, range(self.width)))
        self._poisons = [Poison(i) for i in range(self.width)]
        #: a nested state (``shape``: nested tuples whose leaves are field indices, each field once):
        #: ``flat`` lists a state's fields in field order, ``nest`` builds the state from them
        self.shape = shape
        self.flat, self.nest = _shape_functions(shape, self.width, [v[0] for v in self.values])
        self._outside: dict[int, list[int]] = {}
        self._plans: dict[int, tuple] = {}
        self._writes: dict[tuple, tuple[int, int]] = {}  # (field, type, value) -> (its bits, its code in place)

    def code(self, i: int, v: Any) -> int:
        c = self.codes[i].get(v)
        if c is None or (type(v) is bool) != (type(self.values[i][c]) is bool):
            dom = self.values[i]
            shown = (f"{dom.start}..{dom.stop - 1}" if isinstance(dom, range) else
                     ", ".join(map(repr, dom[:12])) + (", ..." if len(dom) > 12 else ""))
            raise PackingError(f"{self.names[i]}: value {v!r} is outside its declared domain ({shown})")
        return c

    def encode(self, state: Sequence[Any]) -> int:
        state = self.flat(state)
        if len(state) != self.width:
            raise PackingError(f"a state of {len(state)} fields, the layout has {self.width}")
        x = 0
        code = self.code
        for i, v in enumerate(state):
            x |= code(i, v) << self.shift[i]
        return x

    def decode(self, x: int) -> tuple:
        return self.nest([vals[(x >> sh) & m] for vals, sh, m in self._dec])

    def decode_known(self, x: int, known: int) -> tuple:
        """``poisoned(decode(x), known)`` without decoding the fields it poisons (what a recording
        decodes: most fields of a small footprint are never read)."""
        plan = self._plans.get(known)
        if plan is None:
            template = [self.values[i][0] if not self.fmask[i] else self._poisons[i] for i in range(self.width)]
            plan = self._plans[known] = (template, [(i, vals, sh, m) for i, (vals, sh, m) in enumerate(self._dec)
                                                    if self.fmask[i] and known & self.fmask[i]])
        p = plan[0][:]
        for i, vals, sh, m in plan[1]:
            p[i] = vals[(x >> sh) & m]
        return self.nest(p)

    def mask(self, fields: Iterable[int]) -> int:
        out = 0
        for i in fields:
            out |= self.fmask[i]
        return out

    def fields_of(self, mask: int) -> list[int]:
        return [i for i in range(self.width) if mask & self.fmask[i]]

    def writes(self, pairs: Iterable[tuple[int, Any]]) -> tuple[int, int]:
        """``(keep, set)`` of a step that writes ``pairs`` of (field, value): the successor of ``x``
        is ``(x & keep) | set``."""
        clear = 0
        put = 0
        cache = self._writes
        for i, v in pairs:
            k = (i, type(v), v)  # (True and 1 are equal keys of different codes)
            e = cache.get(k)
            if e is None:
                if len(cache) >= MEMO_LIMIT:
                    cache.clear()
                e = cache[k] = (self.fmask[i], self.code(i, v) << self.shift[i])
            clear |= e[0]
            put |= e[1]
        return self.full & ~clear, put

    def poisoned(self, state: tuple, known: int) -> tuple:
        """``state`` with every field outside the mask ``known`` replaced by its poison (a field of
        one value is never poisoned: its value is known)."""
        outside = self._outside.get(known)
        if outside is None:
            outside = self._outside[known] = [i for i in range(self.width) if self.fmask[i] and not known & self.fmask[i]]
        if not outside:
            return state
        p = list(self.flat(state))
        poisons = self._poisons
        for i in outside:
            p[i] = poisons[i]
        return self.nest(p)


class Variants:
    """A layout whose shape depends on the value of one field, its *tag* (a model whose states are a
    disjoint union, ``(role, ...)`` with one shape per role): ``shapes`` maps each tag value to its
    shape, every shape holding the tag field at the same place.  The fields of the shapes not taken
    hold their domains' first values in a packed state."""

    def __init__(self, tag: int, shapes: dict):
        self.tag, self.shapes = tag, dict(shapes)


def _shape_functions(shape: Any, width: int, fillers: Sequence[Any] = ()) -> tuple[Callable, Callable]:
    """``(flat, nest)`` for a nested layout, generated as straight-line code (a state is taken
    apart and built for every recording and every predicate's miss); the identity and ``tuple``
    for a flat one.  With :class:`Variants`, ``nest`` of fields whose tag is not known raises
    :class:`FootprintRead` for the tag (so a section or predicate learns it first)."""
    if shape is None:
        return (lambda s: s), tuple

    def walk(node: Any, path: str, paths: list) -> str:
        if isinstance(node, int):
            paths.append((node, path))
            return f"v[{node}]"
        if not isinstance(node, tuple):
            raise PackingError(f"a layout's shape nests tuples of field indices, not {node!r}")
        inner = ", ".join(walk(child, f"{path}[{k}]", paths) for k, child in enumerate(node))
        return f"({inner},)" if len(node) == 1 else f"({inner})"

    env: dict[str, Any] = {"FootprintRead": FootprintRead, "Poison": Poison, "PackingError": PackingError,
                           "F": list(fillers)}
    if not isinstance(shape, Variants):
        paths: list = []
        built = walk(shape, "s", paths)
        if sorted(i for i, _ in paths) != list(range(width)):
            raise PackingError(f"a layout's shape must name each of its {width} fields once")
        by_field = [p for _i, p in sorted(paths)]
        code = f"def flat(s):\n    return ({', '.join(by_field)},)\n\ndef nest(v):\n    return {built}\n"
    else:
        flat_lines, nest_lines, named, tag_path = ["def flat(s):"], ["def nest(v):", f"    t = v[{shape.tag}]",
                                                                      "    if type(t) is Poison:",
                                                                      f"        raise FootprintRead({shape.tag})"], set(), None
        for k, (value, sub) in enumerate(shape.shapes.items()):
            paths = []
            built = walk(sub, "s", paths)
            where = dict(paths)
            if tag_path is None:
                tag_path = where.get(shape.tag)
                if tag_path is None:
                    raise PackingError("every variant's shape holds its tag field")
                flat_lines.append(f"    t = {tag_path}")
            elif where.get(shape.tag) != tag_path:
                raise PackingError("every variant's shape holds its tag field at the same place")
            env[f"V{k}"] = value
            named |= set(where)
            leaves = ", ".join(where.get(i, f"F[{i}]") for i in range(width))
            flat_lines += [f"    if t == V{k}:", f"        return ({leaves},)"]
            nest_lines += [f"    if t == V{k}:", f"        return {built}"]
        if named != set(range(width)):
            raise PackingError(f"a layout's variants must name each of its {width} fields")
        flat_lines.append("    raise PackingError(f'the layout has no variant of tag {t!r}')")
        nest_lines.append("    raise PackingError(f'the layout has no variant of tag {t!r}')")
        code = "\n".join(flat_lines) + "\n\n" + "\n".join(nest_lines) + "\n"
    exec(compile(code, "<packed layout>", "exec"), env)
    return env["flat"], env["nest"]


def memoised_predicate(codec: Codec, f: Callable[[Any], Any], limit: int = MEMO_LIMIT) -> Callable[[int], bool]:
    """``f`` (a predicate on decoded states) as a predicate on packed states, remembered by the
    fields it reads: one mask for all states, grown (and the memo cleared) when ``f`` reads a field
    outside it."""
    mask = 0
    memo: dict[int, bool] = {}
    decode, poisoned, fmask, full = codec.decode, codec.poisoned, codec.fmask, codec.full

    def miss(x: int) -> bool:
        nonlocal mask
        s = decode(x)
        while True:
            try:
                r = bool(f(poisoned(s, mask)))
            except FootprintRead as e:
                mask |= fmask[e.field]  # (the entries of smaller masks stay right: see Section)
                continue
            except Exception:
                if mask == full:
                    raise
                mask = full  # undecidable on a poisoned state: read everything (always right)
                continue
            break
        if len(memo) >= limit:
            memo.clear()
        memo[x & mask] = r
        return r

    def g(x: int) -> bool:
        r = memo.get(x & mask)
        if r is None:
            r = miss(x)
        return r

    g.memo = memo  # type: ignore[attr-defined]
    g.mask = lambda: mask  # type: ignore[attr-defined]
    return g


class StepChecks:
    """Decides the transition invariants of a recorded step on the poisoned transition (the
    functions every engine evaluates, ``Kind.ALWAYS_STEP``): the label is returned as a
    :class:`CheckedAction` when every applicable check holds, plain when one fails or cannot be
    decided (the engine then evaluates it on the real states).  A check that reads an unknown field
    raises :class:`FootprintRead` (when ``grow``) so that the section learns the field."""

    def __init__(self, props: Sequence[Any], grow: bool = True, limit: int = MEMO_LIMIT):
        self.props = [p for p in props if p.kind is Kind.ALWAYS_STEP]
        self.grow = grow
        self.limit = limit
        self._by_action: dict[str, list] = {}
        #: per step ``(label class, repr(action), repr(observation), keep, set)``: the fields its
        #: checks and witnesses were seen to read, its memo (``state & reads`` -> the label's
        #: class, None for the plain action) and the checks that apply to it (:meth:`label_class_at`)
        self._reads: dict[tuple, list] = {}
        self.kept = 0  # entries in all the steps' memos
        self.evaluations = 0  # label evaluations :meth:`label_class_at` ran (a memo hit costs none)

    def label(self, p: tuple, a: tuple, o: Any, t: tuple) -> tuple:
        name = a[0]
        ps = self._by_action.get(name)
        if ps is None:
            ps = self._by_action[name] = [q for q in self.props if q.applies_to(name)]
        maybe = []
        for q in ps:
            try:
                if not bool(q.check(p, a, o, t)):
                    return a
            except FootprintRead:
                if self.grow:
                    raise
                return a
            except Exception:
                return a
            try:
                fired = bool(q.witness(p, a, o, t))
            except (FootprintRead, Exception):
                fired = True
            if fired:
                maybe.append(q.name)
        return CheckedAction.subclass(frozenset(maybe))(a)

    def label_class_at(self, codec: Codec, x: int, known: int, a: tuple, o: Any, keep: int, put: int,
                       step: tuple) -> Any:
        """The class of :meth:`label`'s label (None: ``a`` itself, not checked; else the
        :class:`CheckedAction` class, so a recording keeps one step object per class) for the step
        ``(keep, put)`` of action ``a`` and observation ``o`` from packed state ``x``, on the transition poisoned outside the fields ``known`` (``step``: the step's
        identity, ``(class, repr(a), repr(o), keep, put)``): the same label, remembered per step by
        the fields its checks and witnesses read.

        Why: a section is recorded once per footprint, and its footprint is wider than what any one
        step's checks read (the union over its root of every field read by the model and by every
        step's checks), so most recordings evaluated checks already decided on another footprint
        (measured on the consumer-lists reference: 15,346 evaluations, 2,482 distinct outcomes).
        The checks are run on the transition decoded from ``x`` with only the fields ``reads``
        known (within ``known``; a read of another known field adds it and runs them again), so
        the verdict holds for every state that agrees with ``x`` on ``reads``, and is kept under
        ``x & reads`` (an entry of a smaller mask stays right, as a section's do).  A read of a field
        outside ``known`` is what :meth:`label` does (a check's: FootprintRead for the section when
        ``grow``, else plain, a verdict not kept: it holds only while that field is unknown; a
        witness's: may fire, a verdict kept, since a ``maybe`` only sends the witness to the engine,
        which evaluates it on the real transition: measured on the consumer-lists reference, 15,845
        evaluations when it was not kept, 5,938 kept); any other exception decides on the transition
        poisoned outside ``known``, by :meth:`label`, as a recording did before."""
        mine = self._reads.get(step)
        if mine is None:
            name = a[0]
            ps = self._by_action.get(name)
            if ps is None:
                ps = self._by_action[name] = [q for q in self.props if q.applies_to(name)]
            mine = self._reads[step] = [0, {}, ps]
        reads, memo, ps = mine
        if not ps:
            return CheckedAction
        if not reads & ~known:
            cls = memo.get(x & reads, _ABSENT)
            if cls is not _ABSENT:
                return cls
        fmask = codec.fmask
        m = reads & known
        y = (x & keep) | put
        written = codec.full & ~keep
        while True:
            self.evaluations += 1
            unknown = 0  # fields outside ``known`` the evaluation met (its verdict is then not kept)
            maybe = []
            cls: Any = None
            try:
                pp = codec.decode_known(x, m)
                tt = codec.decode_known(y, m | written)
                for q in ps:
                    try:
                        if not bool(q.check(pp, a, o, tt)):
                            break
                    except FootprintRead as e:
                        if fmask[e.field] & known:
                            raise
                        unknown |= fmask[e.field]
                        if self.grow:
                            mine[0] = reads | unknown
                            raise
                        break
                    try:
                        fired = bool(q.witness(pp, a, o, tt))
                    except FootprintRead as e:
                        if fmask[e.field] & known:
                            raise
                        # a witness that reads a field not known may fire: named in the label's
                        # ``maybe`` (the engine evaluates it on the real transition until it has
                        # fired once), a verdict that holds for every state with this key, so kept
                        fired = True
                    if fired:
                        maybe.append(q.name)
                else:
                    cls = CheckedAction.subclass(frozenset(maybe))
            except FootprintRead as e:
                if fmask[e.field] & known and not m & fmask[e.field]:
                    m |= fmask[e.field]
                    reads |= fmask[e.field]
                    continue
                raise
            except Exception:  # (not decided on the fields read so far: decide on the whole, keep nothing)
                mine[0] = reads
                got = self.label(codec.decode_known(x, known), a, o, codec.decode_known(y, known | written))
                return None if got is a else got.__class__
            break
        mine[0] = reads | unknown
        if not unknown:
            if self.kept >= self.limit:  # (a bound on memory, as a section's memo has)
                for other in self._reads.values():
                    other[1].clear()
                self.kept = 0
            memo[x & m] = cls
            self.kept += 1
        return cls


#: a memo's "no entry" (None is a value there)
_ABSENT = object()


class Section:
    """One part of a packed model's successor function, memoised on the fields it reads.

    ``run(state, out)`` is the model's readable code: it appends ``(action, observation, next)``
    to ``out`` and returns whether one of them is owed (the system must take it: no stuttering).
    ``root``: fields the section always reads first.  Per root value, ``masks`` holds the fields
    the section was found to read (grown when a run reads one more); ``memo`` maps ``state & mask``
    to ``(steps, owed)``.  An entry stays right when its root's mask grows later: it was recorded
    reading only the fields of the smaller mask, and a state whose key under the larger mask
    equals it agrees with the recorded state on those fields (so nothing is ever invalidated, and
    the keys of different roots differ in the root's bits)."""

    def __init__(self, codec: Codec, run: Callable[[tuple, list], Any], root: Iterable[int], checks: StepChecks,
                 name: str = "", limit: int = MEMO_LIMIT):
        self.codec = codec
        self.run = run
        self.root = codec.mask(root)
        self.checks = checks
        self.name = name
        self.limit = limit
        self.masks: dict[int, int] = {}
        self.memo: dict[int, tuple] = {}
        #: per root value, the fields the model's own code was found to read (within ``masks``),
        #: and its outcomes by them (see :meth:`miss`)
        self.model_masks: dict[int, int] = {}
        self.outcomes: dict[int, tuple] = {}
        self._steps: dict = {}  # one object per distinct recorded step
        self._bare: dict = {}  # one object per distinct unlabelled step (outcomes)
        self._lists: dict = {}  # one object per distinct (steps, owed) (_shared)
        self.runs = 0  # runs of the model's code (an outcome not known costs one, plus one per field learnt)
        #: explorer workers (engines/parallel.py) share recordings: while ``journal`` is a list,
        #: every entry recorded here is also appended to it (``(root, mask, key, entry, fresh)``,
        #: ``fresh`` the model's outcome recorded for it, ``(model mask, key, outcome)``, or None;
        #: :meth:`export` makes them portable)
        self.journal: list | None = None

    def lookup(self, x: int) -> tuple:
        """``(steps, owed)`` of packed state ``x`` (what the generated successor function inlines)."""
        mask = self.masks.get(x & self.root)
        e = None if mask is None else self.memo.get(x & mask)
        return e if e is not None else self.miss(x)

    def miss(self, x: int) -> tuple:
        """Record the section on packed state ``x``.

        In two parts: the model's own code (:meth:`_outcome`, its steps before they are labelled)
        and the step checks' labels (:meth:`StepChecks.label_class_at`).  The checks read fields the
        model's code does not (measured on the consumer-lists reference: a footprint of 12,732
        entries where the model's code alone reads 5,237), and a footprint is keyed by both; so the
        outcome of the model's code is remembered by the fields *it* read (``outcomes``, keyed by
        ``state & model_masks[root]``), and a recording whose outcome is already there runs only
        the checks (what a check learns does not run the model again either).  The entry, the mask
        and the labels are those of one run of both on the poisoned state: the model's code is
        deterministic in the fields it reads, and those are known in both."""
        codec = self.codec
        r = x & self.root
        known = self.masks.get(r, self.root)
        mk = self.model_masks.get(r, self.root)  # (always within known)
        fresh = None  # the outcome recorded here, for the journal
        while True:
            o = self.outcomes.get(x & mk)
            if o is None:
                o, mk = self._outcome(x, mk)
                known |= mk
                fresh = (mk, x & mk, o)
            try:
                steps = tuple(self._label(x, known, step) for step in o[0])
            except FootprintRead as e:  # a check read a field not known: learn it
                known |= codec.fmask[e.field]
                continue
            break
        self.masks[r] = known
        self.model_masks[r] = mk
        if len(self.memo) >= self.limit:
            self.memo.clear()
        e = self._shared((steps, o[1]))
        self.memo[x & known] = e
        if self.journal is not None:
            self.journal.append((r, known, x & known, e, fresh))
        return e

    def _outcome(self, x: int, mk: int) -> tuple:
        """Run the model's code on ``x`` knowing the fields ``mk`` and those it reads: ``((steps,
        owed), mask)``, the steps unlabelled (:meth:`_step`), remembered under ``x & mask``."""
        codec = self.codec
        while True:
            out: list = []
            self.runs += 1
            try:
                p = codec.decode_known(x, mk)  # (a layout with variants may need its tag first)
                owed = bool(self.run(p, out))
                steps = tuple(self._step(p, a, o, t) for a, o, t in out)
            except FootprintRead as e:
                mk |= codec.fmask[e.field]
                continue
            except PackingError:
                raise
            except Exception:
                if mk == codec.full:
                    raise
                mk = codec.full
                continue
            break
        if len(self.outcomes) >= self.limit:
            self.outcomes.clear()
        o = self.outcomes[x & mk] = self._shared((steps, owed))
        return o, mk

    def _shared(self, e: tuple) -> tuple:
        """One object per distinct ``(steps, owed)`` (an entry or an outcome): far fewer distinct
        ones than keys (the consumer-lists ``--big`` configuration: 375,385 entries, 939 distinct
        lists of steps), so memory.  A step object in one is kept alive by it, so its id names it."""
        k = (tuple(map(id, e[0])), e[1])
        found = self._lists.get(k)
        if found is None:
            if len(self._lists) >= self.limit:
                self._lists.clear()
            found = self._lists[k] = e
        return found

    def export(self, items: list) -> list:
        """Journal items in a form another process can take (:meth:`install`): a label's
        CheckedAction class travels as its ``maybe`` set (a CheckedAction pickles as a plain tuple)."""
        def portable(a: tuple) -> tuple:
            return (tuple(a), a.__class__.maybe if isinstance(a, CheckedAction) else None)

        def outcome(fresh: tuple | None) -> tuple | None:  # its steps as (action, observation, keep, set)
            if fresh is None:
                return None
            mk, okey, (steps, owed) = fresh
            return (mk, okey, tuple(step[:4] for step in steps), owed)

        return [(r, mask, key, tuple((*portable(a), o, k, v) for a, o, k, v in steps), owed, outcome(fresh))
                for r, mask, key, (steps, owed), fresh in items]

    def install(self, items: list) -> None:
        """Take entries another process recorded (:meth:`export`).  The root's mask becomes the
        union of its own and the entry's: a look-up must read at least every field any stored entry
        of that root was recorded with (see the class's note on masks)."""
        for r, mask, key, steps, owed, fresh in items:
            self.masks[r] = self.masks.get(r, mask) | mask
            if fresh is not None:  # the model's outcome recorded with the entry (see miss)
                mk, okey, bare, bare_owed = fresh
                self.model_masks[r] = self.model_masks.get(r, mk) | mk
                if okey not in self.outcomes:
                    if len(self.outcomes) >= self.limit:
                        self.outcomes.clear()
                    self.outcomes[okey] = self._shared((tuple(self._bare_step(*step) for step in bare), bare_owed))
            if key in self.memo:
                continue
            rebuilt = []
            for a, maybe, o, k, v in steps:
                label = a if maybe is None else CheckedAction.subclass(maybe)(a)
                sk = (label.__class__, repr(label), repr(o), k, v)
                found = self._steps.get(sk)
                if found is None:
                    found = self._steps[sk] = (label, o, k, v)
                rebuilt.append(found)
            if len(self.memo) >= self.limit:
                self.memo.clear()
            self.memo[key] = self._shared((tuple(rebuilt), owed))

    def _step(self, p: tuple, a: tuple, o: Any, t: tuple) -> tuple:
        """One step the model's code returned, unlabelled: ``(a, o, keep, set, repr(a), repr(o),
        identity, labelled)`` (one object per distinct step; ``labelled``: see :meth:`_label`)."""
        pois = _poison_in(a) or _poison_in(o)
        if pois is not None:  # a field's value copied into the label: it was read
            raise FootprintRead(pois.field)
        flat = self.codec.flat
        tf, pf = flat(t), flat(p)
        writes = [(i, tf[i]) for i in compress(range(len(tf)), map(is_not, tf, pf))]
        for _i, v in writes:
            if type(v) is Poison:  # copied from another field: that field was read
                raise FootprintRead(v.field)
        keep, put = self.codec.writes(writes)
        return self._bare_step(a, o, keep, put)

    def _bare_step(self, a: tuple, o: Any, keep: int, put: int) -> tuple:
        ra, ro = repr(a), repr(o)
        ident = (a.__class__, ra, ro, keep, put)
        found = self._bare.get(ident)
        if found is None:
            if len(self._bare) >= self.limit:
                self._bare.clear()
            found = self._bare[ident] = (a, o, keep, put, ra, ro, ident, {})
        return found

    def _label(self, x: int, known: int, step: tuple) -> tuple:
        """The recorded step ``(label, observation, keep, set)`` of an unlabelled one (one object per
        distinct step; the unlabelled step keeps its labelled ones by the label's class)."""
        a, o, keep, put, ra, ro, ident, labelled = step
        cls = self.checks.label_class_at(self.codec, x, known, a, o, keep, put, ident)
        found = labelled.get(cls)
        if found is None:
            a = a if cls is None else cls(a)
            key = (a.__class__, ra, ro, keep, put)
            found = self._steps.get(key)
            if found is None:
                if len(self._steps) >= self.limit:
                    self._steps.clear()
                found = self._steps[key] = (a, o, keep, put)
            labelled[cls] = found
        return found

    def entries(self) -> int:
        return len(self.memo)

    def recorded_steps(self) -> list[tuple]:
        """Every recorded step ``(action, observation, keep, set)`` (tests)."""
        return [step for steps, _ in self.memo.values() for step in steps]


class Packed:
    """A model's packed view: its codec, packed initial states and the successor function over
    packed states, as the sections' recorded steps in the model's own order.

    ``fair_sections`` run first and say whether a step is owed; then ``other_sections`` (the
    environment); when nothing is owed the model may stutter: ``idle`` (a label) is appended with
    the state unchanged, as the model's readable successor function does."""

    def __init__(self, codec: Codec, init_states: Sequence[tuple], fair_sections: Sequence[Section],
                 other_sections: Sequence[Section], idle: tuple | None):
        self.codec = codec
        self.inits = [codec.encode(s) for s in init_states]
        self.sections = list(fair_sections) + list(other_sections)
        self.nfair = len(fair_sections)  # the first nfair sections say whether a step is owed
        self.idle_step = (idle, None, codec.full, 0) if idle is not None else None
        self.expand = self._make_expand(list(fair_sections), list(other_sections))

    def _make_expand(self, fair: list[Section], other: list[Section]) -> Callable[[int], list]:
        """The successor function, generated: one straight block per section (its
        :meth:`Section.lookup` inlined, its masks and dictionaries bound as constants; a loop over
        the sections cost about twice as much per state, measured on the consumer-lists reference:
        tuple unpacking, attribute look-ups and calls).  A root seen for the first time raises
        KeyError (a zero-cost ``try`` otherwise)."""
        env: dict[str, Any] = {"IDLE": self.idle_step}
        lines = ["def expand(x):"]
        secs = fair + other
        for n, sec in enumerate(secs):
            env[f"R{n}"], env[f"K{n}"], env[f"D{n}"], env[f"M{n}"] = sec.root, sec.masks, sec.memo, sec.miss
            lines += [
                "    try:",
                f"        e{n} = D{n}.get(x & K{n}[x & R{n}]) or M{n}(x)",
                "    except KeyError:",
                f"        e{n} = M{n}(x)",
            ]
        lines.append("    out = [" + ", ".join(f"*e{n}[0]" for n in range(len(secs))) + "]")
        if self.idle_step is not None:
            owed = " or ".join(f"e{n}[1]" for n in range(len(fair))) or "False"
            lines.append(f"    if not ({owed}): out.append(IDLE)")
        lines.append("    return out")
        exec(compile("\n".join(lines), f"<packed expand of {len(secs)} sections>", "exec"), env)
        expand = env["expand"]
        expand.__doc__ = ("The recorded steps ``(action, observation, keep, set)`` of packed state ``x``, in the "
                          "model's successor order: the successor of a step is ``(x & keep) | set``.")
        return expand

    def successors(self, x: int) -> list:
        """``(action, observation, next packed state)`` of ``x`` (fingerprint mode, workers, tests)."""
        return [(a, o, (x & k) | v) for a, o, k, v in self.expand(x)]

    def stats(self) -> dict[str, Any]:
        return {sec.name: {"roots": len(sec.masks), "entries": sec.entries(), "runs": sec.runs} for sec in self.sections}


_M64 = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15


def _mix64(h: int) -> int:
    """SplitMix64's finaliser: a bijection on 64-bit values that spreads every input bit."""
    h ^= h >> 30
    h = (h * 0xBF58476D1CE4E5B9) & _M64
    h ^= h >> 27
    h = (h * 0x94D049BB133111EB) & _M64
    return h ^ (h >> 31)


def fingerprint64(x: int) -> int:
    """A stable 64-bit fingerprint of a packed state (arithmetic only: the same in every process,
    unlike ``hash()``).  A packing of at most 64 bits is mixed by a bijection, so it has no
    fingerprint collision at all; a wider one (the consumer-lists reference packs into 72 bits) is
    folded word by word, each word mixed into the next, so structured states do not collide
    systematically.  The low bits are well spread for partitioning by ``fingerprint % workers``."""
    h = _mix64((x + _GAMMA) & _M64)  # SplitMix64's step: the golden-ratio increment, then the finaliser
    x >>= 64
    while x:
        h = _mix64(((h ^ x) + _GAMMA) & _M64)
        x >>= 64
    return h


class DecodedStates:
    """A read-only sequence of states stored packed (``ints``), decoded on access: what an
    :class:`~conq.model.engines.results.Exploration` of a packed search holds as its
    ``state_list``.  ``predicate(f)`` evaluates ``f`` on every state through the memo of
    :func:`memoised_predicate` (liveness: goals and triggers on the whole graph)."""

    def __init__(self, codec: Codec, ints: Sequence[int]):
        self.codec = codec
        self.ints = ints

    def __len__(self) -> int:
        return len(self.ints)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self.codec.decode(x) for x in self.ints[i]]
        return self.codec.decode(self.ints[i])

    def __iter__(self):
        decode = self.codec.decode
        return (decode(x) for x in self.ints)

    def __bool__(self) -> bool:
        return len(self.ints) > 0

    def predicate_values(self, f: Callable[[Any], Any]) -> Iterable[bool]:
        g = memoised_predicate(self.codec, f)
        return (g(x) for x in self.ints)
