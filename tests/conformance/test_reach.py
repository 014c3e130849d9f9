"""Every public method of every reference implementation is reached by some engine's driver, or
documented as outside the model with the reason (issue 32; ``conq.conformance.reach``).

Per system, the engines' drivers run briefly under a profiler (``conformance/<system>/reach.py``
``ENGINES``), and the public methods of ``conq.impl.<system>`` (introspection) are listed with the
engines that called them; the rest must be named in ``OUTSIDE`` with a reason, and ``OUTSIDE`` must
not name a method that no longer exists.  Counts, not times: a few walks and runs per engine."""

from __future__ import annotations

import importlib

import pytest

from conq.conformance import reach

SYSTEMS = ["consumer_lists", "ordered_consumption", "recovery_deferral"]


@pytest.mark.parametrize("system", SYSTEMS)
def test_every_public_method_is_reached_by_an_engine_or_documented_outside_the_model(system):
    decl = importlib.import_module(f"conq.conformance.{system}.reach")
    r = reach.report(decl)
    listing = "\n".join(r.lines())
    assert not r.gaps, f"public methods no engine reaches and OUTSIDE does not explain:\n{listing}"
    assert not r.stale, f"OUTSIDE names no public method: {r.stale}"
    assert all(reason.strip() for reason in decl.OUTSIDE.values())
    reached = [m for m, engines in r.by_method.items() if engines]
    assert len(reached) > len(r.outside) / 2, listing  # the engines reach the implementation, not a few corners
    # the lifecycle is driven as users drive it (issue 32: the ordered-consumption driver re-implemented start)
    lifecycle = {"ordered_consumption": ["push_consumer.py:PushConsumer.start", "push_consumer.py:PushConsumer.shutdown",
                                         "simple_consumer.py:SimpleConsumer.start", "producer.py:Producer.close"],
                 "recovery_deferral": ["listener.py:ConcurrentListener.close", "listener.py:ConcurrentListener.wrap_feed_listener"],
                 "consumer_lists": ["queue.py:Queue.delete_message", "queue.py:Queue.remove_consumer"]}[system]
    assert all(r.by_method[m] for m in lifecycle), {m: r.by_method[m] for m in lifecycle}


def test_a_method_nobody_reaches_is_a_gap():
    class Decl:
        IMPLEMENTATION = "conq.impl.recovery_deferral"
        ENGINES = {"nothing": lambda: None}
        OUTSIDE = {"events.py:*": "values only", "no-such.py:X.y": "stale"}

    r = reach.report(Decl)
    assert "tracker.py:TaskLifecycleTracker.pending" in r.gaps
    assert r.stale == ["no-such.py:X.y"] and not any(g.startswith("events.py:") for g in r.gaps)
