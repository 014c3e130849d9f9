"""conq: how consumers and queues must coordinate, as executable models, a
reference implementation and a conformance suite.

The distribution has one import root.  The repository's top-level folders are
mapped under it (see ``pyproject.toml``):

* ``conq.model``       -> ``model/``        executable state-machine models and engines
* ``conq.impl``        -> ``impl/``         the reference implementation
* ``conq.conformance`` -> ``conformance/``  where model and implementation meet
* ``conq.spec``        -> ``spec/``         the requirements catalog, the manifest and their loaders

``conq.model`` and ``conq.impl`` never import each other; none of the four imports the command
line (``conq.cli``, ``conq.jobs``, ``conq.report``), which sits on top of them.
"""

from conq.spec import version as _version

#: from the installed distribution's metadata (pyproject.toml's version is the one source)
__version__ = _version()
