"""Serving work sized before it starts (issue 29, item 3): ``serve`` estimates requests x
iterations and refuses, in one line naming the flags and the estimate, a run over
``MAX_REQUEST_ITERATIONS`` (or asks for ``--max-requests``); ``--max-requests`` stops reading
a trace once it has enough rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from archsim.serve import requests as rq
from archsim.serve.requests import MAX_REQUEST_ITERATIONS, check_work, load_trace
from archsim.workloads.errors import WorkloadError
from tests.cli.test_bad_inputs import bad, cli

SERVE = ("serve", "gpu/h100", "--model", "gpt2-small", "--quiet")


@pytest.mark.parametrize("rate, duration, n", [("1e9", "1", "1e+09"), ("1", "1e9", "1e+09"),
                                               ("1e6", "1e3", "1e+09")])
def test_absurd_open_loop_run_is_refused_with_the_estimate(capsys, rate, duration, n):
    line = bad(capsys, "--max-requests", *SERVE, "--rate", rate, "--duration", duration)
    assert f"--rate {float(rate):g}" in line and f"--duration {float(duration):g}" in line
    # default --output 128: 129 iterations a request (prefill + one per output token)
    assert f"~{n} requests x ~129 iterations" in line
    assert f"N <= {MAX_REQUEST_ITERATIONS // 129}" in line


def test_max_requests_makes_it_runnable(capsys):
    code, out, err = cli(capsys, *SERVE, "--rate", "1e9", "--duration", "1", "--max-requests",
                         "20", "--output", "4")
    assert code == 0, err
    assert "20/20 finished" in out


def test_too_many_max_requests_is_still_refused(capsys):
    cap = MAX_REQUEST_ITERATIONS // 129
    line = bad(capsys, f"--max-requests {cap + 1}", *SERVE, "--rate", "1e9", "--duration", "1",
               "--max-requests", str(cap + 1))
    assert f"~{cap + 1:.3g} requests" in line


def test_check_work_closed_form():
    """The boundary: n x (mean output + 1) == the cap is accepted, one more request is not."""
    each = 99 + 1
    check_work(MAX_REQUEST_ITERATIONS // each, 99, "x")
    with pytest.raises(WorkloadError, match=r"x: ~.* requests x ~100 iterations each"):
        check_work(MAX_REQUEST_ITERATIONS // each + 1, 99, "x")
    with pytest.raises(WorkloadError):
        check_work(float("inf"), 1, "x")


def _trace(tmp_path: Path, rows: int, tail: str = "") -> Path:
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens\n"
                 + "".join(f"{i * 0.5:.1f},32,{4}\n" for i in range(rows)) + tail)
    return p


def test_max_requests_stops_reading_the_trace(tmp_path):
    """Rows after the first ``max_rows`` are never read: a garbage line after them is not seen."""
    p = _trace(tmp_path, 5, "not,a,row\n\xff\xfe garbage\n")
    with pytest.raises(WorkloadError, match=f"{p}:7"):
        load_trace(p)
    assert [r.rid for r in load_trace(p, max_rows=5)] == [0, 1, 2, 3, 4]
    assert len(load_trace(p, max_rows=2)) == 2


def test_max_requests_on_a_trace_through_the_cli(capsys, tmp_path):
    p = _trace(tmp_path, 5, "not,a,row\n")
    code, out, err = cli(capsys, *SERVE, "--trace", str(p), "--max-requests", "3")
    assert code == 0, err
    assert "3/3 finished" in out
    bad(capsys, f"{p}:7", *SERVE, "--trace", str(p))


def test_big_trace_is_refused_before_serving(capsys, tmp_path, monkeypatch):
    """A trace of 40 requests x 5 iterations = 200 over a cap of 100 (patched down: the real
    cap needs a ~10^6-row file); --max-requests 20 (= 100) runs."""
    monkeypatch.setattr(rq, "MAX_REQUEST_ITERATIONS", 100)
    p = _trace(tmp_path, 40)
    line = bad(capsys, f"--trace {p}", *SERVE, "--trace", str(p))
    assert "~40 requests x ~5 iterations each = 200" in line and "N <= 20" in line
    code, out, err = cli(capsys, *SERVE, "--trace", str(p), "--max-requests", "20")
    assert code == 0 and "20/20 finished" in out, err
