"""Model mutation coverage (issue 31): is every rule of a model pinned by a claim?

A model is conq's specification.  A rule that no claim pins down is a rule nobody checks, in the
model or in any port: drop the credit test from consumer lists' ``_pull_find`` and every claim
still holds, only the state count moves.  This engine finds such rules mechanically, as Chockler,
Kupferman and Vardi's coverage does for model checking and mutmut / Stryker do for code: it
mutates the model's own step code (model/engines/mutate_ast.py: drop a conjunct, negate a
condition, move a comparison or a bound by one, drop, duplicate or swap an update), loads each
mutant in isolation (model/engines/isolated.py: new module objects, nothing written to disk),
explores it on the suite configurations and classifies it:

* **killed**: a named property is violated, a witness is lost (vacuous, unreached), or an expected
  violation disappears; the result names the property, the configuration and the counterexample's
  length;
* **count-only**: the reachable graph changed but every claim kept its verdict: a specification
  hole, reported with a shortest path to a state the mutant reaches and the model does not (or the
  reverse).  A count-only mutant with a written argument in the model's spec page (section
  "Mutation coverage", a list item naming its id) is reported **argued** instead;
* **equivalent**: the same reachable graph on every configuration (graph_diff.py compares the
  fingerprints of the states and the labelled edges), or the mutated code never runs on any of
  them (the lines each configuration runs are recorded once, on the model itself: a change that
  never runs changes nothing);
* **crashed**: the mutant raises.  It is searched again with the raising states as dead ends; if a
  claim is then violated (the claim names the precondition the crash needed) it is killed by it,
  else it stays crashed.  A mutant whose ``step`` acts for an action its ``actions`` does not list
  breaks the kernel's contract ``step-only-when-enabled`` (kernel.StepContractError: the packed view
  runs ``step`` for every action and finds a move ``successors`` lacks); where a path through such
  a move is rebuilt, it is reported killed by that contract (how: "broken contract").

Budgets are counts: a mutant's search of a configuration stops at a state bound (four times the
model's states there, at least 10,000 more).  The seconds caps are safety nets only (60 times the
model's own time there, and a worker whose task runs past the sum is replaced): hitting one is
reported as ``timeout``, never as a verdict.  Mutants run in worker processes (``workers``,
default 2), each worker keeping the model's own explorations of the configurations it met.  The
consumer-lists memoised tuple path (``CONQ_CL_FAST``) is off in the workers: its footprints are
fixed for the model's own code, while the packed view (the one the explorer runs) finds a mutant's
footprints by running it (model/engines/packing.py).
"""

from __future__ import annotations

import dataclasses
import os
import queue
import re
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from conq.model.engines.explorer import explore
from conq.model.engines.graph_diff import FINGERPRINTS, GraphPrint, graph_diff, graph_print
from conq.model.engines.isolated import IsolatedPackage, package_of
from conq.model.engines.mutate_ast import Mutant, enumerate_mutants, mutated_tree, package_sources
from conq.model.kernel import Model, StepContractError, config_from_overrides

VERDICTS = ("killed", "count-only", "argued", "equivalent", "crashed", "timeout")


@dataclass(frozen=True)
class SuiteConfig:
    """One configuration a model is checked on: a named configuration, its overrides, whether
    liveness is checked (as its manifest entry says)."""

    name: str
    overrides: tuple = ()  # ((field, value), ...): hashable, in order
    liveness: bool = True

    @property
    def label(self) -> str:
        return self.name + "".join(f" {k}={v}" for k, v in self.overrides)

    @classmethod
    def of(cls, name: str, overrides: dict | None = None, liveness: bool = True) -> "SuiteConfig":
        return cls(name, tuple((k, _frozen(v)) for k, v in (overrides or {}).items()), liveness)


def _frozen(v: Any) -> Any:
    return tuple(_frozen(x) for x in v) if isinstance(v, list) else v


def _thawed(v: Any) -> Any:
    return [_thawed(x) for x in v] if isinstance(v, tuple) else v


