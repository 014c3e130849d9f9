"""Consumer lists (Apache Qpid Broker-J, seeds 000/002/003): the queue-side consumer manager.

``state`` is the vocabulary (layout, node states, configuration record), ``model`` the
executable model (one function per thread step), ``properties`` its named claims, ``configs``
its named configurations, ``z3_encoding`` the symbolic encoding for ``conq prove``.
"""

from .model import ConsumerListsModel
from .state import ConsumerListsConfig, PullRule

__all__ = ["ConsumerListsConfig", "ConsumerListsModel", "PullRule"]
