"""Mutation operators over a model package's step code (issue 31): where a rule can be changed, and how.

A *mutant* is one small change to the source of one step function of a model: the kind of slip a
person makes when writing or porting a rule.  The operators (after mutmut and Stryker for code,
and Chockler, Kupferman and Vardi's coverage for model checking: a part of the design whose
mutation no property notices is not covered):

* ``drop-conjunct`` / ``drop-disjunct``: one operand of an ``and`` / ``or`` is left out;
* ``negate-condition``: the test of an ``if``, a conditional expression or a comprehension filter is
  negated (``not`` added, or a leading ``not`` removed);
* ``change-comparison``: one comparison operator moves to its neighbour (``<`` and ``<=``, ``>`` and
  ``>=``, ``==`` and ``!=``, ``in`` and ``not in``, ``is`` and ``is not``);
* ``change-bound``: an integer constant compared with is moved by one, up and down;
* ``drop-update``: a statement that writes (an assignment to an element, or to a name or attribute
  bound before, an augmented assignment, a call made for its effect) is removed; so is one
  field update of the tuple-style models (``_set(t, i, v)`` becomes ``t``; one keyword of
  ``_put(s, f=v, ...)`` is left out);
* ``duplicate-update``: such a statement runs twice (only where running it twice can differ: an
  augmented assignment, a call, an assignment that reads its own target);
* ``swap-updates``: two adjacent such statements of one block change places (only where the order
  can matter: one of them is a call, or one reads or writes what the other writes).

The *step code* of a package is every function of its step files reachable from the state
machine's entry points (``__init__``, ``init_states``, ``actions``, ``step``, ``successors``) by name:
a function only the claims, the views or the symmetry reduction use is not a rule of behaviour.
Each mutant has a stable id (a hash of its file, function, operator and the text it changes, not
of its line), so a written argument in a spec page keeps naming it when lines move.
"""

from __future__ import annotations

import ast
import copy
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

#: the kernel's state-machine entry points (conq.model.kernel.Model): step code is what they reach
ENTRY_POINTS = ("__init__", "init_states", "actions", "step", "successors", "spec_successors")

#: files of a model package that are not step code: the vocabulary and configuration record, the
#: claims, the named configurations, the symbolic encoding, and the explorer's speed views (which
#: call the model's own step functions: mutating those mutates what the views run)
NON_STEP_FILES = frozenset({"__init__.py", "state.py", "properties.py", "configs.py", "z3_encoding.py",
                            "fast.py", "packed.py"})

OPERATORS = ("drop-conjunct", "drop-disjunct", "negate-condition", "change-comparison", "change-bound",
             "drop-update", "duplicate-update", "swap-updates")

_CMP_NEIGHBOUR = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}

#: the tuple-style models' field updates (model/ordered_consumption/state.py, model/recovery_deferral):
#: ``_set(t, i, v)`` is t with field i set to v; ``_put(s, f=v, ...)`` s with the named fields replaced
_SET_CALLS = frozenset({"_set"})
_PUT_CALLS = frozenset({"_put"})


@dataclass(frozen=True)
class Mutant:
    """One change to one step function.  ``path`` leads from the module to the node changed (a
    sequence of ``(field, index)``, index None for a single node); ``action`` and ``arg`` say how
    (:func:`apply`)."""

    file: str  # the file's path as shown (relative to the project root)
    name: str  # the file's name in its package (what the loader overrides)
    line: int
    end_line: int
    function: str  # qualified name of the step function
    operator: str  # one of OPERATORS
    detail: str  # readable: what was changed
    key: str  # stable identity (file, function, operator, text before and after, occurrence)
    path: tuple
    action: str
    arg: Any = None
    #: lines whose execution the change needs to make any difference (coverage: a mutant none of
    #: whose lines runs on a configuration gives that configuration's graph unchanged)
    lines: tuple = field(default=(), compare=False)

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"

    def ident(self, prefix: str) -> str:
        return f"{prefix}-{hashlib.sha1(self.key.encode()).hexdigest()[:8]}"