def make_model(cls: type[Model], cfg: SuiteConfig) -> Model:
    """The model of class ``cls`` (the installed one or a mutant's) on configuration ``cfg``."""
    base = cls.configs()[cfg.name]
    config = config_from_overrides(cls, base, {k: _thawed(v) for k, v in cfg.overrides}) if cfg.overrides else base
    return cls(config)


def prefix_of(model_name: str) -> str:
    """The mutant id prefix of a model: its name's initials (``consumer-lists`` -> ``cl``)."""
    return "".join(w[0] for w in re.split(r"[-_ ]+", model_name) if w) or "m"


# -- the arguments written in a spec page ----------------------------------------------------------

_ARG_ITEM = re.compile(r"^\s*[-*]\s+`([a-z]+-[0-9a-f]{8})`(.*)$")


def arguments_from_markdown(text: str) -> dict[str, str]:
    """``{mutant id: argument}`` from a spec page's section titled "Mutation coverage" (any heading
    level): every list item that starts with a mutant id in backticks, its text (and the indented
    lines after it) the argument why the mutant is not a behaviour change."""
    out: dict[str, str] = {}
    inside, level, current = False, 0, None
    for line in text.splitlines():
        h = re.match(r"^(#+)\s+(.*)$", line)
        if h:
            if inside and len(h.group(1)) <= level:
                inside = False
            if "mutation coverage" in h.group(2).lower():
                inside, level = True, len(h.group(1))
            current = None
            continue
        if not inside:
            continue
        m = _ARG_ITEM.match(line)
        if m:
            current = m.group(1)
            out[current] = m.group(2).strip(" :-")
        elif current and line.startswith("  ") and line.strip():
            out[current] += " " + line.strip()
        elif not line.strip():
            current = None
    return out


# -- what one exploration said -------------------------------------------------------------------

def _verdicts(ex) -> dict[str, tuple[str, int | None]]:
    return {v.prop.name: (v.status, len(v.path) if v.path is not None else None) for v in ex.verdicts}


def killed_by(base: dict[str, tuple], found: dict[str, tuple]) -> list[dict[str, Any]]:
    """How ``found`` (a mutant's verdicts on a configuration) differs from ``base`` (the model's) in
    a way a claim notices: a property newly violated, a witness lost, an expected violation gone,
    a claim that no longer exists.  Violations first, shortest counterexample first."""
    out = []
    for name, (status, length) in found.items():
        was = base.get(name, (None, None))[0]
        if status == was:
            continue
        if status == "violated":
            out.append({"property": name, "how": "violated", "length": length})
        elif status in ("vacuous", "unreached"):
            out.append({"property": name, "how": "witness lost", "length": None})
        elif was == "violated" and status in ("holds", "witnessed"):
            out.append({"property": name, "how": "violation gone", "length": None})
    out += [{"property": n, "how": "claim gone", "length": None} for n in base if n not in found]
    order = {"violated": 0, "witness lost": 1, "violation gone": 2, "claim gone": 3}
    out.sort(key=lambda k: (order[k["how"]], k["length"] if k["length"] is not None else 1 << 30))
    return out


# -- line coverage of the model's own runs ----------------------------------------------------------

class _Lines:
    """Records the lines run in the given files while active (sys.settrace: only frames of those
    files are traced line by line)."""

    def __init__(self, files: Iterable[str]):
        self.hits: dict[str, set[int]] = {f: set() for f in files}

    def __enter__(self) -> "_Lines":
        hits = self.hits

        def tracer(frame, event, arg):
            h = hits.get(frame.f_code.co_filename)
            if h is None:
                return None

            def local(frame, event, arg, h=h):
                if event == "line":
                    h.add(frame.f_lineno)
                return local

            h.add(frame.f_lineno)
            return local

        self._old = sys.gettrace()
        sys.settrace(tracer)
        return self

    def __exit__(self, *exc) -> None:
        sys.settrace(self._old)


# -- one worker's view: the model, its configurations, the model's own explorations ---------------

