"""Linearizability of the node list, on real threads.

Histories of append / remove / size (each with invocation and response timestamps from
``time.perf_counter_ns``, the thread and the result) are recorded on real threads and checked with a
Wing & Gong search (with Lowe's memoisation of (remaining operations, state)) against the sequential
specification: a set of present values (append adds, remove(v) is True iff v was present, size is the
number of present values).

Iteration is weakly consistent, not linearizable as one operation, so each recorded iteration is
checked against the guarantee stated in ``conq.impl.consumer_lists.node_list`` instead:
  (a) a value appended before the iteration started and not removed before it ended is seen once;
  (b) no value is seen twice, and values whose appends did not overlap are seen in append order;
  (c) a value removed before the iteration started is never seen; nothing never appended is seen.
"""

import random
import sys
import threading
import time

import pytest

from conq.conformance.linearizability import Op, check_iterations, linearize, node_list_spec
from conq.impl.consumer_lists.node_list import NodeList


# The checker (Wing & Gong search with Lowe's memoisation, and the iteration guarantee) lives in
# conq.conformance.linearizability, where the mutation catalog uses it too.
def linearizable(ops, initial=frozenset()):
    return linearize(ops, node_list_spec, frozenset(initial))


# --------------------------------------------------------------------------------------------------
# the checker itself can say no
# --------------------------------------------------------------------------------------------------


def test_checker_rejects_non_linearizable_histories():
    # size observed 0 strictly after an append of a value that is never removed
    bad = [Op(0, "append", "a", None, 0, 10), Op(1, "size", None, 0, 20, 30)]
    assert linearizable(bad) is None
    # two removes of the same value both succeed
    bad2 = [Op(0, "remove", "x", True, 0, 10), Op(1, "remove", "x", True, 5, 15)]
    assert linearizable(bad2, {"x"}) is None
    # overlapping: size may see the append or not
    ok = [Op(0, "append", "a", None, 0, 10), Op(1, "size", None, 0, 5, 30)]
    assert linearizable(ok) is not None
    ok2 = [Op(0, "append", "a", None, 0, 10), Op(1, "size", None, 1, 5, 30)]
    assert linearizable(ok2) is not None


def test_iteration_checker_rejects_violations():
    init = {"i"}
    appends = [Op(0, "append", "a", None, 0, 10), Op(0, "append", "b", None, 11, 20)]
    assert check_iterations(appends + [Op(1, "iter", None, ["i", "a", "b"], 30, 40)], init) == []
    assert check_iterations(appends + [Op(1, "iter", None, ["i", "b"], 30, 40)], init)  # missed a
    assert check_iterations(appends + [Op(1, "iter", None, ["i", "b", "a"], 30, 40)], init)  # order
    assert check_iterations(appends + [Op(1, "iter", None, ["i", "a", "a", "b"], 30, 40)], init)  # twice
    rem = [Op(2, "remove", "i", True, 21, 25)]
    assert check_iterations(appends + rem + [Op(1, "iter", None, ["i", "a", "b"], 30, 40)], init)  # removed


# --------------------------------------------------------------------------------------------------
# recording on real threads
# --------------------------------------------------------------------------------------------------


def record_round(rng, threads=4, ops_per_thread=12, initial=6, scavenge_threshold=1):
    nl = NodeList(name="lin", scavenge_threshold=scavenge_threshold)
    initial_values = [("init", k) for k in range(initial)]
    entries = {v: nl.append(v) for v in initial_values}
    entries_lock = threading.Lock()  # protects the test's own table, not the list
    history: list[Op] = []
    barrier = threading.Barrier(threads)
    clock = time.perf_counter_ns
    plans = []
    for t in range(threads):
        plans.append([rng.choices(["append", "remove", "size", "iter"], weights=[4, 4, 2, 1])[0]
                      for _ in range(ops_per_thread)])

    def worker(t):
        local = []
        r = random.Random(rng.random())
        barrier.wait(60)  # (a safety net: the four threads start together)
        for k, kind in enumerate(plans[t]):
            if kind == "append":
                v = (t, k)
                inv = clock()
                e = nl.append(v)
                res = clock()
                with entries_lock:
                    entries[v] = e
                local.append(Op(t, kind, v, None, inv, res))
            elif kind == "remove":
                with entries_lock:
                    v, e = r.choice(list(entries.items()))
                inv = clock()
                ok = nl.remove(e)
                res = clock()
                local.append(Op(t, kind, v, ok, inv, res))
            elif kind == "size":
                inv = clock()
                s = len(nl)
                res = clock()
                local.append(Op(t, kind, None, s, inv, res))
            else:
                inv = clock()
                seen = list(nl)
                res = clock()
                local.append(Op(t, kind, None, seen, inv, res))
        history.extend(local)  # list.extend of a finished list; joined before reading

    ths = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in ths:
        th.start()
    for th in ths:
        th.join(30)
        assert not th.is_alive(), "a recording thread hung"
    return history, initial_values, nl


#: rounds recorded at least, at most, and the overlapping operations the rounds must show
ROUNDS, MAX_ROUNDS, OVERLAPS = 400, 8000, 100


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("scavenge_threshold", [1, 100])
def test_node_list_histories_are_linearizable(scavenge_threshold):
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # make the interpreter switch threads as often as it can
    try:
        rng = random.Random(20240607 + scavenge_threshold)
        overlapping = 0
        # at least ROUNDS rounds, and more (up to MAX_ROUNDS) until the threads have overlapped
        # OVERLAPS times: how often they overlap depends on how the machine schedules them (a CI
        # run at load 10 saw too few in 400 rounds), so the budget is counted in overlaps, not rounds
        for round_ in range(MAX_ROUNDS):
            if round_ >= ROUNDS and overlapping > OVERLAPS:
                break
            history, initial_values, nl = record_round(rng, scavenge_threshold=scavenge_threshold)
            lin_ops = [op for op in history if op.kind != "iter"]
            overlapping += sum(1 for a in lin_ops for b in lin_ops if a.thread != b.thread and a.inv < b.inv < a.res)
            result = linearizable(lin_ops, initial=frozenset(initial_values))
            assert result is not None, f"round {round_}: not linearizable: {sorted(lin_ops, key=lambda o: o.inv)}"
            problems = check_iterations(history, set(initial_values))
            assert not problems, f"round {round_}: {problems[:3]}"
            # final state agrees with the spec after the linearization
            state = set(initial_values)
            for op in result:
                state = set(node_list_spec(frozenset(state), op)[1])
            assert set(nl) == state and len(nl) == len(state)
        assert overlapping > OVERLAPS, (f"the threads overlapped only {overlapping} times in {MAX_ROUNDS} rounds: "
                                        "the test would not exercise concurrency")
    finally:
        sys.setswitchinterval(old)
