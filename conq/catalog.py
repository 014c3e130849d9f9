"""Moved to :mod:`conq.spec.catalog` (issue 30: the layers under the command line must not import
it).  This name stays for callers: it is that very module, so a patch of one is a patch of both."""

import sys

from conq.spec import catalog

sys.modules[__name__] = catalog
