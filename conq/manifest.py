"""Moved to :mod:`conq.spec.manifest` (issue 30: the layers under the command line must not import
it).  This name stays for callers: it is that very module, so a patch of one is a patch of both."""

import sys

from conq.spec import manifest

sys.modules[__name__] = manifest
