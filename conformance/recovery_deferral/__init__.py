"""Conformance of the recovery-deferral reference implementation (``conq.impl.recovery_deferral``)
to its model: call-level view, in-process driver, golden corpus and mutant catalogue."""

import logging

# The conformance engines make the customer's listeners fail on purpose, and send "up" callbacks
# with no recovery context; the implementation logs each such case as a warning.  Without a handler
# of its own, Python would print every one of them on stderr.
logging.getLogger("conq.impl.recovery_deferral").addHandler(logging.NullHandler())