@dataclass
class Setup:
    """What a worker needs (picklable): the model's registry target, the configurations, the
    mutants, the budgets."""

    model: str
    target: str
    configs: list[SuiteConfig]
    mutants: list[Mutant]
    #: the package's files as they were when the run began (mutate_ast.package_sources): the model
    #: and every mutant are loaded from this snapshot, never from the disk again
    sources: dict[str, str]
    state_factor: int = 4
    state_margin: int = 10_000
    seconds_factor: float = 60.0


class _Context:
    def __init__(self, setup: Setup):
        self.setup = setup
        self.directory, self.cls_name = package_of(setup.target)
        self._model_cls = None
        self._model_pkg: IsolatedPackage | None = None
        self.cache: dict[int, tuple[Any, GraphPrint, dict, float]] = {}
        self.adjacency: dict[int, tuple] = {}

    @property
    def model_cls(self) -> type[Model]:
        """The model itself, loaded from the run's snapshot (as its mutants are)."""
        if self._model_cls is None:
            self._model_pkg = IsolatedPackage(self.directory, self.setup.sources)
            self._model_cls = self._model_pkg.get(self.cls_name)
        return self._model_cls

    def step_files(self) -> dict[str, str]:
        """absolute path -> file name, of the files mutants change."""
        names = {m.name for m in self.setup.mutants}
        return {str((self.directory / n).resolve()): n for n in names} | {str(self.directory / n): n for n in names}

    def baseline(self, i: int, trace: bool = False) -> dict[str, Any]:
        """The model's own exploration of configuration i (kept for the mutants), with the lines of
        the step files it ran when ``trace``."""
        cfg = self.setup.configs[i]
        lines = None
        t0 = time.perf_counter()
        if trace:
            with _Lines(self.step_files()) as rec:
                m = make_model(self.model_cls, cfg)
                ex = explore(m, liveness=cfg.liveness, keep_edges=True)
            files = self.step_files()
            lines = {}
            for path, hit in rec.hits.items():
                lines.setdefault(files[path], set()).update(hit)
        else:
            m = make_model(self.model_cls, cfg)
            ex = explore(m, liveness=cfg.liveness, keep_edges=True)
        seconds = time.perf_counter() - t0
        if not ex.complete:  # pragma: no cover - the model's own configurations are finite
            raise RuntimeError(f"{self.setup.model}/{cfg.label}: the model's own search is incomplete: {ex.stop_reason}")
        self.cache[i] = (ex, {}, _verdicts(ex), seconds)
        return {"config": i, "states": ex.states, "transitions": ex.transitions, "seconds": seconds,
                "verdicts": _verdicts(ex), "lines": lines}

    def same_successors(self, i: int, m: Model) -> bool:
        """Whether ``m`` (a mutant on configuration i) has the model's initial states and, on every
        state the model reaches, the model's labelled successors: then (by induction on the search)
        its reachable graph is the model's.  Much cheaper than a search with every claim checked,
        and it stops at the first state that differs.  Used where the model has no packed view
        (whose search is already about as cheap)."""
        ex = self.base(i)[0]
        adj = self.adjacency.get(i)
        if adj is None:
            states, labels = ex.state_list, ex.labels
            adj = [set() for _ in range(len(states))]
            e = ex.edges
            for k in range(0, len(e), 3):
                a, o = labels[e[k + 2]]
                adj[e[k]].add((a, o, states[e[k + 1]]))
            inits = {states[k] for k in range(len(states)) if ex.parent[k] == -1}
            adj = self.adjacency[i] = (adj, inits)
        succ, inits = adj
        try:
            if set(m.init_states()) != inits:
                return False
            for k, s in enumerate(ex.state_list):
                if set(m.successors(s)) != succ[k]:
                    return False
        except Exception:  # the mutant raises here: the search says where and what a claim makes of it
            return False
        return True

    def prints(self, i: int, ex) -> tuple[GraphPrint, GraphPrint]:
        """The prints of configuration i's model and of ``ex`` (a mutant's search of it), of one kind:
        the packed states themselves where both searches packed alike, else fingerprints."""
        base_ex, made = self.cache[i][0], self.cache[i][1]
        mp = graph_print(ex)
        if mp.key != FINGERPRINTS:
            bp = made.get(mp.key)
            if bp is None and not made.get("packed-tried"):
                made["packed-tried"] = True
                bp = graph_print(base_ex)
                made[bp.key] = bp
                bp = made.get(mp.key)
            if bp is not None:
                return bp, mp
            mp = graph_print(ex, packed=False)
        bp = made.get(FINGERPRINTS)
        if bp is None:
            bp = made[FINGERPRINTS] = graph_print(base_ex, packed=False)
        return bp, mp

    def base(self, i: int):
        if i not in self.cache:
            self.baseline(i)
        return self.cache[i]

    # -- one mutant ----------------------------------------------------------------------------
    def check(self, mi: int, run: list[int]) -> dict[str, Any]:
        mutant = self.setup.mutants[mi]
        out: dict[str, Any] = {"configs_run": 0}
        try:
            tree = mutated_tree(self.setup.sources[mutant.name], mutant)
            pkg = IsolatedPackage(self.directory, {**self.setup.sources, mutant.name: tree})
        except Exception as e:  # the mutated package does not even load
            return {"verdict": "crashed", "error": _error(e, self.directory), "configs_run": 0}
        try:
            cls = pkg.get(self.cls_name)
            changed = None
            crash = None
            for i in run:
                base_ex, _prints, base_verdicts, base_seconds = self.base(i)
                cfg = self.setup.configs[i]
                out["configs_run"] += 1
                budget = max(self.setup.state_factor * base_ex.states, base_ex.states + self.setup.state_margin)
                safety = 30.0 + self.setup.seconds_factor * base_seconds
                view = "tuples"
                try:
                    m = make_model(cls, cfg)
                    if m.packed() is None and self.same_successors(i, m):
                        continue  # the model's graph, edge for edge: nothing any claim could see
                    ex = explore(m, max_states=budget, max_seconds=safety, liveness=cfg.liveness, keep_edges=True)
                    if not getattr(ex, "packed_fallback", "") and m.packed() is not None:
                        view = "packed"
                except StepContractError as e:
                    return _contract_broken(out, cfg, e)
                except Exception as e:  # the mutant raises: search again with the raising states as dead ends
                    ex, crash_here = _guarded(cls, cfg, e, budget, safety, self.directory)
                    crash = crash or dict(crash_here, config=cfg.label)
                    if ex is None:
                        continue
                kills = killed_by(base_verdicts, _verdicts(ex))
                if kills:
                    first = kills[0]
                    out.update(verdict="killed", config=cfg.label, property=first["property"], how=first["how"],
                               length=first["length"], properties=sorted({k["property"] for k in kills}), view=view)
                    if crash:
                        out["crash"] = crash
                    return out
                if not ex.complete:
                    if ex.stop_reason.startswith("time bound"):
                        out.update(verdict="timeout", config=cfg.label, detail=ex.stop_reason)
                        return out
                    changed = changed or {"config": cfg.label, "bounded": ex.stop_reason,
                                          "states": {"model": base_ex.states, "mutant": f">= {ex.states}"}}
                    continue
                if ex.states == base_ex.states:
                    base_print, mp = self.prints(i, ex)
                    same = mp.same(base_print)
                else:
                    same, base_print, mp = False, None, None
                if not same and changed is None:
                    try:
                        diff = graph_diff(base_ex, ex, names=("model", "mutant"), prints=(base_print, mp))
                    except StepContractError as e:  # a path to a state only the mutant has
                        return _contract_broken(out, cfg, e)
                    changed = {"config": cfg.label, **{k: diff[k] for k in ("states", "transitions")},
                               "only_mutant": diff.get("only_mutant"), "only_model": diff.get("only_model"),
                               "witnesses": diff["witnesses"]}
            if crash:
                out.update(verdict="crashed", **{k: crash[k] for k in ("config", "error") if k in crash})
                if "length" in crash:
                    out["length"] = crash["length"]
                if changed:
                    out["changed"] = changed
                return out
            if changed:
                out.update(verdict="count-only", changed=changed)
            else:
                out.update(verdict="equivalent", reason=f"the same reachable graph on the {len(run)} configuration"
                           + ("s" if len(run) != 1 else "") + " whose search runs the changed code")
            return out
        finally:
            pkg.close()


