"""Conformance of the recovery-deferral reference implementation (``conq.impl.recovery_deferral``)
to its model: call-level view, thread-step level (``thread_steps``), in-process driver, golden corpus,
mutant catalogue and port reference, declared to the generic layers by :data:`SYSTEM` (conformance/systems.py)."""

import logging

from conq.conformance.systems import Replay, System

# The conformance engines make the customer's listeners fail on purpose, and send "up" callbacks
# with no recovery context; the implementation logs each such case as a warning.  Without a handler
# of its own, Python would print every one of them on stderr.
logging.getLogger("conq.impl.recovery_deferral").addHandler(logging.NullHandler())

SYSTEM = System(
    name="recovery-deferral",
    package=__name__,
    driver=".driver:RecoveryDeferralDriver",
    call_view=".calls:RecoveryDeferralCalls",
    thread_level=".thread_steps",
    mutants=".mutants:CATALOGUE",
    mutant_driver=".mutants:mutant_driver",
    corpus="corpus",
    conformance_configs=".mutants:TRACE_CONFIGS",
    replays=(Replay("reference-one-queue", 640, 24, "replay-recovery-deferral"),),
    beyond_explorer={
        ("reference", '{"queue_size": 2, "recoveries": 6}'):
            "six recoveries per producer and queues of two: the explorer stopped at its 200,000-state bound "
            "(261 s, 793 MB) with the frontier still open",
    },
    port_reference=".port_reference:DECLARED",
)
