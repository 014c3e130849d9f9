"""The Spark session: Java and the master checked first, a quiet session (the driver JVM's console in
:data:`DRIVER_LOG`), the ``conq`` package zipped and shipped to the executors (with compiled
bytecode beside each module), the session kept for the next replays of the process
(``keep_session=True``), and Spark stopped hard when conq is told to stop.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from conq.spec import data

from .params import ReplayError


def package_zip(directory: Path) -> Path:
    """A zip of the whole ``conq`` package as installed (the mapped folders
    included), to ship to executors."""
    import conq
    import conq.conformance
    import conq.impl
    import conq.model
    import conq.spec

    target = directory / "conq-pkg.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for pkg in (conq, conq.model, conq.impl, conq.conformance, conq.spec):
            root = Path(pkg.__file__).parent
            arc = Path(*pkg.__name__.split("."))
            for f in sorted(root.rglob("*")):
                # (.so: the compiled kernels, carried as a file: model/engines/kernels.py loads them)
                if f.is_file() and "__pycache__" not in f.parts and f.suffix in (".py", ".toml", ".json", ".md", ".properties",
                                                                                 ".so"):
                    rel = f.relative_to(root)
                    if pkg is conq and rel.parts and rel.parts[0] in ("model", "impl", "conformance", "spec"):
                        continue
                    zf.write(f, str(arc / rel))
                    if f.suffix == ".py":
                        _add_pyc(zf, f, str(arc / rel))
    return target


def _add_pyc(zf: zipfile.ZipFile, source: Path, arcname: str) -> None:
    """Put the compiled module next to its source in the zip (``x.pyc`` beside
    ``x.py``, which zipimport looks for first), so every Python worker that
    imports conq from the zip does not compile it again.  An unchecked
    hash-based pyc: valid whatever the zip entries' timestamps; a worker on
    another Python version sees a foreign magic number and compiles the source."""
    import importlib.util
    import marshal

    data = source.read_bytes()
    body = None
    try:  # the driver's own fresh bytecode cache, when there is one: no compiling at all
        raw = Path(importlib.util.cache_from_source(str(source))).read_bytes()
        st = source.stat()
        if (raw[:4] == importlib.util.MAGIC_NUMBER and raw[4:8] == bytes(4)
                and int.from_bytes(raw[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
                and int.from_bytes(raw[12:16], "little") == st.st_size & 0xFFFFFFFF):
            body = raw[16:]
    except (OSError, NotImplementedError, ValueError):
        pass
    if body is None:
        try:
            body = marshal.dumps(compile(data, arcname, "exec", dont_inherit=True))
        except SyntaxError:
            return  # the worker reports it on import, as before
    header = importlib.util.MAGIC_NUMBER + (0b01).to_bytes(4, "little") + importlib.util.source_hash(data)
    zf.writestr(arcname[:-3] + ".pyc", header + body)


def java_problem() -> str | None:
    java = shutil.which("java")
    if java is None and os.environ.get("JAVA_HOME"):
        cand = Path(os.environ["JAVA_HOME"]) / "bin" / "java"
        java = str(cand) if cand.exists() else None
    if java is None:
        return "Spark needs Java 17 or newer and no `java` was found. On Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless"
    import re
    import subprocess

    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"could not run {java} -version: {e}"
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = int(m.group(1)) if m else 0
    if major == 1 and m and m.group(2):
        major = int(m.group(2))
    if major < 17:
        return f"Spark needs Java 17 or newer; {java} is version {major or 'unknown'}. On Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless"
    return None


def master_problem(master: str) -> str | None:
    """Fail fast on a standalone master that cannot be reached (Spark itself
    would retry for a minute before giving up)."""
    if master.startswith("spark://"):
        for hostport in master[len("spark://") :].split(","):
            host, _, port = hostport.rpartition(":")
            try:
                with socket.create_connection((host, int(port)), timeout=5):
                    return None
            except (OSError, ValueError) as e:
                last = f"cannot reach Spark master {hostport}: {e}"
        return last
    if master.startswith(("local", "yarn", "k8s://", "mesos://")):
        return None
    return f"unknown Spark master URL {master!r} (expected local[*], local-cluster[...], spark://HOST:PORT, yarn, k8s://...)"


#: where the Spark JVM's own console output goes (quiet terminal); shown on failure
DRIVER_LOG = Path(tempfile.gettempdir()) / "conq-spark-driver.log"


def spark_session(master: str, app: str = "conq-replay", conf: dict[str, str] | None = None):
    """A quiet SparkSession: the driver JVM's console output goes to
    :data:`DRIVER_LOG` (Spark prints start-up notices there even at level
    ERROR), executors log at ERROR, and conq prints its own progress lines."""
    problem = java_problem() or master_problem(master)
    if problem:
        raise ReplayError(problem)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    log4j = data("log4j2.properties", package=__package__)  # Spark's own logging, quiet (importlib.resources)
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "8",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}",
        "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
        **(conf or {}),
    }
    sconf = SparkConf().setMaster(master).setAppName(app).setAll(list(settings.items()))
    gateway = None
    if SparkContext._gateway is None:  # first session of this process: start the JVM quietly
        log = open(DRIVER_LOG, "ab")
        try:
            gateway = launch_gateway(sconf, popen_kwargs={"stdout": log, "stderr": log})
        except Exception as e:
            raise ReplayError(f"Spark did not start ({e}); its log: {DRIVER_LOG}") from None
        finally:
            log.close()
    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()  # a new master needs a new context
    sc = SparkContext(conf=sconf, gateway=gateway)
    sc.setLogLevel("ERROR")
    return SparkSession(sc)


def _session_key(master: str, conf: dict[str, str] | None) -> str:
    return json.dumps([master, sorted((conf or {}).items())])


#: the Spark session ``run_replay(keep_session=True)`` keeps for the next replays of this process
#: (``conq run``'s replays, ``conq replay --config A --config B``): its context, its key (master and
#: configuration) and the folder of its package zip.  A reused session keeps its Python workers
#: (``spark.python.worker.reuse``), which have conq imported and the model set up: issue 20
#: measured their start-up at most of a small job's cost (spec/replay-coverage.md, "Cost of a job").
_KEPT: dict[str, Any] = {}


def keep(master: str, conf: dict[str, str] | None, spark: Any, tmp: Path) -> None:
    """Keep ``spark`` (and the folder of its package zip) for the next replays of this process with
    the same ``master`` and ``conf``; :func:`close_session` (also at exit) stops it."""
    _KEPT["session"] = {"key": _session_key(master, conf), "spark": spark, "sc": spark.sparkContext, "tmp": tmp}
    _register_exit_hook()


def _kept_session(master: str, conf: dict[str, str] | None) -> dict[str, Any] | None:
    """The kept session when it serves ``master`` and ``conf`` and is still the live context."""
    kept = _KEPT.get("session")
    if kept is None or kept["key"] != _session_key(master, conf):
        return None
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not kept["sc"] or kept["sc"]._jsc is None:
        close_session(stopped=True)  # someone stopped or replaced it
        return None
    return kept


def close_session(stopped: bool = False) -> None:
    """Stop the Spark session kept by ``run_replay(keep_session=True)``, if any, and remove its
    package zip.  ``stopped``: the context is already stopped (or must not be called any more)."""
    kept = _KEPT.pop("session", None)
    if kept is None:
        return
    try:
        if not stopped:
            kept["spark"].stop()
    finally:
        shutil.rmtree(kept["tmp"], ignore_errors=True)


_EXIT_HOOK: list[bool] = []


def _register_exit_hook() -> None:
    if not _EXIT_HOOK:
        import atexit

        atexit.register(close_session)
        _EXIT_HOOK.append(True)


def _stop_spark(hard: bool) -> None:
    """Stop Spark, so that no task writes into the staging folder any more.
    ``hard`` (conq is being terminated or interrupted): end the JVM itself and
    wait for it, without a word to it over Py4J -- the call that was
    interrupted still occupies this thread's connection, so any further call
    would wait for the running job to finish.  A later session in this
    process starts a fresh JVM."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return
    sc = SparkContext._active_spark_context
    if not hard:
        if sc is not None:
            try:
                sc.cancelAllJobs()
                sc.stop()
            except BaseException:
                pass
        return
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is not None:
        import subprocess

        try:
            proc.stdin.close()  # the JVM exits when its stdin closes (running its shutdown hooks)
        except (OSError, AttributeError):
            pass
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
    SparkContext._active_spark_context = None
    SparkContext._gateway = None
    SparkContext._jvm = None
