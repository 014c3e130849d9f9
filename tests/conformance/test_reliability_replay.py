"""`conq replay --out DIR` never removes anything conq did not write (issue 13, item 1).

The output is written into a fresh temporary sibling of DIR and renamed into
place; a non-empty DIR that is not a previous conq output is refused before
any work (exit 2, nothing touched); ``a/b/..`` is ``a``, never deleted; a
failure or SIGTERM leaves neither the partial folder nor the package zip.

Most of this runs without Spark (the checks come before Spark starts, and
the staging logic is plain file handling); one test sends SIGTERM to a real
Spark replay.  Waits are safety caps that fail loudly.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conq.conformance import spark_replay
from conq.conformance.spark_replay import ReplayError, ReplayParams, run_replay

HERE = Path(__file__).resolve().parent
TOY = str(HERE.parent / "model" / "engines" / "toy_counter.py") + ":CounterModel"
DRIVERS = str(HERE / "toy_driver.py")
UNREACHABLE = "spark://127.0.0.1:1"  # were the output accepted, the run would stop at the master check


def params(**kw):
    base = dict(model=TOY, config_name="atomic", overrides={"clients": 2}, traces=64, seed=1, length=4,
                impl=f"driver:{DRIVERS}:AddDriver")
    base.update(kw)
    return ReplayParams(**base)


def listing(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def wait_for(pred, cap: float, what: str) -> None:
    deadline = time.monotonic() + cap
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"safety cap of {cap} s reached waiting for: {what}")
        time.sleep(0.05)


def test_a_folder_that_is_not_a_conq_output_is_refused_and_left_untouched(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine, not conq's")
    (out / "sub").mkdir()
    (out / "sub" / "data.bin").write_bytes(b"\x00\x01")
    before = listing(tmp_path)
    with pytest.raises(ReplayError, match="is not empty and is not the output of a previous conq replay.*Nothing was changed"):
        run_replay(params(), master=UNREACHABLE, out=out, say=lambda m: None)
    assert listing(tmp_path) == before  # no file lost, and no sibling created either


def test_out_a_b_dotdot_is_a_and_a_is_never_deleted(tmp_path):
    a = tmp_path / "a"
    (a / "b").mkdir(parents=True)
    (a / "keep.txt").write_text("precious")
    before = listing(tmp_path)
    with pytest.raises(ReplayError, match=f"--out {a}/b/..: refusing to write there: {a} is not empty"):
        run_replay(params(), master=UNREACHABLE, out=a / "b" / "..", say=lambda m: None)
    assert listing(tmp_path) == before


def test_the_cli_refuses_with_exit_2_and_says_so(tmp_path):
    out = tmp_path / "reports"
    out.mkdir()
    (out / "thesis.tex").write_text("do not delete")
    done = subprocess.run(
        [sys.executable, "-m", "conq.cli", "replay", "consumer-lists", "--out", str(out), "--master", UNREACHABLE, "--traces", "10"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "not the output of a previous conq replay" in " ".join(done.stderr.split()), done.stderr
    assert (out / "thesis.tex").read_text() == "do not delete" and listing(out) == {"thesis.tex": b"do not delete"}


def _fake_run(final: Path, files: dict[str, str]) -> None:
    """What a run does with its output folder, without Spark."""
    folder = spark_replay.replay_folder(final).open()
    staging = folder.staging
    assert staging.parent == final.parent and staging.name.startswith(f"{final.name}.partial-")
    assert json.loads((staging / spark_replay.MARKER).read_text())["complete"] is False
    for rel, text in files.items():
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        (staging / rel).write_text(text)
    folder.commit()
    assert not staging.exists()


def test_a_previous_conq_output_is_replaced_whole_and_nothing_else_ever_is(tmp_path):
    final = spark_replay.resolve_output(tmp_path / "out")
    _fake_run(final, {"summary.json": "1", "traces/part-0.parquet": "t1", "old-only.md": "x"})
    marker = json.loads((final / spark_replay.MARKER).read_text())
    assert marker["complete"] is True and set(marker["entries"]) == {"summary.json", "traces", "traces/part-0.parquet", "old-only.md"}
    # a previous conq output: accepted, and replaced as a whole
    assert spark_replay.resolve_output(tmp_path / "out") == final
    _fake_run(final, {"summary.json": "2", "traces/part-0.parquet": "t2"})
    assert (final / "summary.json").read_text() == "2" and not (final / "old-only.md").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no partial or old folder left beside it
    # a file the user added to a conq output: the folder is no longer conq's alone
    (final / "traces" / "my-notes.txt").write_text("mine")
    with pytest.raises(ReplayError, match=r"also holds 1 file\(s\) conq did not write \(traces/my-notes.txt\)"):
        spark_replay.resolve_output(final)
    # ... and if that happens while a run is under way, the run does not replace it either
    folder = spark_replay.replay_folder(tmp_path / "out")
    folder.final = final  # checked before the file was added: the run is under way
    folder._lock(final)
    folder.staging = Path(tempfile.mkdtemp(dir=final.parent, prefix="out.partial-"))
    with pytest.raises(ReplayError, match="changed during the run"):
        folder.commit()
    assert folder.keep_staging and list(tmp_path.glob("out.partial-*"))
    assert (final / "traces" / "my-notes.txt").read_text() == "mine" and (final / "summary.json").read_text() == "2"


def test_other_outputs_conq_may_not_write_are_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ReplayError, match="exists and is not a folder"):
        spark_replay.resolve_output(tmp_path / "file")
    with pytest.raises(ReplayError, match="is a file, not a folder"):
        spark_replay.resolve_output(tmp_path / "file" / "out")
    with pytest.raises(ReplayError, match="holds the current folder"):
        spark_replay.resolve_output(Path.cwd().parent)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert spark_replay.resolve_output(empty) == empty.resolve()  # an empty folder is fine


def test_a_failed_run_leaves_no_partial_folder_nor_zip(tmp_path, monkeypatch):
    zips = tmp_path / "tmp"
    zips.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(zips))

    def broken_spark(*a, **k):
        assert list(zips.glob("conq-replay-*")) and list(tmp_path.glob("out.partial-*"))
        raise RuntimeError("Spark broke")

    monkeypatch.setattr(spark_replay.session, "spark_session", broken_spark)
    with pytest.raises(RuntimeError, match="Spark broke"):
        run_replay(params(), master="local[1]", out=tmp_path / "out", say=lambda m: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"] and list(zips.iterdir()) == []


SIGTERMED = r'''
import sys, time
from pathlib import Path
from conq.conformance import spark_replay

def slow_spark(*a, **k):  # stands for a Spark job under way
    print("spark started", flush=True)
    time.sleep(600)

spark_replay.session.spark_session = slow_spark
p = spark_replay.ReplayParams(model=sys.argv[2], config_name="atomic", overrides={"clients": 2}, traces=64, impl=sys.argv[3])
spark_replay.run_replay(p, master="local[1]", out=Path(sys.argv[1]), say=lambda m: None)
'''


@pytest.mark.timeout(1800)  # safety net: the caps inside add up to more than the default 600 s
def test_sigterm_leaves_no_partial_folder_nor_zip(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SIGTERMED)
    zips = tmp_path / "tmp"
    zips.mkdir()
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, str(script), str(out), TOY, f"driver:{DRIVERS}:AddDriver"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(zips)})
    try:
        assert proc.stdout.readline() == "spark started\n", proc.communicate(timeout=600)
        assert list(zips.glob("conq-replay-*"))  # the package zip's folder exists
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=600)  # safety caps: stopping Spark takes seconds quiet, minutes at load 20+
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.py", "tmp"]
    assert list(zips.iterdir()) == []


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                data = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            ppid = int(data[data.rfind(b")") + 2 :].split()[1])
            children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return data[data.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(1800)  # safety net: the caps inside add up to more than the default 600 s
def test_sigterm_during_a_spark_replay_leaves_nothing_behind(tmp_path):
    if spark_replay.java_problem():
        pytest.skip(spark_replay.java_problem())
    zips = tmp_path / "tmp"
    zips.mkdir()
    out = tmp_path / "out"
    conq = subprocess.Popen(
        [sys.executable, "-m", "conq.cli", "replay", "consumer-lists", "--config", "small", "--traces", "200000",
         "--master", "local[1]", "--no-truth", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(zips)},
    )
    try:
        # Spark is writing traces/ into the partial folder (the replay job is under way)
        wait_for(lambda: list(tmp_path.glob("out.partial*/traces")) or conq.poll() is not None, 900,
                 "the replay job to start writing")
        assert conq.poll() is None, conq.communicate()
        assert list(zips.glob("conq-replay-*/conq-pkg.zip"))
        family = _descendants(conq.pid)  # the JVM, Spark's Python workers
        conq.send_signal(signal.SIGTERM)
        _, err = conq.communicate(timeout=600)
    finally:
        if conq.poll() is None:
            conq.kill()
    assert conq.returncode == 128 + signal.SIGTERM, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"], "a partial output was left behind"
    assert not list(zips.glob("conq-replay-*")), "the package zip was left behind"
    wait_for(lambda: not [p for p in family if _alive(p)], 60, "Spark's processes to end")
