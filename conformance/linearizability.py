"""Linearizability checking of concurrent histories recorded on real threads.

A history is a list of operations, each with the thread that ran it, its
invocation and response times (``time.perf_counter_ns``), its argument and its
result.  It is linearizable when some total order of the operations that
respects real time (an operation that responded before another was invoked
comes first) is accepted by the sequential specification.  The search is
Wing & Gong's, with Lowe's memoisation of (operations done, spec state).

The sequential specification is a function ``step(state, op) -> (ok,
next_state)``; :func:`node_list_spec` is the node list's (a set of present
values).  Weakly consistent iteration is not one linearizable operation:
:func:`check_iterations` checks the guarantee ``conq.impl.consumer_lists.node_list`` states
for it instead.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterable


@dataclass
class Op:
    thread: int
    kind: str
    arg: Any
    result: Any
    inv: int
    res: int


Spec = Callable[[Hashable, Op], tuple[bool, Hashable]]


def node_list_spec(state: frozenset, op: Op) -> tuple[bool, frozenset]:
    """append adds a fresh value; remove(v) is True iff v was present; size counts."""
    if op.kind == "append":
        return op.arg not in state, state | {op.arg}
    if op.kind == "remove":
        present = op.arg in state
        return op.result == present, (state - {op.arg}) if present else state
    if op.kind == "size":
        return op.result == len(state), state
    raise ValueError(f"no sequential meaning for operation {op.kind!r}")


def linearize(ops: list[Op], spec: Spec, initial: Hashable) -> list[Op] | None:
    """A real-time-respecting order accepted by ``spec``, or None when there is none."""
    n = len(ops)
    order = sorted(range(n), key=lambda i: ops[i].inv)
    seen: set[tuple[int, Hashable]] = set()
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def search(done: int, state: Hashable, out: list[int]) -> list[int] | None:
        if done == (1 << n) - 1:
            return out
        key = (done, state)
        if key in seen:
            return None
        seen.add(key)
        # the earliest response among pending ops bounds who may go next
        bound = min(ops[i].res for i in order if not (done >> i) & 1)
        for i in order:
            if (done >> i) & 1:
                continue
            if ops[i].inv > bound:
                break
            ok, nxt = spec(state, ops[i])
            if ok:
                r = search(done | (1 << i), nxt, out + [i])
                if r is not None:
                    return r
        return None

    found = search(0, initial, [])
    return None if found is None else [ops[i] for i in found]


def check_iterations(ops: list[Op], initial_values: Iterable[Any]) -> list[str]:
    """Problems with recorded iterations (empty: the weak-consistency guarantee
    of ``conq.impl.consumer_lists.node_list`` holds): (a) a value present for the whole
    iteration is seen once; (b) no value twice, and values whose appends did not
    overlap are seen in append order; (c) a value removed before the iteration
    started, or never appended before it ended, is never seen."""
    initial_values = list(initial_values)
    appends = {op.arg: op for op in ops if op.kind == "append"}
    removes: dict[Any, list[Op]] = {}
    for op in ops:
        if op.kind == "remove":
            removes.setdefault(op.arg, []).append(op)
    problems = []
    for it in (op for op in ops if op.kind == "iter"):
        seen = list(it.result)
        if len(seen) != len(set(seen)):
            problems.append(f"iteration {it} yielded a value twice")
        for v in seen:
            if v not in initial_values and (v not in appends or appends[v].inv > it.res):
                problems.append(f"iteration yielded {v!r}, never appended before it ended")
            if any(r.res < it.inv and r.result for r in removes.get(v, [])):
                problems.append(f"iteration yielded {v!r}, removed before the iteration started")
        for v in initial_values + [v for v, a in appends.items() if a.res < it.inv]:
            removed_during = any(r.inv < it.res for r in removes.get(v, []))
            if not removed_during and v not in seen:
                problems.append(f"iteration missed {v!r}, present for the whole iteration")
        pos = {v: k for k, v in enumerate(seen)}
        for u in seen:
            for w in seen:
                au, aw = appends.get(u), appends.get(w)
                u_first = (u in initial_values and w not in initial_values) or (
                    au is not None and aw is not None and au.res < aw.inv)
                if u_first and pos[u] > pos[w]:
                    problems.append(f"iteration yielded {w!r} before {u!r} although {u!r} was appended first")
    return problems


def _run_threads(worker: Callable[[int], None], threads: int, what: str) -> None:
    ts = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in ts:
        th.start()
    for th in ts:
        th.join(timeout=30)
        if th.is_alive():
            raise TimeoutError(f"a {what} worker thread hung for 30 s")


def record_node_list_round(make_list: Callable[[], Any], rng: random.Random, *, threads: int = 4,
                           ops_per_thread: int = 12, initial: int = 6) -> tuple[list[Op], list[Any]]:
    """Run one round of random append/remove/size/iterate on real threads
    against a fresh list; return the history and the initial values."""
    lst = make_list()
    entries = {}
    for v in range(initial):
        entries[v] = lst.append(v)
    history: list[Op] = []
    lock = threading.Lock()
    barrier = threading.Barrier(threads)
    plans = []
    next_value = initial
    for t in range(threads):
        plan = []
        for _ in range(ops_per_thread):
            kind = rng.choices(["append", "remove", "size", "iter"], weights=[4, 4, 2, 1])[0]
            if kind == "append":
                plan.append((kind, next_value))
                next_value += 1
            elif kind == "remove":
                plan.append((kind, rng.randrange(next_value + threads)))
            else:
                plan.append((kind, None))
        plans.append(plan)
    handles = dict(entries)
    handles_lock = threading.Lock()

    def worker(t: int) -> None:
        barrier.wait()
        for kind, arg in plans[t]:
            inv = time.perf_counter_ns()
            if kind == "append":
                e = lst.append(arg)
                with handles_lock:
                    handles[arg] = e
                result = None
            elif kind == "remove":
                with handles_lock:
                    e = handles.get(arg)
                result = lst.remove(e) if e is not None else False
                if e is None:
                    inv = None  # nothing was invoked on the list
            elif kind == "size":
                result = len(lst)
            else:
                result = list(lst)
            res = time.perf_counter_ns()
            if inv is not None:
                with lock:
                    history.append(Op(t, kind, arg, result, inv, res))

    _run_threads(worker, threads, "node-list")
    return history, list(range(initial))


def check_node_list(make_list: Callable[[], Any], *, rounds: int = 100, seed: int = 0) -> str | None:
    """None when every recorded round is linearizable (and every iteration
    weakly consistent), else the first problem found, with its history."""
    rng = random.Random(seed)
    for r in range(rounds):
        history, initial = record_node_list_round(make_list, rng)
        ops = [op for op in history if op.kind != "iter"]
        if linearize(ops, node_list_spec, frozenset(initial)) is None:
            lines = "\n".join(f"    t{o.thread} {o.kind}({o.arg}) -> {o.result} [{o.inv}..{o.res}]" for o in sorted(ops, key=lambda o: o.inv))
            return f"round {r}: history not linearizable:\n{lines}"
        problems = check_iterations(history, initial)
        if problems:
            return f"round {r}: {problems[0]}"
    return None


# -- the queue's operations -------------------------------------------------------------------------


def queue_spec(state: tuple[frozenset, frozenset], op: Op) -> tuple[bool, tuple[frozenset, frozenset]]:
    """Sequential specification of the queue's message operations (one priority
    level, unlimited credit, every consumer acquiring): ``enqueue`` makes a new
    message available; ``pull`` takes an available message, or returns None only
    when none is available; ``release`` makes an acquired message available again.
    State: (available ids, acquired ids)."""
    available, acquired = state
    if op.kind == "enqueue":
        mid = op.result
        ok = mid not in available and mid not in acquired
        return ok, (available | {mid}, acquired)
    if op.kind == "pull":
        if op.result is None:
            return not available, state
        return op.result in available, (available - {op.result}, acquired | {op.result})
    if op.kind == "release":
        return op.arg in acquired, (available | {op.arg}, acquired - {op.arg})
    raise ValueError(f"no sequential meaning for queue operation {op.kind!r}")


def record_queue_round(make_queue: Callable[[], Any], rng: random.Random, *, threads: int = 3,
                       ops_per_thread: int = 10) -> list[Op]:
    """Real threads enqueue, pull (deliver_single_message) and release on one
    queue; each thread pulls with a consumer of its own."""
    q = make_queue()
    consumers = [q.add_consumer(f"t{t}") for t in range(threads)]
    history: list[Op] = []
    lock = threading.Lock()
    barrier = threading.Barrier(threads)
    plans = [[rng.choices(["enqueue", "pull", "release"], weights=[4, 4, 2])[0] for _ in range(ops_per_thread)]
             for _ in range(threads)]

    errors: list[str] = []

    def worker(t: int) -> None:
        try:
            run_plan(t)
        except Exception as e:  # the implementation refused an operation it had made possible
            with lock:
                errors.append(f"thread {t}: {type(e).__name__}: {e}")

    def run_plan(t: int) -> None:
        mine: list[int] = []
        barrier.wait()
        for kind in plans[t]:
            if kind == "release" and not mine:
                kind = "pull"
            arg = mine.pop(rng.randrange(len(mine))) if kind == "release" else None
            inv = time.perf_counter_ns()
            if kind == "enqueue":
                result = q.enqueue()
            elif kind == "pull":
                result = q.deliver_single_message(consumers[t])
                if result is not None:
                    mine.append(result)
            else:
                result = q.release(arg)
            res = time.perf_counter_ns()
            with lock:
                history.append(Op(t, kind, arg, result, inv, res))

    _run_threads(worker, threads, "queue")
    if errors:
        raise QueueHistoryError(errors[0])
    return history


class QueueHistoryError(RuntimeError):
    """An operation failed while a queue history was being recorded."""


def check_queue(make_queue: Callable[[], Any], *, rounds: int = 100, seed: int = 0) -> str | None:
    """None when every recorded round of queue operations is linearizable."""
    rng = random.Random(seed)
    for r in range(rounds):
        try:
            ops = record_queue_round(make_queue, rng)
        except QueueHistoryError as e:
            return f"round {r}: {e}"
        if linearize(ops, queue_spec, (frozenset(), frozenset())) is None:
            lines = "\n".join(f"    t{o.thread} {o.kind}({o.arg}) -> {o.result} [{o.inv}..{o.res}]" for o in sorted(ops, key=lambda o: o.inv))
            return f"round {r}: queue history not linearizable:\n{lines}"
    return None
