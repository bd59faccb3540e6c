"""Serving metrics: latency percentiles, throughput, goodput, SLO attainment, KV use,
MFU/MBU, energy per token and per request, power, area and devices.

Definitions (as in the serving papers):

* TTFT — first token time minus arrival (queueing + prefill);
* TPOT — per request ``(finish - first token) / (output - 1)`` (requests with > 1 token);
* TBT / ITL — every gap between consecutive tokens of a request (Sarathi-Serve's P99 TBT);
* E2E — finish minus arrival;
* throughput — finished requests (and generated tokens) per second of the run span
  (first arrival to last finish);
* SLO attainment — share of requests meeting every given SLO (``ttft``, ``tpot``, ``e2e``,
  each on the request's own value); goodput — those requests per second (DistServe);
* KV utilisation — time-weighted mean (and peak) of used / total KV blocks per replica;
* MFU — model FLOPs / (busy time x peak FLOP/s); MBU — off-chip bytes / (busy time x peak
  bytes/s), both per device over the busy iterations (vLLM/PaLM definitions);
* sustained — the load is sustainable: requests complete, over the second half of the
  arrival window, at >= 90 % of the arrival rate less a 3-sigma Poisson allowance (an
  overloaded system completes at its service rate while its queue grows;
  ``completion_ratio`` is completions / expected). The capacity search requires it, so a
  run cannot pass on a transient before the queue has grown;
* benchmark report (:class:`BenchmarkReport`) — what vLLM's ``benchmark_serving``, SGLang's
  ``bench_serving`` and genai-perf print for a run: TTFT, TPOT (``(E2E - TTFT) / (output -
  1)`` per request with more than one output token), ITL (every gap between successive
  tokens of a request, pooled over requests) and E2E latency, each as mean, median, standard
  deviation, p90 and p99 (``numpy.percentile``, linear interpolation, as those tools
  compute them), and request, output-token and total-token throughput over the benchmark
  duration (first send to last finish);
* energy — iteration energies (dynamic + leakage, from ``archsim.evaluate``) plus the
  leakage of idle devices; per output token and per request; average power over the span.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from archsim.workloads.errors import Problem, WorkloadError, inert

__all__ = ["SLO", "parse_slo", "ServeResult", "percentiles", "BenchmarkReport",
           "latency_stats"]

_UNITS = {"ms": 1e-3, "us": 1e-6, "s": 1.0}


@dataclass(frozen=True)
class SLO:
    """Latency targets (s); None = not checked.

    Attributes:
        ttft_s, tpot_s, e2e_s: per-request targets (a request attains the SLO when it meets
            all of them); ``attainment`` is the share of requests that must.
        percentiles: run-level targets ``(metric, q, seconds)``: the ``q``-th percentile of
            ``ttft``, ``tpot``, ``tbt`` (every token gap) or ``e2e`` over the run must be at
            most ``seconds``.
    """

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None
    percentiles: tuple[tuple[str, float, float], ...] = ()
    attainment: float = 0.9

    def any(self) -> bool:
        return self.per_request() or self.run_level()

    def per_request(self) -> bool:
        """Any target checked on each request (ttft, tpot, e2e)."""
        return any(v is not None for v in (self.ttft_s, self.tpot_s, self.e2e_s))

    def run_level(self) -> bool:
        """Any target on a percentile of the run's distribution (``tbt_p99`` ...)."""
        return bool(self.percentiles)


def _dur(text: str, key: str) -> float:
    for suf in ("ms", "us", "s"):
        if text.endswith(suf):
            try:
                v = float(text[: -len(suf)]) * _UNITS[suf]
            except ValueError:
                break
            if v > 0 and math.isfinite(v):
                return v
            break
    raise WorkloadError(Problem(f"{key}: expected a duration like 2s, 200ms or 500us, got "
                                f"{text!r}", "--slo"))