def _contract_broken(out: dict[str, Any], cfg: SuiteConfig, e: StepContractError) -> dict[str, Any]:
    """The mutant's step acts for an action its ``actions`` does not list: killed by the kernel's
    contract (a named precondition, as the issue asks of a crash), found where a path through such a
    step was rebuilt."""
    out.update(verdict="killed", config=cfg.label, property=StepContractError.CONTRACT, how="broken contract",
               length=None, properties=[StepContractError.CONTRACT], detail=str(e).split("; state ")[0][:400])
    return out


def _error(e: BaseException, directory: Path) -> str:
    """``Type: message at file:line`` (the deepest frame in the model package)."""
    where = ""
    for fr in traceback.extract_tb(e.__traceback__):
        if fr.filename and str(directory) in fr.filename:
            where = f" at {Path(fr.filename).parent.name}/{Path(fr.filename).name}:{fr.lineno}"
    msg = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {msg[:200]}{where}"


def _guarded(cls, cfg: SuiteConfig, first: BaseException, budget: int, safety: float, directory: Path):
    """Search the mutant again on tuples with every raising step and check treated as a dead end /
    not deciding: (exploration or None, crash description)."""
    crash: dict[str, Any] = {"error": _error(first, directory)}
    raised: list = []
    try:
        m = make_model(cls, cfg)
        props = m.property_list()
    except Exception as e:
        return None, {"error": _error(e, directory)}
    inner = m.successors

    def successors(s):
        try:
            return inner(s)
        except Exception as e:
            raised.append((s, e))
            return []

    def safe(f, default):
        if f is None:
            return None

        def g(*args):
            try:
                return f(*args)
            except Exception as e:
                raised.append((args[0], e))
                return default
        return g

    m.successors = successors  # type: ignore[method-assign]
    m.packed = lambda: None  # type: ignore[method-assign]
    m._properties = tuple(dataclasses.replace(p, check=safe(p.check, True), witness=safe(p.witness, False),
                                              trigger=safe(p.trigger, False)) for p in props)
    try:
        ex = explore(m, max_states=budget, max_seconds=safety, liveness=cfg.liveness, keep_edges=True)
    except Exception as e:
        return None, {"error": _error(e, directory)}
    if raised:
        s, e = raised[0]
        crash["error"] = _error(e, directory)
        try:
            idx = list(ex.state_list).index(s)
            crash["length"] = len(ex.path(idx))
        except (ValueError, Exception):
            pass
    return ex, crash


