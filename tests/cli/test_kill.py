"""Kill tests: Ctrl-C (SIGINT to the process group, as a terminal sends it) and SIGKILL of
a sweep driver leave no pool worker alive, lose no finished point, and a second sweep on
the same store computes none of the points the first one claimed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from archsim.explore import ResultStore, load_spec, run_sweep
from tests.conftest import ROOT

TPU = ROOT / "configs/spatial/tpu_like.yaml"
SPEC = f"""
base: {TPU}
axes:
  - {{key: "units[0].rows", values: [8, 16, 32, 64]}}
  - {{key: "units[0].cols", values: [8, 16, 32, 64]}}
  - {{key: "units[0].global_buffer_kib", values: [64, 256]}}
workloads:
  - {{gemm: [64, 64, 64]}}
"""

#: a sweep driver whose evaluations each take >= 50 ms (so it is caught mid-run)
DRIVER = ("import sys, time; sys.path.insert(0, {root!r});"
          "import archsim.explore.run as r;"
          "r._EVAL_HOOK = lambda t: time.sleep(0.05);"
          "from archsim.cli import main;"
          "sys.exit(main(['sweep', {spec!r}, '--db', {db!r}, '--workers', '2', "
          "'--no-progress']))")


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out |= {int(x) for x in (task / "children").read_text().split()}
        except OSError:
            pass
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:       # a zombie (exited, not yet reaped by its dead parent's reaper) is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


def _start(tmp_path: Path) -> tuple[subprocess.Popen[str], Path, Path, set[int]]:
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    db = tmp_path / "k.sqlite"
    code = DRIVER.format(root=str(ROOT), spec=str(spec), db=str(db))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    workers: set[int] = set()
    deadline = time.time() + 60
    while time.time() < deadline:             # wait until both workers run and rows arrive
        workers |= _children(proc.pid)
        n = 0
        if db.exists():
            try:
                with ResultStore(db, readonly=True) as s:
                    n = s.count()
            except Exception:  # noqa: BLE001 - the store may be half-created; poll again
                n = 0
        if n >= 4 and len(workers) >= 2:
            break
        time.sleep(0.05)
    assert len(workers) >= 2, "the pool did not start"
    return proc, spec, db, workers


def _wait_dead(pids: set[int], timeout_s: float = 10.0) -> set[int]:
    deadline = time.time() + timeout_s
    while time.time() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    return {p for p in pids if _alive(p)}


def _resume_completes(spec: Path, db: Path) -> None:
    with ResultStore(db, readonly=True) as s:
        before = {r["hash"]: r["created"] for r in s.rows()}
    total = len(load_spec(spec).tasks())
    assert 0 < len(before) < total
    rep = run_sweep(load_spec(spec), db, workers=1, progress=False)
    assert rep.skipped == len(before) and rep.evaluated == total - len(before)
    with ResultStore(db, readonly=True) as s:
        after = {r["hash"]: r["created"] for r in s.rows()}
        assert s.count("status = 'ok'") == total
    assert all(after[h] == c for h, c in before.items())     # nothing recomputed or lost


@pytest.mark.slow
def test_ctrl_c_stops_driver_and_workers(tmp_path):
    proc, spec, db, workers = _start(tmp_path)
    os.killpg(proc.pid, signal.SIGINT)         # what a terminal does on Ctrl-C
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130
    assert err.strip().splitlines()[-1] == "interrupted" and "Traceback" not in err
    assert _wait_dead(workers) == set()
    _resume_completes(spec, db)


@pytest.mark.slow
def test_sigkill_of_driver_takes_workers_down(tmp_path):
    proc, spec, db, workers = _start(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)          # the driver only: workers must notice
    proc.wait(30)
    try:
        assert _wait_dead(workers) == set()
    finally:
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)
    _resume_completes(spec, db)


def test_a_claimed_point_is_not_recomputed_by_a_second_sweep(tmp_path):
    """Two drivers on one store: the second evaluates only what the first has not claimed,
    and waits for the rest; every point is computed exactly once."""
    from archsim.explore.run import run_tasks
    from archsim.explore.store import owner_id

    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    tasks = load_spec(spec).tasks()
    db = tmp_path / "c.sqlite"
    with ResultStore(db) as st:                 # another live driver holds the first half
        other = f"{owner_id()}-other"          # same host, this (live) pid: a live claim
        got = st.claim([t.hash for t in tasks[:16]], other)
    assert got == {t.hash for t in tasks[:16]}

    import threading

    def finish_other() -> None:                 # the other driver stores its points later
        time.sleep(0.3)
        from archsim.explore.run import evaluate_tasks

        with ResultStore(db) as st:
            st.put_many(evaluate_tasks(tasks[:16]))
            st.release(other)

    th = threading.Thread(target=finish_other)
    th.start()
    rep = run_tasks(tasks, db, workers=1, progress=False, poll_s=0.05)
    th.join()
    assert rep.evaluated == len(tasks) - 16 and rep.elsewhere == 16
    with ResultStore(db, readonly=True) as st:
        assert st.count() == len(tasks)
        assert st.conn.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0


def test_claims_of_a_dead_driver_are_taken_over(tmp_path):
    from archsim.explore.run import run_tasks

    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    tasks = load_spec(spec).tasks()[:4]
    db = tmp_path / "d.sqlite"
    p = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                       capture_output=True, text=True)
    import socket

    dead = f"{socket.gethostname()}:{int(p.stdout)}"   # a pid that has exited
    with ResultStore(db) as st:
        st.claim([t.hash for t in tasks], dead)
    rep = run_tasks(tasks, db, workers=1, progress=False, poll_s=0.05)
    assert rep.evaluated == 4 and rep.elsewhere == 0
