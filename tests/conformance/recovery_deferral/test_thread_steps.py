"""Issue 35: the recovery-deferral thread level (conformance/recovery_deferral/thread_steps.py): the
view undoes the call level's one composition (a worker's take and the waiting feed thread's
hand-off), and the reference, under a scheduler that holds a woken feed thread at its wake-up point,
conforms to it on every thread-level configuration, probes included."""

from __future__ import annotations

import pytest

from conq.conformance.adapters import InProcess
from conq.conformance.recovery_deferral import thread_steps as ts
from conq.conformance.recovery_deferral.calls import RecoveryDeferralCalls
from conq.conformance.thread_level import count_sequences, sequences

#: recover both producers, feed producer 0's two events and producer 1's first (reference: queue 0
#: is full after the first event of match 0; producer 1's event of match 0 waits for room on it)
BLOCKING = [("recover", 0), ("recover", 1), ("feed", 0), ("feed", 1)]


def _after(model, actions):
    states = list(model.init_states())
    for a in actions:
        states = [t for s in states for o, t in model.step(s, a)]
    return states


def test_a_take_that_makes_room_does_not_finish_the_waiting_hand_off():
    thread = ts.thread_model("reference")
    (s,) = [s for s in _after(thread, BLOCKING) if s[1] is not None and s[1][3] == 1]  # counted before waiting
    assert s[1][2] == 0  # the feed thread waits on queue 0
    assert ("step", "feed", 0) not in thread.actions(s)  # no room yet: its step is not enabled
    ((obs, woken),) = thread.step(s, ("step", "worker", 0))
    assert obs == (("run", 0), ("listener", 0)) and woken[1] == s[1]  # the take alone: still waiting
    assert thread.observe(woken)["feed_blocked"] == 0 and thread.observe(woken)["queues"][0] == []
    ((obs, done),) = thread.step(woken, ("step", "feed", 0))
    assert obs == (("feed", 1), ("queued", 0)) and done[1] is None
    # the call level composes the two into the worker's call
    call = RecoveryDeferralCalls(thread.base)
    ((obs, _),) = call.step(s, ("run", 0))
    assert obs == ("listener", 0, ("queued", 0))


def test_the_view_names_each_step_by_its_thread():
    thread = ts.thread_model("one-queue")
    names = {a[:2] if a[0] == "step" else a[:1] for seq in sequences(thread, 7) for a in seq}
    assert names == {("feed",), ("recover",), ("status",), ("step", "worker"), ("step", "feed"), ("step", "deferred")}
    assert count_sequences(thread, 5) == len(list(sequences(thread, 5)))
    with pytest.raises(ValueError, match="only the reference switches"):
        ts.thread_model("reference", {"on_queue_full": "drop"})
    with pytest.raises(ValueError, match="no thread-level configuration 'legacy'"):
        ts.thread_model("legacy")


def test_the_feed_thread_waits_with_a_late_recoverys_event_at_thread_level():
    """Issue 32 at the thread level: the feed thread waits with producer 0's first event of its second
    recovery (not initiated yet); the worker's take that makes room wakes it, and until its own step the
    event still holds the up back; the reference conforms, snapshots on."""
    from conq.conformance.adapters import REJECTED
    from conq.conformance.checker import Checker

    model = ts.thread_model("re-recovery", {"late_initiation": True})
    w0, w1, feed, d00 = ("step", "worker", 0), ("step", "worker", 1), ("step", "feed", 0), ("step", "deferred", 0, 0)
    actions = [("recover", 0), ("feed", 0), w0, ("recover", 1), ("feed", 1), ("feed", 1), ("status", 0, 0),
               ("feed", 0), d00, ("status", 0, 0), ("recover", 0), w1, ("status", 0, 0), feed, ("status", 0, 0),
               w1, d00, w1, w1, d00]
    checker = Checker(model, InProcess(ts.ThreadStepsDriver), snapshots=True)
    try:
        run = checker.replay(actions)
    finally:
        checker.impl.close()
    assert run.ok, run.divergence.describe()
    assert run.observations[7:] == [
        (("feed", 0), ("blocked", 1, 1)), (("poll", 0, 0), "superseded"), REJECTED,
        (("recover", 0), "forwarded-late"), (("run", 1), ("listener", 3)), REJECTED, (("feed", 0), ("queued", 1)),
        (("status", 0, 0), "deferred"), (("done", 1), "completed"), (("poll", 0, 0), 1), (("run", 1), ("listener", 1)),
        (("done", 1), "completed"), (("poll", 0, 0), "delivered")]


@pytest.mark.parametrize("config", sorted(ts.THREAD_CONFIGS))
def test_the_reference_conforms_at_thread_level(config):
    r = ts.check_threads(InProcess(ts.ThreadStepsDriver), config, walks=12, length=30, depth=5, probe=0.1)
    assert r.ok, r.describe()
    assert r.exhaustive == r.exhaustive_total > 20 and r.to_json()["exhaustive"] == {"traces": r.exhaustive, "complete": True}


def test_the_thread_level_reference_section_lists_every_step():
    text = "\n".join(ts.reference_section())
    for request in ('["step", "worker", q]', '["step", "feed", 0]', '["step", "deferred", p, k]'):
        assert request in text
    assert "(never reached)" not in text
    for name in ts.THREAD_CONFIGS:
        assert f"\n{name}: " in text


def test_the_reference_port_serves_the_thread_level_over_stdio():
    # the system's registry wires it: `init` with level thread, resets between traces, one port
    import sys

    from conq.conformance.recovery_deferral import thread_steps

    impl = thread_steps.thread_impl(f"stdio:{sys.executable} -m conq.conformance.port")
    r = ts.check_threads(impl, "one-queue", walks=6, length=25, probe=0.1)
    assert r.ok and r.walks == 6 and r.steps > 60, r.describe()