# -- workers -------------------------------------------------------------------------------------

def _worker(setup: Setup, tasks, results, wid: int) -> None:
    os.environ["CONQ_CL_FAST"] = "0"
    ctx = _Context(setup)
    parent = os.getppid()
    while True:
        try:
            task = tasks.get(timeout=1.0)
        except queue.Empty:
            if os.getppid() != parent:
                return  # the run that started this worker is gone: leave nothing behind
            continue
        if task is None:
            return
        kind, tid, *args = task
        results.put(("start", wid, tid))
        try:
            res = ctx.baseline(*args) if kind == "baseline" else ctx.check(*args)
        except BaseException as e:  # noqa: BLE001 - reported, never hidden
            res = {"verdict": "crashed", "error": "engine: " + _error(e, ctx.directory), "internal": True,
                   "traceback": traceback.format_exc()}
        results.put(("done", wid, tid, res))


class _Pool:
    """``n`` worker processes (spawned, so they share nothing with this one) and the safety net."""

    def __init__(self, setup: Setup, n: int):
        import multiprocessing as mp

        self.mp = mp.get_context("spawn")
        self.setup, self.n = setup, n
        self.tasks = self.mp.Queue()
        self.results = self.mp.Queue()
        self.procs: dict[int, Any] = {}
        self.running: dict[int, tuple[Any, float]] = {}
        self._next = 0
        self.deaths = self.finished = 0
        for _ in range(n):
            self._spawn()

    def _spawn(self) -> None:
        wid = self._next
        self._next += 1
        p = self.mp.Process(target=_worker, args=(self.setup, self.tasks, self.results, wid), daemon=True)
        p.start()
        self.procs[wid] = p

    def run(self, tasks: list[tuple], caps: dict[Any, float], on_done: Callable[[Any, dict], None]) -> None:
        for t in tasks:
            self.tasks.put(t)
        left = {t[1] for t in tasks}
        while left:
            try:
                msg = self.results.get(timeout=1.0)
            except queue.Empty:
                msg = None
            now = time.monotonic()
            if msg is not None:
                if msg[0] == "start":
                    self.running[msg[1]] = (msg[2], now)
                else:
                    _, wid, tid, res = msg
                    self.running.pop(wid, None)
                    self.finished += 1
                    if tid in left:
                        left.discard(tid)
                        on_done(tid, res)
            for wid, (tid, since) in list(self.running.items()):
                if now - since > caps.get(tid, 3600.0):
                    p = self.procs.pop(wid)
                    p.terminate()
                    p.join()
                    del self.running[wid]
                    left.discard(tid)
                    on_done(tid, {"verdict": "timeout", "detail": f"no verdict within the safety net of {caps[tid]:.0f} s"})
                    self._spawn()
            for wid, p in list(self.procs.items()):
                if p.is_alive() or p.exitcode in (0, None):
                    continue
                # a worker that died (killed for memory, a crash of the interpreter): its task is
                # reported, a new worker takes its place; workers that cannot even start end the run
                self.procs.pop(wid)
                self.deaths += 1
                if wid in self.running:
                    tid, _ = self.running.pop(wid)
                    if tid in left:
                        left.discard(tid)
                        on_done(tid, {"verdict": "crashed", "internal": True,
                                      "error": f"engine: the worker died (exit code {p.exitcode})"})
                if self.deaths > 3 * self.n and not self.finished:
                    raise RuntimeError(f"mutation workers die before finishing any task (exit code {p.exitcode}); "
                                       "a script that starts them must guard its main code with "
                                       "`if __name__ == '__main__':` (they are spawned)")
                self._spawn()

    def close(self) -> None:
        for _ in self.procs:
            self.tasks.put(None)
        for p in self.procs.values():
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
                p.join()
        self.tasks.close()
        self.results.close()


