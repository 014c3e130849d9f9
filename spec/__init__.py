"""conq.spec: the specification as data, and its loaders.

The data: the requirements catalog (``requirements/*.toml``), the manifest of expected
model-checking results (``manifest/*.toml``), the JSON schemas (``schemas/``), the generated port
references (``ports/``) and the specs (``*.md``).  The loaders: :mod:`.catalog` (the requirements
and the checks that cover them) and :mod:`.manifest` (the expected results).  They live here, not
in the command-line package, so that ``model/``, ``impl/`` and ``conformance/`` never import the
command line; every file is found through :mod:`importlib.resources`, wherever conq is installed.
"""

from __future__ import annotations

from importlib.resources import files

DISTRIBUTION = "conq"


def data(*parts: str, package: str = __name__):
    """A data file or folder of ``package`` (this one by default) as an
    :class:`importlib.resources.abc.Traversable`: a :class:`pathlib.Path` where conq is installed
    on the file system, a ``zipfile.Path`` in the package zip a Spark executor imports."""
    return files(package).joinpath(*parts)


def version() -> str:
    """The installed distribution's version (its metadata); ``0+unknown`` when conq runs from
    files that were not installed (the package zip a Spark executor imports)."""
    from importlib.metadata import PackageNotFoundError, version as dist_version

    try:
        return dist_version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0+unknown"
