"""Closed-loop load (``--concurrency``) and the benchmark report.

Expected values are worked out independently of the simulator: full-model
``archsim.evaluate`` of the zoo's prefill and decode workloads, the interactive response
time law (N = X x R with no think time), a sweep over the requests' own send and finish
times, and percentiles of hand-made latencies worked out by hand.
"""

from __future__ import annotations

import json

import pytest

from archsim.cli import main
from archsim.serve import LengthDist, PoolSpec, ServeSetup, serve
from archsim.serve.metrics import BenchmarkReport, latency_stats
from archsim.serve.requests import closed_loop
from archsim.serve.run import benchmark_report
from archsim.serve.session import run_serving
from archsim.workloads.errors import WorkloadError
from tests.serve.conftest import MODEL, full_latency


def _run(acc, costs, n, reqs, setup=None):
    raw: dict = {}
    res = serve(acc, setup or ServeSetup(MODEL), reqs, costs=costs, raw_out=raw,
                concurrency=n)
    return res, raw


def test_one_client_is_prefill_plus_decodes_back_to_back(a100, costs):
    # N = 1: each request is alone; TTFT = full-model prefill of its prompt, E2E = TTFT +
    # (osl - 1) decode steps of batch 1 over the growing cache, and the client sends the
    # next request the instant the previous one finishes.
    p, o, k = 512, 6, 3
    _, raw = _run(a100, costs, 1, closed_loop(k, LengthDist("fixed", p),
                                              LengthDist("fixed", o)))
    prefill = full_latency(a100, "prefill", seq=p)
    decodes = sum(full_latency(a100, "decode", batch=1, context=p + g - 1) for g in range(1, o))
    st = sorted(raw["states"], key=lambda s: s.req.rid)
    assert st[0].req.arrival_s == 0.0
    for i, s in enumerate(st):
        assert s.first_t - s.req.arrival_s == pytest.approx(prefill, rel=0.01)
        assert s.finish_t - s.req.arrival_s == pytest.approx(prefill + decodes, rel=0.01)
        if i:
            assert s.req.arrival_s == st[i - 1].finish_t
    assert raw["end_s"] == pytest.approx(k * (prefill + decodes), rel=0.01)


def _in_flight_peak(states) -> int:
    """Most requests between send and finish at once (a sweep over the times; a finish
    and a send at the same instant: the finish first, as the client sends after it)."""
    ev = sorted([(s.req.arrival_s, 1) for s in states] + [(s.finish_t, -1) for s in states],
                key=lambda e: (e[0], e[1]))
    cur = peak = 0
    for _, d in ev:
        cur += d
        peak = max(peak, cur)
    return peak


@pytest.mark.parametrize("n,setup", [
    (1, ServeSetup(MODEL)),
    (3, ServeSetup(MODEL)),
    (5, ServeSetup(MODEL, PoolSpec(2, 1))),
    (4, ServeSetup(MODEL, PoolSpec(1, 1), PoolSpec(1, 1))),
])
def test_never_more_than_n_in_flight_and_every_request_once(a100, costs, n, setup):
    reqs = closed_loop(7 * n, LengthDist("uniform", 32, 600), LengthDist("uniform", 2, 40),
                       seed=5)
    res, raw = _run(a100, costs, n, reqs, setup)
    st = raw["states"]
    assert res.finished == len(reqs) and all(s.served == 1 for s in st)
    assert raw["peak_in_system"] == n and _in_flight_peak(st) == n
    assert sum(1 for s in st if s.req.arrival_s == 0.0) == n
    # sent in list order; each later send is some earlier request's finish
    sends = [s.req.arrival_s for s in sorted(st, key=lambda s: s.req.rid)]
    assert sends == sorted(sends)
    finishes = {s.finish_t for s in st}
    assert all(t in finishes for t in sends[n:])


def test_interactive_response_time_law(a100, costs):
    # Closed system, no think time: N = X R (throughput x mean E2E), up to the ramp-down
    # at the end where fewer than N requests remain (40 requests per client: < 10 %).
    n = 4
    reqs = closed_loop(40 * n, LengthDist("uniform", 64, 512), LengthDist("uniform", 8, 64),
                       seed=2)
    _, raw = _run(a100, costs, n, reqs)
    b = benchmark_report(raw, n)
    assert b.request_throughput * b.e2el_ms["mean"] * 1e-3 == pytest.approx(n, rel=0.1)
    assert b.completed == len(reqs) and b.concurrency == n