class _InProcess:
    """The same protocol in this process (``workers=0``): for tests and debugging."""

    def __init__(self, setup: Setup):
        self.ctx = _Context(setup)

    def run(self, tasks, caps, on_done) -> None:
        old = os.environ.get("CONQ_CL_FAST")
        os.environ["CONQ_CL_FAST"] = "0"
        try:
            for kind, tid, *args in tasks:
                on_done(tid, self.ctx.baseline(*args) if kind == "baseline" else self.ctx.check(*args))
        finally:
            if old is None:
                os.environ.pop("CONQ_CL_FAST", None)
            else:
                os.environ["CONQ_CL_FAST"] = old

    def close(self) -> None:
        pass


# -- the run -----------------------------------------------------------------------------------------

@dataclass
class MutationReport:
    model: str
    configs: list[dict[str, Any]]
    results: list[dict[str, Any]]
    seconds: float
    arguments_file: str = ""
    unused_arguments: list[str] = field(default_factory=list)
    #: how many mutants the package has, how many change code some configuration runs, how many were
    #: sampled (``sample``)
    population: dict[str, int] = field(default_factory=dict)

    def count(self, verdict: str) -> int:
        return sum(1 for r in self.results if r["verdict"] == verdict)

    @property
    def score(self) -> float | None:
        """Killed over the mutants that changed behaviour (all but the equivalent ones)."""
        live = len(self.results) - self.count("equivalent")
        return self.count("killed") / live if live else None

    @property
    def ok(self) -> bool:
        """No specification hole left unargued, nothing the engine could not decide."""
        return self.count("count-only") == 0 and self.count("timeout") == 0 and not any(
            r.get("internal") for r in self.results)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "configs": self.configs,
            "mutants": len(self.results),
            "killed": self.count("killed"),
            "count_only": self.count("count-only"),
            "argued": self.count("argued"),
            "equivalent": self.count("equivalent"),
            "crashed": self.count("crashed"),
            "timeout": self.count("timeout"),
            "score": None if self.score is None else round(self.score, 4),
            "ok": self.ok,
            "seconds": round(self.seconds, 2),
            "arguments": self.arguments_file,
            "unused_arguments": self.unused_arguments,
            "population": self.population,
            "results": self.results,
        }

    def summary(self) -> str:
        s = self.score
        return (f"{self.model}: {len(self.results)} mutants on {len(self.configs)} configurations: "
                f"{self.count('killed')} killed, {self.count('count-only')} count-only, {self.count('argued')} argued, "
                f"{self.count('equivalent')} equivalent, {self.count('crashed')} crashed"
                + (f", {self.count('timeout')} timeout" if self.count("timeout") else "")
                + (f"; score {100 * s:.1f}%" if s is not None else ""))


