"""conq: how consumers and queues must coordinate, as executable models, a
reference implementation and a conformance suite.

The distribution has one import root.  The repository's top-level folders are
mapped under it (see ``pyproject.toml``):

* ``conq.model``       -> ``model/``        executable state-machine models and engines
* ``conq.impl``        -> ``impl/``         the reference implementation
* ``conq.conformance`` -> ``conformance/``  where model and implementation meet
* ``conq.spec``        -> ``spec/``         the requirements catalog and formats

``conq.model`` and ``conq.impl`` never import each other.
"""

__version__ = "0.1.0"
