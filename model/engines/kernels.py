"""The level search's compiled kernels (``_search.c``, built when conq is installed: see
keyset.py for why they are compiled), imported once for vector.py and keyset.py.

On a Spark executor that has no conq installed, conq comes from the package zip the driver shipped
(conformance/spark_replay/session.py, ``package_zip``); Python cannot import a compiled module
from a zip, so the zip carries the driver's build of it as a file, and it is loaded from a copy
written for the purpose and unlinked as soon as it is loaded (the loaded library stays mapped).  It
fits an executor with the driver's Python version and platform, which Spark needs of the zip's
bytecode too; on any other the error says to install conq there."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import tempfile
import zipimport
from types import ModuleType

_NAME = "conq.model.engines._search"


def _from_zip(package: ModuleType, error: ImportError) -> ModuleType:
    loader = getattr(package, "__loader__", None)
    if not isinstance(loader, zipimport.zipimporter):
        raise error
    folder = os.path.dirname(package.__file__)  # '<zip>/conq/model/engines'
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        try:
            data = loader.get_data(os.path.join(folder, "_search" + suffix))
        except OSError:
            continue
        fd, path = tempfile.mkstemp(prefix="conq-search-", suffix=suffix)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            spec = importlib.util.spec_from_file_location(_NAME, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        finally:
            os.unlink(path)
        sys.modules[_NAME] = module
        return module
    raise ImportError(f"conq's compiled kernels ({_NAME}) are not in the package zip {loader.archive} for this "
                      f"Python ({', '.join(importlib.machinery.EXTENSION_SUFFIXES)}): install conq on this machine "
                      "(pip install, with a C compiler and Python's headers)") from error


def _load() -> ModuleType:
    try:
        from conq.model.engines import _search
    except ImportError as e:
        import conq.model.engines as package

        return _from_zip(package, e)
    return _search


search = _load()
