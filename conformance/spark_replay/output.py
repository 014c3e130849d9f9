"""Publishing the replay's output folder, the one way conq writes every output folder
(``conformance/output_folder.py``): a fresh sibling of ``--out`` marked as conq's, renamed into place
at the end, so ``--out`` only ever holds a complete output; a folder holding anything conq did not
write is refused before any work, and never deleted; a lock makes a second concurrent run into the
same folder exit 2; what dead runs left beside it is removed.  The upstream campaign's Spark job
(conformance/ordered_consumption/upstream/spark_campaign.py) writes its folder the same way.
"""

from __future__ import annotations

from pathlib import Path

from ..output_folder import MARKER, OutputFolder
from ..output_folder import output_problem as _output_problem
from .params import ReplayError

__all__ = ["MARKER", "output_problem", "replay_folder", "resolve_output"]


def output_problem(out: Path) -> str | None:
    """None when conq may write (replace) the output folder ``out``; else why not."""
    return _output_problem(out, "conq replay")


def replay_folder(out: str | Path, command: str = "conq replay") -> OutputFolder:
    """The output folder of a replay (replaced as a whole at the end); its refusals are
    :class:`ReplayError`."""
    return OutputFolder(out, command=command, option="--out", replace=True, error=ReplayError)


def resolve_output(out: str | Path) -> Path:
    """The absolute output folder, or :class:`ReplayError` when conq may not write it.  Touches nothing."""
    return replay_folder(out).check()
