"""Conformance of the ordered-consumption reference implementation (``conq.impl.ordered_consumption``)
to its model: call-level view, in-process driver, golden corpus and mutant catalogue."""

import logging

# The conformance engines make listeners fail and settles be rejected on purpose; the implementation
# logs such cases.  Without a handler of its own, Python would print every one of them on stderr.
logging.getLogger("conq.impl.ordered_consumption").addHandler(logging.NullHandler())