def parse_slo(text: str, attainment: float = 0.9) -> SLO:
    """``ttft=2s,tpot=100ms[,e2e=..][,METRIC_pQ=..]``.

    ``ttft``, ``tpot``, ``e2e`` are checked on each request (attainment = share of requests
    meeting all of them). ``METRIC_pQ`` (``tbt_p99``, ``ttft_p90``, ``tpot_p90``, ``ttft_p50``,
    ``e2e_p99``) is a run-level target on the Q-th percentile: Sarathi-Serve's capacity is
    ``tbt_p99=100ms,ttft_p50=2s`` (P99 TBT under the SLO, median scheduling delay under
    2 s); DistServe's is ``ttft_p90=200ms,tpot_p90=100ms``.

    Raises:
        WorkloadError: names ``--slo``, the bad key and the accepted forms.
    """
    vals: dict[str, float] = {}
    pct: list[tuple[str, float, float]] = []
    keys = ("ttft", "tpot", "e2e")
    metrics = ("ttft", "tpot", "tbt", "e2e")
    for part in filter(None, (x.strip() for x in text.split(","))):
        if "=" not in part:
            raise WorkloadError(Problem(f"expected KEY=DURATION with KEY in "
                                        f"{', '.join(keys)} or METRIC_pQ, got {part!r}",
                                        "--slo"))
        k, v = (x.strip() for x in part.split("=", 1))
        if k in keys:
            vals[k] = _dur(v, k)
            continue
        m, _, q = k.partition("_p")
        try:
            qv = float(q)
        except ValueError:
            qv = -1.0
        if m not in metrics or not 0 < qv < 100:
            raise WorkloadError(Problem(f"unknown SLO {k!r}; expected one of "
                                        f"{', '.join(keys)} or METRIC_pQ with METRIC in "
                                        f"{', '.join(metrics)} and 0 < Q < 100", "--slo"))
        pct.append((m, qv, _dur(v, k)))
    if not 0 < attainment <= 1:
        raise WorkloadError(Problem(f"expected an attainment in (0, 1], got {attainment!r}",
                                    "--attainment"))
    return SLO(vals.get("ttft"), vals.get("tpot"), vals.get("e2e"), tuple(pct), attainment)


def percentiles(x: Any) -> dict[str, float]:
    """mean, p50, p90, p99 (s) of ``x`` (zeros when empty)."""
    a = np.asarray(x, dtype=float)
    if a.size == 0:
        return {"mean": 0.0, "p50": 0.0, "p90": 0.0, "p99": 0.0}
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {"mean": float(a.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99)}


#: The percentiles a benchmark report gives (besides mean, median and standard deviation).
BENCH_PERCENTILES = (90.0, 99.0)
#: (key, section title, label) of each latency in a benchmark report, in vLLM's order.
_BENCH_METRICS = (("ttft", "Time to First Token", "TTFT"),
                  ("tpot", "Time per Output Token (excl. 1st token)", "TPOT"),
                  ("itl", "Inter-token Latency", "ITL"),
                  ("e2el", "End-to-end Latency", "E2EL"))


def latency_stats(x_s: Any) -> dict[str, float]:
    """mean, median, std, p90, p99 of latencies ``x_s`` (s) in ms (zeros when empty), as
    vLLM's ``benchmark_serving`` computes them (``numpy.mean/median/std/percentile``)."""
    a = np.asarray(x_s, dtype=float) * 1e3
    if a.size == 0:
        a = np.zeros(1)
    out = {"mean": float(a.mean()), "median": float(np.median(a)), "std": float(a.std())}
    for q in BENCH_PERCENTILES:
        out[f"p{q:g}"] = float(np.percentile(a, q))
    return out