def test_percentiles_of_hand_made_latencies():
    # 1, 2, ..., 100 ms: mean 50.5; median (50 + 51) / 2; linear interpolation at rank
    # q/100 x 99: p90 = 90 + 0.1 = 90.1, p99 = 99 + 0.01 = 99.01; population std
    # sqrt((100^2 - 1) / 12) = 28.866
    st = latency_stats([i * 1e-3 for i in range(1, 101)])
    assert st["mean"] == pytest.approx(50.5)
    assert st["median"] == pytest.approx(50.5)
    assert st["p90"] == pytest.approx(90.1)
    assert st["p99"] == pytest.approx(99.01)
    assert st["std"] == pytest.approx(((100 ** 2 - 1) / 12) ** 0.5)


def test_report_definitions_on_hand_made_requests():
    # two requests sent at 0 and 1 s: first tokens at 0.2 and 1.5 s, finishes at 1.0 and
    # 2.5 s, 9 and 1 output tokens. TTFT 200 and 500 ms; E2E 1000 and 1500 ms; TPOT only
    # for the request with > 1 token: (1.0 - 0.2) / (9 - 1) = 100 ms; over 2.5 s: 0.8
    # req/s, 10 / 2.5 = 4 output tok/s, (100 + 300 + 10) / 2.5 = 164 tok/s.
    b = BenchmarkReport.from_times(2, 2.5, [0.0, 1.0], [0.2, 1.5], [1.0, 2.5], [100, 300],
                                   [9, 1], [0.1] * 8)
    assert b.ttft_ms["mean"] == pytest.approx(350.0)
    assert b.e2el_ms["median"] == pytest.approx(1250.0)
    assert b.tpot_ms["mean"] == pytest.approx(100.0) and b.tpot_ms["p99"] == pytest.approx(100)
    assert b.itl_ms["p90"] == pytest.approx(100.0)
    assert b.request_throughput == pytest.approx(0.8)
    assert b.output_throughput == pytest.approx(4.0)
    assert b.total_token_throughput == pytest.approx(164.0)
    d = b.to_dict()
    assert d["mean_ttft_ms"] == pytest.approx(350.0) and d["completed"] == 2
    assert d["max_concurrency"] == 2 and d["total_output_tokens"] == 10


def test_run_serving_api_and_default_request_count(a100):
    run = run_serving(a100, MODEL, concurrency=2, isl="128", osl="4")
    assert run.benchmark is not None and run.benchmark.completed == 20   # 10 per client
    assert run.result is not None and run.result.finished == 20


def test_cli_prints_the_benchmark_block_and_json(capsys):
    argv = ["gpu/a100", "--model", MODEL, "--concurrency", "2", "--isl", "uniform:64:128",
            "--osl", "8", "--requests", "6"]
    assert main(["serve", *argv]) == 0
    out = capsys.readouterr().out
    for label in ("Serving Benchmark Result", "Maximum request concurrency:", "Median TTFT (ms):",
                  "P90 TPOT (ms):", "P99 ITL (ms):", "Mean E2EL (ms):",
                  "Output token throughput (tok/s):"):
        assert label in out
    assert main(["serve", *argv, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["benchmark"]["completed"] == 6 and d["benchmark"]["total_output_tokens"] == 48
    assert d["benchmark"]["p99_tpot_ms"] >= d["benchmark"]["median_tpot_ms"] > 0


@pytest.mark.parametrize("argv,where", [
    (["--concurrency", "4", "--isl", "8", "--osl", "8", "--rate", "1"], "--rate"),
    (["--concurrency", "4", "--isl", "8", "--osl", "8", "--trace", "sharegpt_like"], "--trace"),
    (["--concurrency", "4", "--isl", "8", "--osl", "8", "--duration", "3"], "--duration"),
    (["--concurrency", "4", "--isl", "8", "--osl", "8", "--find-capacity", "--slo",
      "ttft=1s"], "--find-capacity"),
    (["--concurrency", "4", "--osl", "8"], "--isl"),
    (["--concurrency", "4", "--isl", "8", "--osl", "uniform:9:2"], "--osl"),
    (["--rate", "1", "--duration", "1", "--isl", "8"], "--isl"),
    (["--rate", "1", "--duration", "1", "--requests", "8"], "--requests"),
    (["--concurrency", "0", "--isl", "8", "--osl", "8"], "--concurrency"),
])
def test_cli_bad_closed_loop_flags(capsys, argv, where):
    try:
        rc = main(["serve", "gpu/a100", "--model", MODEL, *argv])
    except SystemExit as exc:            # argparse's own type checks exit 2 themselves
        rc = exc.code
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and where in err


def test_closed_loop_count_must_be_positive():
    with pytest.raises(WorkloadError, match="--requests"):
        closed_loop(0, LengthDist("fixed", 8), LengthDist("fixed", 8))
