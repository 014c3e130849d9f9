"""Consumer lists at the conformance layer: ``calls`` (the call-level view of the thread-step
model), ``driver`` (the reference implementation driven in-process, one call at a time),
``mutants`` (the mutant catalogue and the engines that must kill each), ``build_corpus`` and
``corpus/`` (the golden traces)."""