@dataclass(frozen=True)
class BenchmarkReport:
    """A run reported the way serving benchmark tools report one (module doc).

    Attributes:
        concurrency: closed-loop clients (None: open-loop arrivals).
        completed, failed: finished requests; requests that could not be served.
        duration_s: first send to last finish (s).
        total_input_tokens, total_output_tokens: over the completed requests.
        request_throughput, output_throughput, total_token_throughput: per second of
            ``duration_s`` (req/s, tok/s).
        ttft_ms, tpot_ms, itl_ms, e2el_ms: :func:`latency_stats` of each latency (ms).
    """

    concurrency: int | None
    completed: int
    failed: int
    duration_s: float
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float
    output_throughput: float
    total_token_throughput: float
    ttft_ms: dict[str, float]
    tpot_ms: dict[str, float]
    itl_ms: dict[str, float]
    e2el_ms: dict[str, float]

    @classmethod
    def from_times(cls, concurrency: int | None, duration_s: float, send_s: Any,
                   first_s: Any, finish_s: Any, input_tokens: Any, output_tokens: Any,
                   itl_s: Any, failed: int = 0) -> BenchmarkReport:
        """The report of completed requests' send, first-token and finish times (s) and
        lengths (tokens), the pooled token gaps ``itl_s`` (s) and the run's duration (s)."""
        send, first, fin = (np.asarray(v, dtype=float) for v in (send_s, first_s, finish_s))
        n_in = np.asarray(input_tokens, dtype=np.int64)
        n_out = np.asarray(output_tokens, dtype=np.int64)
        ttft = first - send
        e2e = fin - send
        multi = n_out > 1
        tpot = (e2e[multi] - ttft[multi]) / (n_out[multi] - 1)
        dur = max(float(duration_s), 1e-12)
        tin, tout = int(n_in.sum()), int(n_out.sum())
        return cls(concurrency, int(send.size), failed, dur, tin, tout, send.size / dur,
                   tout / dur, (tin + tout) / dur, latency_stats(ttft), latency_stats(tpot),
                   latency_stats(itl_s), latency_stats(e2e))

    def to_dict(self) -> dict[str, Any]:
        """Flat, with vLLM ``benchmark_serving --save-result`` key names (``mean_ttft_ms``,
        ``median_tpot_ms``, ``p99_itl_ms``, ``request_throughput`` ...)."""
        d: dict[str, Any] = {"max_concurrency": self.concurrency, "completed": self.completed,
                             "failed": self.failed, "duration": self.duration_s,
                             "total_input_tokens": self.total_input_tokens,
                             "total_output_tokens": self.total_output_tokens,
                             "request_throughput": self.request_throughput,
                             "output_throughput": self.output_throughput,
                             "total_token_throughput": self.total_token_throughput}
        for key, _, _ in _BENCH_METRICS:
            for stat, v in getattr(self, f"{key}_ms").items():
                d[f"{stat}_{key}_ms"] = v
        return d

    def table(self) -> str:
        """The result block vLLM's ``benchmark_serving`` prints (same labels, same order,
        P90 and P99 as with ``--metric-percentiles 90,99``)."""
        def row(label: str, v: float | int, fmt: str = ".2f") -> str:
            return f"{label:<40} {v:<10{fmt}}".rstrip()
        lines = [f"{' Serving Benchmark Result ':=^50}",
                 row("Successful requests:", self.completed, "")]
        if self.failed:
            lines.append(row("Failed requests:", self.failed, ""))
        if self.concurrency is not None:
            lines.append(row("Maximum request concurrency:", self.concurrency, ""))
        lines += [row("Benchmark duration (s):", self.duration_s),
                  row("Total input tokens:", self.total_input_tokens, ""),
                  row("Total generated tokens:", self.total_output_tokens, ""),
                  row("Request throughput (req/s):", self.request_throughput),
                  row("Output token throughput (tok/s):", self.output_throughput),
                  row("Total Token throughput (tok/s):", self.total_token_throughput)]
        for key, title, label in _BENCH_METRICS:
            st = getattr(self, f"{key}_ms")
            lines.append(f"{' ' + title + ' ':-^50}")
            lines.append(row(f"Mean {label} (ms):", st["mean"]))
            lines.append(row(f"Median {label} (ms):", st["median"]))
            for q in BENCH_PERCENTILES:
                lines.append(row(f"P{q:g} {label} (ms):", st[f"p{q:g}"]))
        lines.append("=" * 50)
        return "\n".join(inert(line) for line in lines)


