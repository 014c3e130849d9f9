"""The configurations the consumer-lists conformance suite drives: one list for the golden corpus
(build_corpus.py), the mutation engines (mutants.py) and the port reference (the system's
``conformance_configs``).  A module of its own so that neither of the first two imports the other
for it."""

from __future__ import annotations

#: the configurations of the original actors (publishers, consumers, credit, flow, held, release):
#: every port implements these (a port may refuse the others with error 14)
PASS_CONFIGS = ("small", "reference", "held", "dynamic", "reasons", "same-priority")
#: the other actors (issue 16): deletes / TTL expiry, reject, both message-group policies, all together
ACTOR_CONFIGS = ("expiry", "reject", "groups-shared", "groups-assigned", "all-actors", "all-actors-assigned")
#: environment steps (credit, suspend/resume, release, removal) per run
ENV_BUDGET = 2
#: what the conformance suite drives, each with the environment budget
CONFORMANCE_CONFIGS = tuple((name, {"env_budget": ENV_BUDGET}) for name in PASS_CONFIGS + ACTOR_CONFIGS)