# -- which functions are step code ----------------------------------------------------------------

def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef]]:
    """Every top-level function and method (one class level) with its qualified name."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{sub.name}", sub


def _names_used(node: ast.AST, strings: bool = False) -> tuple[set[str], set[str]]:
    """(attribute names, bare names) a piece of code may reach functions by: a method through an
    attribute (``self._pull_find``), a module function through its name (``_put``); with
    ``strings``, string constants count as attribute names too (a class's dispatch table names its
    methods as strings: ``{"receive": "_receive"}``)."""
    attrs, names = set(), set()
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute):
            attrs.add(n.attr)
        elif isinstance(n, ast.Name):
            names.add(n.id)
        elif strings and isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier():
            attrs.add(n.value)
    return attrs, names


def step_functions(trees: dict[str, ast.Module]) -> set[tuple[str, str]]:
    """``(file name, qualified name)`` of every function reachable from :data:`ENTRY_POINTS`: methods
    by the attribute names the reachable code uses (and the method names its class's tables hold),
    module functions by the bare names it uses."""
    methods: dict[str, list[tuple[str, str, ast.AST]]] = {}
    functions: dict[str, list[tuple[str, str, ast.AST]]] = {}
    tables: dict[str, set[str]] = {}
    for fname, tree in trees.items():
        for qual, fn in _functions(tree):
            (methods if "." in qual else functions).setdefault(fn.name, []).append((fname, qual, fn))
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                table: set[str] = set()
                for sub in node.body:
                    if not isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        table |= _names_used(sub, strings=True)[0]
                tables[node.name] = table
    reached: set[tuple[str, str]] = set()
    todo = [("m", n) for n in ENTRY_POINTS]
    seen: set[tuple[str, str]] = set()
    while todo:
        item = todo.pop()
        if item in seen:
            continue
        seen.add(item)
        kind, name = item
        for fname, qual, fn in (methods if kind == "m" else functions).get(name, ()):
            reached.add((fname, qual))
            attrs, names = _names_used(fn)
            if "." in qual:
                attrs |= tables.get(qual.partition(".")[0], set())
            todo += [("m", a) for a in attrs if a in methods] + [("f", x) for x in names if x in functions]
    return reached


# -- enumeration ------------------------------------------------------------------------------------

def _get(tree: ast.AST, path: tuple) -> Any:
    node: Any = tree
    for fld, idx in path:
        node = getattr(node, fld)
        if idx is not None:
            node = node[idx]
    return node


def _text(node: ast.AST, limit: int = 0) -> str:
    s = ast.unparse(node)
    s = " ".join(s.split())
    if limit and len(s) > limit:
        s = s[: limit - 3] + "..."
    return s


def _span(node: ast.AST) -> tuple[int, ...]:
    return tuple(range(node.lineno, (node.end_lineno or node.lineno) + 1))


def _targets(stmt: ast.stmt) -> list[ast.AST]:
    if isinstance(stmt, ast.Assign):
        return list(stmt.targets)
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        return [stmt.target]
    return []


class _Enumerator:
    def __init__(self, file: str, name: str, tree: ast.Module, steps: set[str]):
        self.file, self.name, self.tree, self.steps = file, name, tree, steps
        self.out: list[Mutant] = []
        self.counts: dict[str, int] = {}

    # a mutant, with a key unique within the file
    def add(self, qual, operator, node, before, after, path, action, arg=None, lines=None, detail=None):
        base = f"{self.file}|{qual}|{operator}|{before}|{after}"
        k = self.counts.get(base, 0)
        self.counts[base] = k + 1
        self.out.append(Mutant(
            file=self.file, name=self.name, line=node.lineno, end_line=node.end_lineno or node.lineno,
            function=qual, operator=operator,
            detail=detail or f"`{_text_short(before)}` -> `{_text_short(after)}`",
            key=f"{base}|{k}", path=path, action=action, arg=arg, lines=lines or _span(node)))

    def run(self) -> list[Mutant]:
        for i, node in enumerate(self.tree.body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name in self.steps:
                    self.function(node, node.name, (("body", i),))
            elif isinstance(node, ast.ClassDef):
                for j, sub in enumerate(node.body):
                    qual = f"{node.name}.{getattr(sub, 'name', '')}"
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and qual in self.steps:
                        self.function(sub, qual, (("body", i), ("body", j)))
        return self.out

    def function(self, fn: ast.FunctionDef, qual: str, path: tuple) -> None:
        bound = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
        if fn.args.vararg:
            bound.add(fn.args.vararg.arg)
        self.block(fn.body, qual, path + (("body", None),), bound)

    def block(self, body: list, qual: str, path: tuple, bound: set[str]) -> None:
        """Statement operators on one block, then everything inside its statements."""
        updates = []
        for i, stmt in enumerate(body):
            is_update = self.is_update(stmt, bound)
            updates.append(is_update)
            spath = path[:-1] + ((path[-1][0], i),)
            if is_update:
                text = _text(stmt)
                self.add(qual, "drop-update", stmt, text, "pass", path, "drop-stmt", i,
                         detail=f"drop `{_text_short(text)}`")
                if self.repeat_differs(stmt):
                    self.add(qual, "duplicate-update", stmt, text, text + "; " + text, path, "dup-stmt", i,
                             detail=f"duplicate `{_text_short(text)}`")
            # names and attributes bound by this statement (for later rebinding assignments)
            for t in _targets(stmt):
                if isinstance(t, ast.Attribute):
                    bound.add(_text(t))
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        bound.add(n.id)
            if isinstance(stmt, (ast.For, ast.AsyncFor)):
                for n in ast.walk(stmt.target):
                    if isinstance(n, ast.Name):
                        bound.add(n.id)
            self.statement(stmt, qual, spath, bound)
        for i in range(len(body) - 1):
            a, b = body[i], body[i + 1]
            if updates[i] and updates[i + 1] and self.order_matters(a, b):
                ta, tb = _text(a), _text(b)
                self.add(qual, "swap-updates", a, f"{ta}; {tb}", f"{tb}; {ta}", path, "swap-stmt", i,
                         lines=_span(a) + _span(b), detail=f"swap `{_text_short(ta)}` and `{_text_short(tb)}`")

    @staticmethod
    def is_update(stmt: ast.stmt, bound: set[str]) -> bool:
        if isinstance(stmt, ast.Expr):
            return isinstance(stmt.value, ast.Call)
        if isinstance(stmt, ast.AugAssign):
            return True
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            if isinstance(stmt, ast.AnnAssign) and stmt.value is None:
                return False
            for t in _targets(stmt):
                if isinstance(t, ast.Subscript):
                    return True
                if isinstance(t, ast.Name) and t.id in bound:
                    return True  # a rebinding: dropping it keeps the earlier value
                if isinstance(t, ast.Attribute) and _text(t) in bound:
                    return True  # (the first assignment of an attribute defines it: dropping it only raises)
            return False
        return False

    @staticmethod
    def repeat_differs(stmt: ast.stmt) -> bool:
        if isinstance(stmt, (ast.Expr, ast.AugAssign)):
            return True
        if isinstance(stmt, ast.Assign):
            value = _text(stmt.value)
            return any(_text(t) in value for t in stmt.targets)
        return False

    @staticmethod
    def order_matters(a: ast.stmt, b: ast.stmt) -> bool:
        if isinstance(a, ast.Expr) or isinstance(b, ast.Expr):
            return True
        ta = [_text(t) for t in _targets(a)]
        tb = [_text(t) for t in _targets(b)]
        sa, sb = _text(a), _text(b)
        return any(x == y for x in ta for y in tb) or any(x in sb for x in ta) or any(y in sa for y in tb)

    def statement(self, stmt: ast.stmt, qual: str, path: tuple, bound: set[str]) -> None:
        """Expression operators inside one statement, and the blocks it holds."""
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner = set(bound) | {a.arg for a in stmt.args.args + stmt.args.kwonlyargs}
            self.block(stmt.body, f"{qual}.{stmt.name}", path + (("body", None),), inner)
            return
        if isinstance(stmt, ast.ClassDef):
            return
        for fld, value in ast.iter_fields(stmt):
            if isinstance(value, list) and value and all(isinstance(v, ast.stmt) for v in value):
                self.block(value, qual, path + ((fld, None),), bound)
            elif isinstance(value, list):
                for i, v in enumerate(value):
                    if isinstance(v, ast.AST):
                        self.expr(v, qual, path + ((fld, i),), stmt, fld)
            elif isinstance(value, ast.AST):
                self.expr(value, qual, path + ((fld, None),), stmt, fld)

    def expr(self, node: ast.AST, qual: str, path: tuple, parent: ast.AST, fld: str) -> None:
        if isinstance(node, ast.excepthandler):
            self.block(node.body, qual, path + (("body", None),), set())
            return
        if isinstance(node, ast.Lambda):
            self.expr(node.body, f"{qual}.<lambda>", path + (("body", None),), node, "body")
            return
        # the test of an if / while / conditional expression / comprehension filter: negated
        if (isinstance(parent, (ast.If, ast.While, ast.IfExp, ast.Assert)) and fld == "test") or \
                (isinstance(parent, ast.comprehension) and fld == "ifs"):
            if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                after = _text(node.operand)
            else:
                after = f"not ({_text(node)})"
            self.add(qual, "negate-condition", node, _text(node), after, path, "negate")
        if isinstance(node, ast.BoolOp):
            op = "drop-conjunct" if isinstance(node.op, ast.And) else "drop-disjunct"
            whole = _text(node)
            for i, v in enumerate(node.values):
                rest = [x for j, x in enumerate(node.values) if j != i]
                after = _text(rest[0]) if len(rest) == 1 else _text(ast.BoolOp(op=node.op, values=rest))
                self.add(qual, op, v, whole, after, path, "drop-operand", i,
                         lines=_span(node), detail=f"drop `{_text_short(_text(v))}` from `{_text_short(whole, 90)}`")
        if isinstance(node, ast.Compare):
            whole = _text(node)
            for i, op in enumerate(node.ops):
                new = _CMP_NEIGHBOUR.get(type(op))
                if new is not None:
                    changed = ast.Compare(left=node.left, ops=[new() if j == i else o for j, o in enumerate(node.ops)],
                                          comparators=node.comparators)
                    self.add(qual, "change-comparison", node, whole, _text(changed), path, "cmpop", (i, new.__name__))
            for k, operand in enumerate([node.left] + list(node.comparators)):
                if isinstance(operand, ast.Constant) and type(operand.value) is int:
                    for delta in (1, -1):
                        changed = ast.Compare(
                            left=ast.Constant(operand.value + delta) if k == 0 else node.left, ops=node.ops,
                            comparators=[ast.Constant(c.value + delta) if j + 1 == k else c
                                         for j, c in enumerate(node.comparators)])
                        self.add(qual, "change-bound", node, whole, _text(changed), path, "const", (k, delta))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in _SET_CALLS and len(node.args) == 3 and not node.keywords:
                self.add(qual, "drop-update", node, _text(node), _text(node.args[0]), path, "unset",
                         detail=f"drop the field update `{_text_short(_text(node))}`")
            if node.func.id in _PUT_CALLS and node.keywords:
                for j, kw in enumerate(node.keywords):
                    rest = [k for i, k in enumerate(node.keywords) if i != j]
                    after = _text(ast.Call(func=node.func, args=node.args, keywords=rest)) if rest else _text(node.args[0])
                    self.add(qual, "drop-update", node, _text(node), after, path, "drop-kw", j,
                             detail=f"drop the field update `{kw.arg}=` of `{_text_short(_text(node))}`")
        for f2, value in ast.iter_fields(node):
            if isinstance(value, list):
                for i, v in enumerate(value):
                    if isinstance(v, ast.AST):
                        self.expr(v, qual, path + ((f2, i),), node, f2)
            elif isinstance(value, ast.AST) and not isinstance(value, (ast.expr_context, ast.operator, ast.cmpop,
                                                                       ast.boolop, ast.unaryop)):
                self.expr(value, qual, path + ((f2, None),), node, f2)


def _text_short(s: str, limit: int = 70) -> str:
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def package_sources(package_dir: Path) -> dict[str, str]:
    """The text of every module of a (flat) model package: one snapshot that a run's enumeration,
    its model and its mutants are all made from (a file edited during a run changes none of them)."""
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(Path(package_dir).glob("*.py"))}


def enumerate_mutants(package_dir: Path, shown_root: Path | None = None,
                      sources: dict[str, str] | None = None) -> list[Mutant]:
    """Every mutant of the step code of the model package in ``package_dir`` (its files as they are
    now, or as ``sources`` holds them), in file and source order.  ``shown_root``: what a mutant's
    file path is shown relative to (default: the package's grandparent, the project root of
    ``model/<system>/``)."""
    package_dir = Path(package_dir)
    root = shown_root or package_dir.parent.parent
    sources = sources if sources is not None else package_sources(package_dir)
    trees = {}
    for name, text in sources.items():
        if name not in NON_STEP_FILES:
            trees[name] = ast.parse(text, filename=str(package_dir / name))
    steps = step_functions(trees)
    out = []
    for fname, tree in trees.items():
        try:
            shown = str((package_dir / fname).resolve().relative_to(Path(root).resolve()))
        except ValueError:
            shown = str(package_dir / fname)
        out += _Enumerator(shown, fname, tree, {q for f, q in steps if f == fname}).run()
    return out


def apply(tree: ast.Module, mutant: Mutant) -> ast.Module:
    """Change ``tree`` (a fresh parse of the mutant's file) as ``mutant`` says; returns it."""
    *lead, (fld, idx) = mutant.path
    parent = _get(tree, tuple(lead))
    act, arg = mutant.action, mutant.arg
    if act in ("drop-stmt", "dup-stmt", "swap-stmt"):
        body = getattr(parent, fld)
        if act == "drop-stmt":
            body[arg] = ast.copy_location(ast.Pass(), body[arg])
        elif act == "dup-stmt":
            body.insert(arg + 1, _copy(body[arg]))
        else:
            body[arg], body[arg + 1] = body[arg + 1], body[arg]
        return ast.fix_missing_locations(tree)
    node = getattr(parent, fld) if idx is None else getattr(parent, fld)[idx]
    if act == "negate":
        new = node.operand if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) else \
            ast.UnaryOp(op=ast.Not(), operand=node)
    elif act == "drop-operand":
        rest = [v for j, v in enumerate(node.values) if j != arg]
        new = rest[0] if len(rest) == 1 else ast.BoolOp(op=node.op, values=rest)
    elif act == "cmpop":
        i, opname = arg
        node.ops[i] = getattr(ast, opname)()
        new = node
    elif act == "const":
        k, delta = arg
        operand = node.left if k == 0 else node.comparators[k - 1]
        operand.value += delta
        new = node
    elif act == "unset":
        new = node.args[0]
    elif act == "drop-kw":
        node.keywords.pop(arg)
        new = node if node.keywords else node.args[0]
    else:  # pragma: no cover - an action enumerate_mutants never makes
        raise ValueError(f"unknown mutation action {act!r}")
    ast.copy_location(new, node)
    if idx is None:
        setattr(parent, fld, new)
    else:
        getattr(parent, fld)[idx] = new
    return ast.fix_missing_locations(tree)


def _copy(node: ast.AST) -> ast.AST:
    return copy.deepcopy(node)  # keeps the line numbers (tracebacks point at the real file)


def mutated_tree(source: Path | str, mutant: Mutant) -> ast.Module:
    """The mutant's file (its text, or read from its path), parsed afresh and changed (the file
    itself is never written)."""
    text = source.read_text(encoding="utf-8") if isinstance(source, Path) else source
    return apply(ast.parse(text), mutant)