@dataclass(frozen=True)
class ServeResult:
    """One serving run, Result-shaped: latencies, rates, energy, area, provenance."""

    design: str
    model: str
    deployment: dict[str, Any]
    requests: int
    finished: int
    rejected: int
    clipped: int
    span_s: float
    ttft_s: dict[str, float]
    tpot_s: dict[str, float]
    tbt_s: dict[str, float]
    e2e_s: dict[str, float]
    requests_per_s: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    slo: dict[str, Any]
    slo_attainment: float
    goodput_rps: float
    meets_slo: bool
    kv_utilization: float
    kv_peak_utilization: float
    preemptions: int
    mfu: float
    mbu: float
    energy_j: float
    energy_per_output_token_j: float
    energy_per_request_j: float
    avg_power_w: float
    area_mm2: float
    devices: int
    mean_in_system: float
    completion_ratio: float
    sustained: bool
    kv_transfer: dict[str, float]
    evaluations: int
    archsim_version: str
    seed: int | None = None
    replicas: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def table(self, latencies: bool = True) -> str:
        """Readable summary (``latencies=False``: without the request, latency and
        throughput lines, e.g. under a :class:`BenchmarkReport` that gives them)."""
        def ms(d: dict[str, float]) -> str:
            return (f"p50 {d['p50'] * 1e3:9.2f}  p90 {d['p90'] * 1e3:9.2f}  "
                    f"p99 {d['p99'] * 1e3:9.2f}  mean {d['mean'] * 1e3:9.2f} ms")
        dep = self.deployment
        lines = [
            f"design     {self.design} x {self.devices} devices ({dep.get('summary', '')})",
            f"model      {self.model}   scheduler {dep.get('scheduler', '')}"]
        lat = [
            f"requests   {self.finished}/{self.requests} finished"
            + (f", {self.rejected} rejected (do not fit an empty KV cache)" if self.rejected
               else "") + (f", {self.clipped} clipped to the model context" if self.clipped
                           else "") + f" over {self.span_s:.3f} s",
            f"TTFT       {ms(self.ttft_s)}",
            f"TPOT       {ms(self.tpot_s)}",
            f"TBT (ITL)  {ms(self.tbt_s)}",
            f"E2E        {ms(self.e2e_s)}",
            f"throughput {self.requests_per_s:.3f} req/s   {self.output_tokens_per_s:,.1f} "
            f"output tok/s   {self.total_tokens_per_s:,.1f} tok/s (prompt + output)",
        ]
        if latencies:
            lines += lat
        if self.slo:
            lines.append(f"SLO        {self._slo_text()}: attainment "
                         f"{self.slo_attainment:.1%}, goodput {self.goodput_rps:.3f} req/s "
                         f"({'meets' if self.meets_slo else 'MISSES'} "
                         f"{self.slo.get('attainment', 0.9):.0%})")
        lines += [
            f"KV cache   mean {self.kv_utilization:.1%}, peak {self.kv_peak_utilization:.1%}"
            f" of blocks; {self.preemptions} preemptions",
            f"MFU        {self.mfu:.1%}   MBU {self.mbu:.1%} (busy iterations)",
            f"energy     {self.energy_j:.4g} J: {self.energy_per_output_token_j * 1e3:.4g} "
            f"mJ/output token, {self.energy_per_request_j:.4g} J/request; average power "
            f"{self.avg_power_w:,.1f} W",
            f"area       {self.area_mm2:,.1f} mm2 over {self.devices} devices",
        ]
        if self.kv_transfer.get("bytes"):
            lines.append(f"KV xfer    {self.kv_transfer['bytes'] / 1e9:.4g} GB, "
                         f"{self.kv_transfer['mean_s'] * 1e3:.3f} ms mean per request over "
                         f"{dep.get('link', '')}")
        lines.append("")
        lines.append(f"archsim {self.archsim_version}; {self.evaluations} evaluate() calls "
                     "priced the iterations")
        return "\n".join(inert(line) for line in lines)

    def _slo_text(self) -> str:
        parts = []
        for k in ("ttft_s", "tpot_s", "e2e_s"):
            v = self.slo.get(k)
            if v is not None:
                parts.append(f"{k[:-2]}={v * 1e3:g}ms")
        for m, q, v in self.slo.get("percentiles", ()):
            parts.append(f"{m}_p{q:g}={v * 1e3:g}ms")
        return ",".join(parts)
