"""Consumer lists at the conformance layer: ``calls`` (the call-level view of the thread-step
model), ``thread_steps`` (the thread-step level), ``driver`` (the reference implementation driven
in-process, one call at a time), ``mutants`` (the mutant catalogue and the engines that must kill
each), ``suite_configs`` (the configurations the suite drives), ``port_reference`` (what
spec/ports/consumer-lists.md declares), ``build_corpus`` and ``corpus/`` (the golden traces).

:data:`SYSTEM` declares all of it to the generic layers (conformance/systems.py)."""

from conq.conformance.systems import Replay, System

SYSTEM = System(
    name="consumer-lists",
    package=__name__,
    driver=".driver:ConsumerListsDriver",
    call_view=".calls:ConsumerListsCalls",
    thread_level=".thread_steps",
    mutants=".mutants:CATALOGUE",
    mutant_driver=".mutants:mutant_driver",
    corpus="corpus",
    conformance_configs=".suite_configs:CONFORMANCE_CONFIGS",
    replays=(
        Replay("reference", 4096, 30, "replay"),
        # the other actors of issue 16 (deletes / expiry, reject, a shared group, held) all on
        Replay("all-actors", 512, 30, "replay-all-actors"),
    ),
    # measured on the project's 2-core machine (spec/replay-coverage.md): no coverage truth for these
    beyond_explorer={
        ("reference", '{"consumers": [[2, true], [1, true], [1, false], [1, true]], "env_budget": -1}'):
            "a fourth consumer and an unbounded environment: the explorer stopped at its 200,000-state bound "
            "(221 s, 703 MB) with the frontier still open",
    },
    thread_beyond_explorer={
        ("credit-same-priority", '{"messages": 3, "consumers": [[1, true], [1, true], [1, true]]}'):
            "three acquirers of one priority, three messages, credit that runs out and one grant, at thread level: "
            "the explorer stopped at its 200,000-state bound (8 s, 391 MB) with the frontier still open "
            "(two acquirers and three messages complete at 19,322)",
    },
    port_reference=".port_reference:DECLARED",
)
