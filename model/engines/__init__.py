"""The engines that check a model: ``explorer`` (exhaustive search, networkx liveness),
``stateful`` (hypothesis rule-based state machines), ``symbolic`` (z3 induction and bounded model
checking), and ``registry`` (models by name)."""
