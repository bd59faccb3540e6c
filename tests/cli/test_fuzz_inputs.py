"""Fuzz more of the inputs with hypothesis (issue 29, item 8): cluster-run parallel flags,
Timeloop problem files, serving flags and traces, plan flags, calibration rows, result stores
(to results, report, plot) and result JSON to rerun. Property, as in ``test_fuzz.py``:
exit 0, or exit 2 with one message line; never a traceback. Small by default."""

from __future__ import annotations

import json
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
    # (a valid problem runs the mapper's search: 0.2 s of it, not the default 8 s; the
    # property is about reading the problem, not the mapping found)
    run_cli(capsys, ["map", "--timeloop", str(ROOT / "examples/timeloop/eyeriss_like/arch.yaml"),
                     "--problem", str(p), "--time-budget", "0.2"])


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


@settings(max_examples=6, **_SETTINGS)
@given(devices=INTS, batch=INTS, seq=INTS, top=INTS,
       fmt=st.sampled_from(["fp8_e4m3", "int4", "bf16", "x", ""]),
       caps=st.sampled_from(["100%,70%", "0%", "x", "150%", "", "70"]),
       slo=st.sampled_from(["5", "0", "-1", "nan", "x"]))
def test_fuzz_plan_flags(capsys, devices, batch, seq, top, fmt, caps, slo):
    run_cli(capsys, ["plan", "gpu/h100", "--model", "gpt2-small", "--devices", devices,
                     "--batch", batch, "--seq", seq, "--top", top, "--w-format", fmt,
                     "--power-caps", caps, "--slo-ms", slo, "--json"])


_CALIBRATION = (ROOT / "tests/data/silicon/h100_calibration.jsonl").read_text().splitlines()
_ROW_VALUES = st.sampled_from([0, -1.5, 1e300, float("nan"), "x", None, [], {}, 7, "gemm",
                               "NVIDIA A100", True])


@settings(max_examples=10, **_SETTINGS)
@given(data=st.data())
def test_fuzz_calibration_rows(capsys, tmp_path_factory, data):
    """Rows with fields replaced by junk, dropped, or cut mid-line."""
    rows = [json.loads(ln) for ln in _CALIBRATION[:12]]
    for _ in range(data.draw(st.integers(0, 4))):
        row = rows[data.draw(st.integers(0, len(rows) - 1))]
        key = data.draw(st.sampled_from(sorted(row) + ["extra"]))
        row[key] = data.draw(_ROW_VALUES)
    text = "\n".join(json.dumps(r) for r in rows if data.draw(st.booleans()) or r is rows[0])
    text = text[:data.draw(st.integers(0, len(text)))]
    tmp = tmp_path_factory.mktemp("cal")
    p = tmp / "rows.jsonl"
    p.write_text(text)
    run_cli(capsys, ["calibrate", str(p), "--config", "gpu/h100", "--out", str(tmp / "c.yaml")])


_TRACE_CELLS = st.sampled_from(["0", "0.5", "-1", "1e9", "nan", "x", "", "64", "8", "1e-300"])


@settings(max_examples=8, **_SETTINGS)
@given(rows=st.lists(st.tuples(_TRACE_CELLS, _TRACE_CELLS, _TRACE_CELLS), max_size=6),
       header=st.sampled_from(["arrival_s,prompt_tokens,output_tokens", "a,b,c",
                               "\ufeffarrival_s,prompt_tokens,output_tokens", ""]))
def test_fuzz_serve_traces(capsys, tmp_path_factory, rows, header):
    p = tmp_path_factory.mktemp("trace") / "t.csv"
    p.write_text("\n".join([header, *(",".join(r) for r in rows)]) + "\n")
    run_cli(capsys, ["serve", "gpu/h100", "--model", "gpt2-small", "--trace", str(p),
                     "--quiet", "--max-requests", "20"])


@settings(max_examples=6, **_SETTINGS)
@given(junk=st.binary(max_size=200), cmd=st.sampled_from(["report", "pareto"]))
def test_fuzz_result_stores_to_report_and_plot(capsys, tmp_path_factory, junk, cmd):
    tmp = tmp_path_factory.mktemp("db")
    db = tmp / "s.sqlite"
    db.write_bytes(junk)
    args = (["report", str(db), "-o", str(tmp / "r.html")] if cmd == "report" else
            ["plot", "pareto", str(db), "-o", str(tmp / "p.svg")])
    run_cli(capsys, args)


@settings(max_examples=8, **_SETTINGS)
@given(data=st.data())
def test_fuzz_rerun_results(capsys, tmp_path_factory, data):
    """A result JSON with a provenance field replaced, dropped, or the file cut."""
    assert main(["gemm", "tpu_like", "--m", "32", "--n", "32", "--k", "32", "--json"]) == 0
    ok = json.loads(capsys.readouterr().out)
    prov = ok["extra"]["provenance"]
    key = data.draw(st.sampled_from(sorted(prov)))
    if data.draw(st.booleans()):
        prov[key] = data.draw(st.sampled_from([None, 0, "x", ["gemm"], {"a": 1}, "9.9.9"]))
    else:
        del prov[key]
    text = json.dumps(ok)
    text = text[:data.draw(st.sampled_from([len(text), len(text) // 2, 0]))]
    p = tmp_path_factory.mktemp("rr") / "r.json"
    p.write_text(text)
    run_cli(capsys, ["rerun", str(p)])
