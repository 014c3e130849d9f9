"""Single-threaded cost of the consumer-lists priority check (issue 17, the check reads the target's
flag): 16 acquiring consumers of 16 priorities, the 15 higher ones suspended, N rounds of enqueue +
one pull by the lowest-priority consumer (its ``Queue._no_higher`` asks about every higher level) +
settle.  The reference (``Queue._wanting``, O(levels)) against the mutant ``priority-reads-lists``
(the old list-size check, also O(levels)); median of 3 runs of 20,000 rounds each.

Run:  /work/main/.venv/bin/python bench/cl_priority_check.py
"""
import statistics, time
from conq.impl.consumer_lists.queue import Queue
from conq.conformance.consumer_lists import mutants

def run(n=20000):
    q = Queue(record_events=False, retain_deleted=False)
    cons = [q.add_consumer(i, priority=i + 1, credit=None) for i in range(16)]
    for c in cons[1:]:
        c.set_flow(False)  # higher consumers do not want work: the low one may take, after checking all 15
    low = cons[0]
    t = time.perf_counter()
    for _ in range(n):
        m = q.enqueue()
        got = q.deliver_single_message(low)
        assert got == m, (got, m)
        q.settle(m, low)
    return n / (time.perf_counter() - t)

def med(f):
    return statistics.median(f() for _ in range(3))

ref = med(run)
with mutants.MUTANTS["priority-reads-lists"].applied():
    old = med(run)
print(f"reference (flag): {ref:,.0f} rounds/s; old (lists): {old:,.0f} rounds/s; ratio new/old {ref/old:.2f}")
