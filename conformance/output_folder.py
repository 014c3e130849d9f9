"""The one way conq writes an output folder (issue 33: every ``--out``, ``--report`` and bench output).

What a run may do to a folder it is told to write (``OUT``):

* **Only conq's.**  ``OUT`` must not exist, be empty, or hold nothing but what conq wrote there: its
  marker file (:data:`MARKER`) lists every entry a conq run wrote, and a sub-folder with a marker of its
  own is another conq output nested in it (a replay inside ``conq run``'s folder).  Anything else is
  refused before any work (:class:`OutputRefused`, exit 2) and never touched.
* **Never half-written.**  The run writes into a fresh staging folder beside ``OUT``
  (``OUT.partial-XXXX``, marked as conq's with the writing process's id) and publishes at the end:
  ``replace`` swaps the whole folder in (the previous output is moved aside, the staging folder renamed,
  the old one removed: ``conq replay``, ``conq upstream``, where a stale table or trace would mislead);
  ``merge`` moves each new file over its namesake and keeps the other outputs of earlier conq runs
  (``conq check --report``, ``conq run --out``, bench outputs, which several commands share).  SIGTERM
  and SIGINT are held back while the folder changes, so a signal never leaves it half-swapped.
* **No link followed, no file clobbered.**  Every file is created exclusively (``O_CREAT | O_EXCL |
  O_NOFOLLOW``) under a fresh name, then renamed over its target, which replaces a link instead of
  writing through it (:func:`write_atomic`).
* **One run at a time.**  A lock (``flock`` on ``.OUT.conq-lock`` beside ``OUT``, released by the kernel
  if the run dies) makes a second concurrent run into the same folder exit 2 instead of racing it.
* **Nothing left by dead runs.**  Holding the lock, a run removes the staging and set-aside folders of
  earlier runs into ``OUT`` whose process is gone (``kill -9`` mid-run): they are conq's by their marker
  and by name, and no live run can own them.

:class:`OutputFolder` does all of it; ``conformance/spark_replay/output.py`` keeps the replay's names
over it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any, Iterator

__all__ = ["MARKER", "OutputFolder", "OutputRefused", "output_problem", "write_atomic"]

#: marks a folder written by conq, and lists what conq wrote there
MARKER = ".conq-output.json"
#: the lock beside an output folder ``OUT`` is ``.OUT`` + this
LOCK_SUFFIX = ".conq-lock"


class OutputRefused(Exception):
    """conq may not write the output folder it was given (bad usage: exit 2); nothing was changed."""


# ------------------------------------------------------------------------------------------ files
def write_atomic(path: Path, data: str | bytes) -> Path:
    """Write ``path`` whole or not at all, never through a link: the bytes go to a fresh file created
    exclusively without following links (``O_EXCL | O_NOFOLLOW``), which is then renamed over
    ``path`` (a link there is replaced, not followed)."""
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def _walk(directory: Path) -> tuple[set[str], set[str]]:
    """Every file and folder under ``directory`` (relative, POSIX separators; links not followed),
    leaving out what is inside a nested conq output (a sub-folder with a marker of its own); and
    those nested outputs."""
    found: set[str] = set()
    nested: set[str] = set()
    for root, dirs, files in os.walk(directory):
        here = Path(root)
        rel = here.relative_to(directory)
        for name in files:
            if name.startswith(".") and name.endswith(LOCK_SUFFIX) and not (here / name).is_symlink():
                nested.add((rel / name).as_posix())  # the lock of a nested conq output (held, or left by kill -9)
                continue
            found.add((rel / name).as_posix())
        for name in list(dirs):
            found.add((rel / name).as_posix())
            sub = here / name
            if not sub.is_symlink() and (sub / MARKER).is_file():
                dirs.remove(name)  # a conq output of its own: its marker speaks for it
                nested.add((rel / name).as_posix())
    return found, nested


def _entries(directory: Path) -> set[str]:
    return _walk(directory)[0]


def _read_marker(directory: Path) -> dict:
    return json.loads((directory / MARKER).read_text(encoding="utf-8"))


def _write_marker(directory: Path, command: str, complete: bool, entries: set[str] | None = None) -> None:
    from conq.spec import version

    listed = sorted((entries if entries is not None else _entries(directory)) - {MARKER})
    write_atomic(directory / MARKER, json.dumps({"written_by": command, "version": version(), "complete": complete,
                                                 "pid": os.getpid(), "entries": listed}, indent=1))


def output_problem(out: Path, what: str = "conq") -> str | None:
    """None when conq may write the output folder ``out``: it does not exist, is empty, or holds
    nothing but what conq wrote (its marker's entries, and nested conq outputs).  Else why not."""
    if not out.exists():
        return f"{out} is a broken symbolic link" if out.is_symlink() else None
    if not out.is_dir():
        return f"{out} exists and is not a folder"
    try:
        found, nested = _walk(out)
    except OSError as e:
        return f"{out} cannot be read ({e})"
    # a folder on the way to a nested conq output ("a/b" for "a/b/c") is conq's too
    found -= nested | {p.as_posix() for n in nested for p in Path(n).parents if p.as_posix() != "."}
    if not found:
        return None
    if not (out / MARKER).is_file():
        return (f"{out} is not empty and is not the output of a previous {what} run (it has no {MARKER}); "
                "conq never deletes or overwrites files it did not write")
    try:
        listed = set(_read_marker(out)["entries"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"{out} has an unreadable {MARKER} ({e})"
    extra = sorted(found - listed - {MARKER})
    if extra:
        shown = ", ".join(extra[:3]) + (f" and {len(extra) - 3} more" if len(extra) > 3 else "")
        return (f"{out} is a previous {what} output but also holds {len(extra)} file(s) conq did not write "
                f"({shown}); conq never deletes or overwrites files it did not write")
    return None


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGTERM and SIGINT wait (and are delivered right after) while the folder changes."""
    blockable = hasattr(signal, "pthread_sigmask")
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT}) if blockable else None
    try:
        yield
    finally:
        if blockable:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: not ours to judge
    return True


# ------------------------------------------------------------------------------------------ the folder
class OutputFolder:
    """An output folder written the one way (module docstring).

    ``with OutputFolder(out, command="conq check", option="--report", replace=False) as folder:``
    checks ``out`` (refused: :class:`OutputRefused`), takes the lock, removes what dead runs left,
    and makes ``folder.staging``, where the run writes (``folder.write(name, data)`` or its own
    writers given ``folder.staging``); leaving the block without an exception publishes it into
    ``folder.final``, with one abandons it.  ``check()`` alone resolves and checks, touching nothing
    (a command calls it before any work)."""

    def __init__(self, out: str | os.PathLike, *, command: str, option: str = "--out", replace: bool = True,
                 error: type[Exception] = OutputRefused) -> None:
        self.given = str(out)
        self.command = command
        self.option = option
        self.replace = replace
        self.error = error
        self.final: Path | None = None
        self.staging: Path | None = None
        self._lock_fd: int | None = None
        self._lock_path: Path | None = None
        #: set by a failure that must leave the staging folder in place (the output changed meanwhile)
        self.keep_staging = False

    def _refuse(self, message: str) -> Exception:
        err = self.error(f"{self.option} {self.given}: {message}")
        return err

    # -------------------------------------------------------------- check (touches nothing)
    def check(self) -> Path:
        """The absolute output folder (``a/b/..`` is ``a``, links resolved), or the refusal."""
        try:
            final = Path(self.given).expanduser().resolve()
        except (OSError, RuntimeError) as e:
            raise self._refuse(str(e)) from None
        if final.parent == final:
            raise self._refuse("the output folder cannot be the root folder")
        cwd = Path.cwd().resolve()
        if final == cwd or final in cwd.parents:
            raise self._refuse(f"{final} holds the current folder; choose another")
        problem = output_problem(final, self.command)
        if problem:
            raise self._refuse(f"refusing to write there: {problem}. Nothing was changed; choose another {self.option}")
        ancestor = final.parent
        while not ancestor.exists():
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            raise self._refuse(f"{ancestor} is a file, not a folder")
        if not os.access(ancestor, os.W_OK | os.X_OK):
            raise self._refuse(f"cannot create anything in {ancestor} (permission denied)")
        self.final = final
        return final

    # -------------------------------------------------------------- open: lock, clean, stage
    def open(self) -> OutputFolder:
        final = self.final or self.check()
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise self._refuse(f"cannot create the output folder: {e}") from None
        self._lock(final)
        try:
            problem = output_problem(final, self.command)  # again, now that no other conq run can change it
            if problem:
                raise self._refuse(f"refusing to write there: {problem}. Nothing was changed")
            self._remove_dead_runs(final)
            self.staging = Path(tempfile.mkdtemp(dir=final.parent, prefix=f"{final.name}.partial-"))
            _write_marker(self.staging, self.command, complete=False, entries=set())
        except BaseException:
            self.abandon()
            raise
        return self

    def _lock(self, final: Path) -> None:
        path = final.parent / f".{final.name}{LOCK_SUFFIX}"
        for _ in range(5):  # the file may be removed by the run that held it, between our open and flock
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
            except OSError as e:
                raise self._refuse(f"cannot take the lock {path}: {e.strerror or e}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
                os.close(fd)
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise self._refuse(f"another conq run is writing there (process {holder or '?'}, lock {path}); "
                                       "wait for it, or choose another folder") from None
                raise self._refuse(f"cannot take the lock {path}: {e.strerror or e}") from None
            try:
                same = os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
                self._lock_fd, self._lock_path = fd, path
                return
            os.close(fd)
        raise self._refuse(f"cannot take the lock {path}: it keeps being replaced")

    def _unlock(self) -> None:
        fd, path = self._lock_fd, self._lock_path
        self._lock_fd = self._lock_path = None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            if os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                os.unlink(path)  # while still holding it: a run waiting on this file sees it replaced
        os.close(fd)

    def _remove_dead_runs(self, final: Path) -> None:
        """Staging folders (``OUT.partial-*``) and set-aside outputs (``.OUT.old-*``) of runs into
        ``final`` whose process is gone: conq's by name and marker; with the lock held, no live run
        owns them."""
        for p in list(final.parent.glob(f"{final.name}.partial-*")) + list(final.parent.glob(f".{final.name}.old-*")):
            if p.is_symlink() or not p.is_dir():
                continue
            marked = p / MARKER if p.name.startswith(final.name) else p / final.name / MARKER
            try:
                owner = _read_marker(marked.parent).get("pid")
            except (OSError, ValueError, AttributeError):
                continue  # not recognisably conq's: left alone
            if owner != os.getpid() and not _alive(owner):
                shutil.rmtree(p, ignore_errors=True)

    # -------------------------------------------------------------- write, publish, abandon
    def path(self, name: str) -> Path:
        """Where file ``name`` (relative, inside the folder) is staged."""
        rel = Path(name)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise ValueError(f"{name!r} is not a name inside the output folder")
        return self.staging / rel

    def write(self, name: str, data: str | bytes) -> Path:
        """Stage file ``name`` (see :func:`write_atomic`); its folders are made as needed."""
        target = self.path(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        return write_atomic(target, data)

    def commit(self) -> Path:
        """Publish the staged output into the final folder (``replace`` or ``merge``), release the lock."""
        staging, final = self.staging, self.final
        try:
            with _signals_held():
                problem = output_problem(final, self.command)
                if problem:
                    self.keep_staging = True
                    raise self.error(f"{self.option} {final} changed during the run ({problem}); nothing there was "
                                     f"changed, and the new output was left in {staging}")
                if self.replace:
                    self._swap(staging, final)
                else:
                    self._merge(staging, final)
            self.staging = None
            return final
        finally:
            self.abandon()

    def _swap(self, staging: Path, final: Path) -> None:
        _write_marker(staging, self.command, complete=True)
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

    def _merge(self, staging: Path, final: Path) -> None:
        new = _entries(staging) - {MARKER}
        old = set(_read_marker(final)["entries"]) if (final / MARKER).is_file() else set()
        final.mkdir(exist_ok=True)
        for rel in sorted(new):
            src, dst = staging / rel, final / rel
            if src.is_dir() and not src.is_symlink():
                if dst.is_symlink() or (dst.exists() and not dst.is_dir()):
                    raise self.error(f"{self.option} {final}: {rel} is in the way (not a folder)")
                dst.mkdir(exist_ok=True)
        for rel in sorted(new):
            src = staging / rel
            if src.is_symlink() or not src.is_dir():
                os.replace(src, final / rel)  # a link at the target is replaced, never followed
        _write_marker(final, self.command, complete=True, entries=old | new)
        shutil.rmtree(staging, ignore_errors=True)

    def abandon(self) -> None:
        """Remove the staging folder (unless a failure asked to keep it) and release the lock."""
        staging, self.staging = self.staging, None
        if staging is not None and not self.keep_staging:
            shutil.rmtree(staging, ignore_errors=True)
        self._unlock()

    def __enter__(self) -> OutputFolder:
        return self if self._lock_fd is not None else self.open()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            if getattr(exc, "keep_staging", False):
                self.keep_staging = True
            self.abandon()