def run_mutation(model: str, target: str, configs: list[SuiteConfig], *, workers: int = 2,
                 arguments: dict[str, str] | None = None, arguments_file: str = "",
                 only: Iterable[str] | None = None, operators: Iterable[str] | None = None,
                 progress: Callable[[str], None] | None = None, state_factor: int = 4,
                 lines: bool = True, on_result: Callable[[dict[str, Any]], None] | None = None,
                 sample: int | None = None) -> MutationReport:
    """Mutation coverage of ``model`` (registry name; ``target`` its ``package:Class``) on
    ``configs``.  ``arguments``: mutant id -> the written argument why it is no behaviour change
    (from the spec page: :func:`arguments_from_markdown`); ``only``: mutant ids to run (default all);
    ``operators``: the operators to run (default all); ``workers`` 0 runs in this process.  ``lines``
    False: the lines each configuration runs are not recorded (the recording costs several times the
    model's own search), so every mutant is searched on every configuration.  ``on_result``: called
    with each mutant's row as soon as it is decided (the argument not yet applied).  ``sample``: search
    only this many of the mutants whose changed code runs on some configuration, the first by id (a
    hash: a fixed, spread-out choice), and report on those (the main job's small run)."""
    t0 = time.perf_counter()
    say = progress or (lambda _m: None)
    directory, _ = package_of(target)
    prefix = prefix_of(model)
    sources = package_sources(directory)
    mutants = enumerate_mutants(directory, sources=sources)
    if operators is not None:
        ops = set(operators)
        mutants = [m for m in mutants if m.operator in ops]
    if only is not None:
        want = set(only)
        mutants = [m for m in mutants if m.ident(prefix) in want]
    setup = Setup(model, target, list(configs), mutants, sources, state_factor=state_factor)
    pool: Any = _Pool(setup, workers) if workers > 0 else _InProcess(setup)
    results: list[dict[str, Any] | None] = [None] * len(mutants)
    base: dict[int, dict] = {}
    population: dict[str, int] = {}
    try:
        say(f"{model}: the model on {len(configs)} configurations" + (" (lines run recorded)" if lines else ""))

        def got_base(tid, res):
            if res.get("verdict") in ("crashed", "timeout"):
                raise RuntimeError(f"{model}: the model's own search of {configs[tid[1]].label} failed: {res.get('error') or res.get('detail')}\n{res.get('traceback', '')}")
            base[tid[1]] = res

        pool.run([("baseline", ("b", i), i, lines) for i in range(len(configs))], {}, got_base)
        order = sorted(range(len(configs)), key=lambda i: (base[i]["states"], i))
        runs = [[i for i in order if base[i]["lines"] is None or any(x in base[i]["lines"].get(mut.name, ()) for x in mut.lines)]
                for mut in mutants]
        population = {"mutants": len(mutants), "run": sum(1 for r in runs if r)}
        chosen = range(len(mutants))  # indices into setup.mutants (what a worker's task names)
        if sample is not None and population["run"] > sample:
            chosen = sorted(sorted((mi for mi, r in enumerate(runs) if r), key=lambda mi: mutants[mi].ident(prefix))[:sample])
            population["sampled"] = sample
        tasks, caps = [], {}
        for mi in chosen:
            run = runs[mi]
            if not run:
                results[mi] = {"verdict": "equivalent", "configs_run": 0,
                               "reason": "the changed code runs on none of the configurations"}
                continue
            tasks.append(("mutant", ("m", mi), mi, run))
            caps[("m", mi)] = 120.0 + sum(30.0 + setup.seconds_factor * base[i]["seconds"] for i in run)
        say(f"{model}: {len(chosen)} mutants, {len(tasks)} to search ({len(chosen) - len(tasks)} change code no "
            f"configuration runs)")
        done = [0]

        def got(tid, res):
            results[tid[1]] = res
            if on_result is not None:
                mut = mutants[tid[1]]
                on_result({"id": mut.ident(prefix), "location": mut.location, "function": mut.function,
                           "operator": mut.operator, "detail": mut.detail, **res})
            done[0] += 1
            if done[0] % 25 == 0 or done[0] == len(tasks):
                say(f"{model}: {done[0]}/{len(tasks)} mutants searched")

        pool.run(tasks, caps, got)
    finally:
        pool.close()
    arguments = dict(arguments or {})
    used = set()
    out = []
    for mut, res in zip(mutants, results):
        if res is None:
            continue  # not in the sample
        ident = mut.ident(prefix)
        row = {"id": ident, "location": mut.location, "function": mut.function, "operator": mut.operator,
               "detail": mut.detail, **res}
        if row["verdict"] == "count-only" and ident in arguments:
            row["verdict"] = "argued"
            row["argument"] = arguments[ident]
        if row["verdict"] == "argued":
            used.add(ident)
        out.append(row)
    cfg_rows = [{"config": c.label, "states": base[i]["states"], "transitions": base[i]["transitions"],
                 "liveness": c.liveness} for i, c in enumerate(configs)]
    unused = sorted(set(arguments) - used) if only is None and operators is None and "sampled" not in population else []
    return MutationReport(model, cfg_rows, out, time.perf_counter() - t0, arguments_file, unused, population)


# -- a manifest mismatch explained ---------------------------------------------------------------

def explain_change(target: str, cfg: SuiteConfig, old_sources: dict[str, str], *,
                   new_sources: dict[str, str] | None = None, max_states: int | None = None) -> dict[str, Any]:
    """Why a configuration's result moved: the model package as it was (``old_sources``, e.g. the
    files at the revision the manifest was pinned on) and as it is (``new_sources``, default the
    files now), both loaded in isolation and searched on ``cfg``, compared by
    :func:`~conq.model.engines.graph_diff.graph_diff`: the claims whose verdict changed, the
    witnesses and counterexamples whose length changed, and a shortest path to a state one reaches
    and the other does not (``only_pinned`` / ``only_found``)."""
    directory, cls_name = package_of(target)
    new_sources = new_sources if new_sources is not None else package_sources(directory)
    with IsolatedPackage(directory, old_sources) as old, IsolatedPackage(directory, new_sources) as new:
        a = explore(make_model(old.get(cls_name), cfg), liveness=cfg.liveness, keep_edges=True, max_states=max_states)
        b = explore(make_model(new.get(cls_name), cfg), liveness=cfg.liveness, keep_edges=True, max_states=max_states)
        return graph_diff(a, b, names=("pinned", "found"))
