"""Publishing the output folder: a replay writes into a fresh sibling of ``--out`` marked as conq's
(:data:`MARKER` lists what conq wrote) and renames it into place at the end, so ``--out`` only ever
holds a complete output; a folder holding anything conq did not write is refused before any work,
and never deleted.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from .params import ReplayError


#: marks a folder written by conq replay, and lists what conq wrote there
MARKER = ".conq-output.json"


def _entries(directory: Path) -> set[str]:
    """Every file and folder under ``directory`` (relative, POSIX separators; links not followed)."""
    found: set[str] = set()
    for root, dirs, files in os.walk(directory):
        rel = Path(root).relative_to(directory)
        for name in dirs + files:
            found.add((rel / name).as_posix())
    return found


def _write_marker(directory: Path, complete: bool) -> None:
    from conq.spec import version

    entries = sorted(_entries(directory) - {MARKER})
    (directory / MARKER).write_text(json.dumps(
        {"written_by": "conq replay", "version": version(), "complete": complete, "entries": entries}, indent=1
    ))


def output_problem(out: Path) -> str | None:
    """None when conq may write the output folder ``out`` (replacing it as a
    whole): it does not exist, is empty, or is a previous conq replay output
    that holds nothing but what conq wrote.  Else why not."""
    if not out.exists():
        return f"{out} is a broken symbolic link" if out.is_symlink() else None
    if not out.is_dir():
        return f"{out} exists and is not a folder"
    try:
        found = _entries(out)
    except OSError as e:
        return f"{out} cannot be read ({e})"
    if not found:
        return None
    marker = out / MARKER
    if not marker.is_file():
        return (f"{out} is not empty and is not the output of a previous conq replay (it has no {MARKER}); "
                "conq replaces its output folder as a whole and never deletes files it did not write")
    try:
        listed = set(json.loads(marker.read_text())["entries"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"{out} has an unreadable {MARKER} ({e})"
    extra = sorted(found - listed - {MARKER})
    if extra:
        shown = ", ".join(extra[:3]) + (f" and {len(extra) - 3} more" if len(extra) > 3 else "")
        return (f"{out} is a previous conq replay output but also holds {len(extra)} file(s) conq did not write ({shown}); "
                "conq never deletes files it did not write")
    return None


def resolve_output(out: Path) -> Path:
    """The absolute output folder (``a/b/..`` is ``a``, symbolic links resolved),
    or :class:`ReplayError` when conq may not write it.  Touches nothing."""
    given = str(out)
    try:
        final = Path(out).expanduser().resolve()
    except (OSError, RuntimeError) as e:
        raise ReplayError(f"--out {given}: {e}") from None
    if final.parent == final:
        raise ReplayError(f"--out {given}: the output folder cannot be the root folder")
    cwd = Path.cwd().resolve()
    if final == cwd or final in cwd.parents:
        raise ReplayError(f"--out {given}: {final} holds the current folder; the output folder is replaced as a whole, choose another")
    problem = output_problem(final)
    if problem:
        raise ReplayError(f"--out {given}: refusing to write there: {problem}. Nothing was changed; choose another --out")
    ancestor = final.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ReplayError(f"--out {given}: {ancestor} is a file, not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ReplayError(f"--out {given}: cannot create anything in {ancestor} (permission denied)")
    return final


def _make_staging(final: Path) -> Path:
    """A fresh folder next to ``final``, marked as conq's, for the run to write into."""
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=final.parent, prefix=f"{final.name}.partial-"))
    except OSError as e:
        raise ReplayError(f"--out {final}: cannot create the output folder: {e}") from None
    try:
        _write_marker(staging, complete=False)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


class _OutputChanged(ReplayError):
    keep_staging = True


def _publish(staging: Path, final: Path) -> None:
    """Put the complete output in place: the previous output (checked again: it
    must still be conq's alone) is moved aside, the staging folder renamed to
    ``final``, then the previous output removed.  SIGTERM and SIGINT are held
    back meanwhile (delivered right after), so a signal never leaves a half-swapped
    folder."""
    import signal

    blockable = hasattr(signal, "pthread_sigmask")
    if blockable:
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    try:
        problem = output_problem(final)
        if problem:
            raise _OutputChanged(f"--out {final} changed during the run ({problem}); nothing there was changed, "
                                 f"and the new output was left in {staging}")
        trash = None
        if final.exists():
            trash = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.old-"))
            os.rename(final, trash / final.name)
        try:
            os.rename(staging, final)
        except BaseException:
            if trash is not None:
                os.rename(trash / final.name, final)
                shutil.rmtree(trash, ignore_errors=True)
            raise
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)
    finally:
        if blockable:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
