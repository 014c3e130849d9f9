"""A model package loaded afresh, with some of its files' code replaced, without touching the disk.

Mutation coverage (model/engines/model_mutation.py) runs hundreds of variants of one model package
in one process; a manifest mismatch is explained by running the package as it was at another git
revision beside today's.  Both need the package's modules loaded again as *new module objects*
under a name of their own (``_conq_isolated_<n>_<package>``), so that the variant's classes,
configuration records, enums and claims are its own and nothing of the installed package (or of
an earlier variant) is shared or changed:

* the package's files are found in its directory as usual; a file named in ``overrides`` is
  compiled from the given syntax tree or source text instead (with the real file's name, so a
  traceback points at the real file and line);
* intra-package imports are relative in every model package (``from .state import ...``), so they
  resolve inside the copy; everything else (``conq.model.kernel``, the engines) is the one installed;
* :meth:`IsolatedPackage.close` drops the copy's modules from ``sys.modules``.

Compiled code of unchanged files is cached per process (code objects are immutable; the module
objects are always new).
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.util
import itertools
import sys
import threading
from pathlib import Path
from typing import Any

_counter = itertools.count()
_lock = threading.Lock()
_CODE: dict[tuple[str, Any], Any] = {}


class _Loader(importlib.abc.Loader):
    def __init__(self, path: Path, override: Any):
        self.path = path
        self.override = override

    def create_module(self, spec):
        return None  # the default module object

    def exec_module(self, module) -> None:
        if self.override is None:
            stamp = (str(self.path), self.path.stat().st_mtime)
            code = _CODE.get(stamp)
            if code is None:
                code = _CODE[stamp] = compile(self.path.read_text(encoding="utf-8"), str(self.path), "exec")
        elif isinstance(self.override, ast.Module):
            code = compile(self.override, str(self.path), "exec")
        else:  # a text: the same text compiles to the same code (a run's snapshot of the package)
            key = (str(self.path), self.override)
            code = _CODE.get(key)
            if code is None:
                if len(_CODE) > 256:
                    _CODE.clear()
                code = _CODE[key] = compile(self.override, str(self.path), "exec")
        exec(code, module.__dict__)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the modules of every open isolated package (one finder for the process)."""

    def __init__(self) -> None:
        self.packages: dict[str, tuple[Path, dict[str, Any]]] = {}

    def find_spec(self, fullname, path=None, target=None):
        root, _, rest = fullname.partition(".")
        entry = self.packages.get(root)
        if entry is None:
            return None
        directory, overrides = entry
        if not rest:
            file, search = directory / "__init__.py", [str(directory)]
        else:
            if "." in rest:
                return None  # model packages are flat
            file, search = directory / f"{rest}.py", None
            if not file.is_file() and file.name not in overrides:
                return None
        return importlib.util.spec_from_file_location(
            fullname, file, loader=_Loader(file, overrides.get(file.name)), submodule_search_locations=search)


_FINDER = _Finder()


class IsolatedPackage:
    """The model package in ``directory`` loaded as new modules; ``overrides`` maps a file name of
    the package (``"model.py"``) to the syntax tree or source text to run instead of the file's.
    Use as a context manager, or call :meth:`close`."""

    def __init__(self, directory: Path, overrides: dict[str, Any] | None = None):
        self.directory = Path(directory)
        self.overrides = dict(overrides or {})
        self.name = f"_conq_isolated_{next(_counter)}_{self.directory.name}"
        with _lock:
            if _FINDER not in sys.meta_path:
                sys.meta_path.insert(0, _FINDER)
            _FINDER.packages[self.name] = (self.directory, self.overrides)
        self.module = importlib.import_module(self.name)

    def get(self, attribute: str) -> Any:
        """An attribute of the package (``ConsumerListsModel``), or of one of its modules
        (``"model:ConsumerListsModel"``)."""
        mod, _, attr = attribute.rpartition(":")
        module = importlib.import_module(f"{self.name}.{mod}") if mod else self.module
        return getattr(module, attr)

    def close(self) -> None:
        with _lock:
            _FINDER.packages.pop(self.name, None)
            for k in [k for k in sys.modules if k == self.name or k.startswith(self.name + ".")]:
                del sys.modules[k]

    def __enter__(self) -> "IsolatedPackage":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def package_of(target: str) -> tuple[Path, str]:
    """(directory, class name) of a registry target ``package:Class`` (a shipped model package)."""
    mod, _, cls = target.partition(":")
    spec = importlib.util.find_spec(mod)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"{target}: not a model package (a package directory with the model's modules)")
    return Path(list(spec.submodule_search_locations)[0]), cls
