"""Fuzz more of the inputs with hypothesis (issue 29, item 8): cluster-run parallel flags,
Timeloop problem files, serving flags and result stores. Property, as in ``test_fuzz.py``:
exit 0, or exit 2 with one message line; never a traceback. Small by default."""

from __future__ import annotations

import sqlite3

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim.cli import main
from tests.conftest import ROOT

_SETTINGS = dict(deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow])
INTS = st.sampled_from(["1", "2", "8", "0", "-1", "3", "x", "1e3", "", "4096"])


def run_cli(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    try:
        code = main(args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    assert "Traceback" not in out.err, (args, out.err)
    assert code in (0, 1, 2), (code, args)
    if code == 2:
        lines = [ln for ln in out.err.splitlines()
                 if ln and not ln.startswith(("warning:", "note:", "  "))]
        assert len(lines) == 1, (args, out.err)


@settings(max_examples=12, **_SETTINGS)
@given(tp=INTS, pp=INTS, dp=INTS, mb=INTS, phase=st.sampled_from(["train", "prefill", "decode",
                                                                  "x"]))
def test_fuzz_cluster_flags(capsys, tp, pp, dp, mb, phase):
    run_cli(capsys, ["run", "h100_pod16", "--model", "llama3-8b", "--phase", phase,
                     "--batch", "8", "--tp", tp, "--pp", pp, "--dp", dp, "--microbatches", mb])


def _problem(draw: st.DrawFn) -> dict:
    prob = yaml.safe_load((ROOT / "examples/timeloop/default_problem.yaml").read_text())
    inst = prob["problem"]["instance"]
    for key in draw(st.lists(st.sampled_from(sorted(inst)), max_size=3, unique=True)):
        inst[key] = draw(st.sampled_from([0, -3, 1, 7, 10**9, "thirty", None, 2.5, [1]]))
    if draw(st.booleans()):
        prob["problem"]["version"] = draw(st.sampled_from([0.4, 9.9, "x", None]))
    return prob


@settings(max_examples=10, **_SETTINGS)
@given(data=st.data())
def test_fuzz_timeloop_problems(capsys, tmp_path_factory, data):
    prob = _problem(data.draw)
    p = tmp_path_factory.mktemp("tl") / "problem.yaml"
    p.write_text(yaml.safe_dump(prob))
    run_cli(capsys, ["map", "--timeloop", str(ROOT / "examples/timeloop/eyeriss_like/arch.yaml"),
                     "--problem", str(p)])


@settings(max_examples=10, **_SETTINGS)
@given(rate=st.sampled_from(["1", "0", "-2", "x", "1e9", "nan", "inf"]),
       duration=st.sampled_from(["5", "0", "-1", "1e9", "x"]),
       seed=st.sampled_from(["0", "-1", "x", "123"]))
def test_fuzz_serve_flags(capsys, rate, duration, seed):
    run_cli(capsys, ["serve", "gpu/h100", "--model", "gpt2-small", "--rate", rate,
                     "--duration", duration, "--seed", seed, "--max-requests", "20"])


@settings(max_examples=8, **_SETTINGS)
@given(junk=st.binary(max_size=200), table=st.booleans())
def test_fuzz_result_stores(capsys, tmp_path_factory, junk, table):
    db = tmp_path_factory.mktemp("db") / "s.sqlite"
    if table:
        con = sqlite3.connect(db)
        con.execute("CREATE TABLE results (x)")
        con.commit()
        con.close()
        with open(db, "ab") as fh:
            fh.write(junk)
    else:
        db.write_bytes(junk)
    run_cli(capsys, ["results", str(db), "--csv"])
