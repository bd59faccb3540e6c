"""Requests: synthetic generators and trace files.

A :class:`Request` is (arrival time, prompt tokens, output tokens, priority). Sources:

* :func:`synthesize` — arrivals from a Poisson process (exponential gaps) or a gamma
  renewal process (gaps ``Gamma(k, 1/(k rate))``: mean ``1/rate``, coefficient of variation
  ``1/sqrt(k)``; ``k < 1`` is burstier than Poisson), prompt and output lengths from a
  :class:`LengthDist` (fixed, uniform or lognormal with given median and sigma);
* :func:`closed_loop` — the requests of a closed-loop benchmark (``N`` clients, each sending
  its next request when its previous one finishes, as vLLM's ``benchmark_serving
  --max-concurrency``, SGLang's ``bench_serving`` and genai-perf run it): lengths only, every
  ``arrival_s`` 0; the simulation sets each request's issue time when a client frees up;
* :func:`load_trace` — a CSV (header ``arrival_s,prompt_tokens,output_tokens[,priority]``)
  or JSONL file (one object per line with those keys). Parsing is strict: the first bad
  line raises one :class:`~workloads.errors.WorkloadError` naming ``file:line`` and what
  was expected (the CLI prints it and exits 2);
* the shipped traces in ``archsim/serve/data/`` (:func:`shipped_traces`): small synthetic
  traces generated with a fixed seed from published length statistics (see the README in
  that folder); they are public-*shaped*, not copies of the public datasets.

Everything is deterministic for a seed (``numpy.random.default_rng(seed)``).
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

from archsim.workloads.errors import Problem, WorkloadError

__all__ = ["Request", "LengthDist", "synthesize", "closed_loop", "load_trace", "write_trace", "parse_length",
           "shipped_traces", "trace_path", "DATA_DIR"]

DATA_DIR = Path(__file__).resolve().parent / "data"
_FIELDS = ("arrival_s", "prompt_tokens", "output_tokens")
#: Optional trace columns (a prefix group and its length come together).
_OPTIONAL = ("priority", "prefix_group", "prefix_tokens")
_OPT_TEXT = "optional priority, prefix_group with prefix_tokens"


@dataclass(frozen=True)
class Request:
    """One request.

    Attributes:
        rid: index in arrival order (0-based).
        arrival_s: arrival time (s).
        prompt_tokens: prompt length (tokens, >= 1).
        output_tokens: tokens to generate (>= 1; the first comes out of the prefill).
        priority: smaller is served first under the ``priority`` policy (default 0).
        prefix_group: the shared prefix this prompt starts with ("" none): requests of one
            group share its KV blocks (prefix caching, :mod:`archsim.workloads.kvtech`).
        prefix_tokens: that prefix's length (tokens, at most the prompt's).
    """

    rid: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    priority: int = 0
    prefix_group: str = ""
    prefix_tokens: int = 0


@dataclass(frozen=True)
class LengthDist:
    """A token-length distribution.

    Attributes:
        kind: ``fixed`` (``a``), ``uniform`` (integers in ``[a, b]``) or ``lognormal``
            (median ``a``, log-space standard deviation ``b``; clipped to ``[1, cap]``).
        a, b: parameters (see ``kind``).
        cap: upper clip (tokens) for ``lognormal``.
    """

    kind: str
    a: float
    b: float = 0.0
    cap: int = 1 << 20

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` integer lengths >= 1."""
        if self.kind == "fixed":
            return np.full(n, int(self.a), dtype=np.int64)
        if self.kind == "uniform":
            return rng.integers(int(self.a), int(self.b) + 1, size=n, dtype=np.int64)
        x = rng.lognormal(math.log(self.a), self.b, size=n)
        return np.clip(np.rint(x), 1, self.cap).astype(np.int64)

    @property
    def mean(self) -> float:
        """Expected value (tokens; lognormal ignores the clip)."""
        if self.kind == "fixed":
            return float(self.a)
        if self.kind == "uniform":
            return (self.a + self.b) / 2
        return float(self.a * math.exp(self.b ** 2 / 2))


def parse_length(text: str, flag: str) -> LengthDist:
    """Parse ``N`` (fixed), ``uniform:A:B`` or ``lognormal:MEDIAN:SIGMA``.

    Raises:
        WorkloadError: names ``flag`` and the accepted forms.
    """
    forms = "expected N, uniform:A:B or lognormal:MEDIAN:SIGMA (tokens)"
    parts = text.split(":")
    try:
        if len(parts) == 1:
            v = int(parts[0])
            if v >= 1:
                return LengthDist("fixed", v)
        elif parts[0] == "uniform" and len(parts) == 3:
            a, b = int(parts[1]), int(parts[2])
            if 1 <= a <= b:
                return LengthDist("uniform", a, b)
        elif parts[0] == "lognormal" and len(parts) == 3:
            med, sig = float(parts[1]), float(parts[2])
            if med >= 1 and 0 <= sig <= 5 and math.isfinite(med):
                return LengthDist("lognormal", med, sig)
    except ValueError:
        pass
    raise WorkloadError(Problem(f"{forms}, got {text!r}", flag))


#: Serving work one run accepts, in request-iterations (each request is in the batch for its
#: prefill iteration and one iteration per output token): 15-45 s of simulation on a 2-core
#: host at the 0.45-1.3e6 request-iterations/s measured for llama2-7b on gpu/h100 (short
#: outputs are the slow end: per-request work).
MAX_REQUEST_ITERATIONS = 20_000_000


def check_work(n_requests: float, mean_output: float, flags: str) -> None:
    """Refuse a run of ``n_requests`` x (``mean_output`` + 1) iterations over
    :data:`MAX_REQUEST_ITERATIONS` before anything is generated or simulated.

    Raises:
        WorkloadError: one line naming ``flags``, the estimate and the ``--max-requests``
            that would fit.
    """
    each = mean_output + 1
    work = n_requests * each
    if not work <= MAX_REQUEST_ITERATIONS:
        fit = int(MAX_REQUEST_ITERATIONS // each)
        raise WorkloadError(Problem(
            f"{flags}: ~{n_requests:.3g} requests x ~{each:.0f} iterations each = "
            f"{work:.3g} request-iterations, over the {MAX_REQUEST_ITERATIONS:.3g} one run "
            f"accepts; shorten the run or pass --max-requests N (N <= {fit})", ""))


def synthesize(rate: float, duration_s: float, prompt: LengthDist, output: LengthDist,
               seed: int = 0, arrival: str = "poisson", cv: float = 1.0,
               max_requests: int | None = None) -> list[Request]:
    """Requests arriving over ``[0, duration_s)``.

    Args:
        rate: mean arrival rate (requests/s, > 0).
        duration_s: arrival window (s).
        prompt, output: length distributions.
        seed: RNG seed (same seed -> same requests).
        arrival: ``poisson`` or ``gamma`` (renewal process with coefficient of variation
            ``cv`` of the gaps: shape ``k = 1/cv^2``).
        max_requests: stop after this many (None: until ``duration_s``).
    """
    if not rate > 0 or not math.isfinite(rate):
        raise WorkloadError(Problem(f"expected a rate > 0 requests/s, got {rate!r}", "--rate"))
    if not duration_s > 0:
        raise WorkloadError(Problem(f"expected a duration > 0 s, got {duration_s!r}",
                                    "--duration"))
    n_expected = rate * duration_s if max_requests is None else min(rate * duration_s,
                                                                     max_requests)
    flags = f"--rate {rate:g} x --duration {duration_s:g}" + (
        f" (--max-requests {max_requests})" if max_requests is not None else "")
    check_work(n_expected, output.mean, flags)
    rng = np.random.default_rng(_seed(seed))
    n_guess = int(rate * duration_s * 1.2 + 10 * math.sqrt(rate * duration_s) + 16)
    if max_requests is not None:
        n_guess = min(n_guess, max_requests)
    if arrival == "poisson":
        gaps = rng.exponential(1.0 / rate, size=n_guess)
    elif arrival == "gamma":
        if not cv > 0:
            raise WorkloadError(Problem(f"expected a gap CV > 0, got {cv!r}", "--cv"))
        k = 1.0 / cv ** 2
        gaps = rng.gamma(k, 1.0 / (k * rate), size=n_guess)
    else:
        raise WorkloadError(Problem(f"expected poisson or gamma, got {arrival!r}", "--arrival"))
    t = np.cumsum(gaps) - gaps[0]          # the first request arrives at t = 0
    t = t[t < duration_s]
    n = len(t)
    p = prompt.sample(rng, n)
    o = output.sample(rng, n)
    return [Request(i, float(t[i]), int(p[i]), int(o[i])) for i in range(n)]


def _seed(seed: int | None) -> int | None:
    """``seed``, refused unless an integer >= 0 or None (numpy's own error names no flag)."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer)
                             or seed < 0):
        raise WorkloadError(Problem(f"expected a seed: an integer >= 0, got {seed!r}",
                                    "--seed"))
    return seed


def closed_loop(count: int, prompt: LengthDist, output: LengthDist, seed: int = 0
                ) -> list[Request]:
    """``count`` requests of a closed-loop run, in the order the clients send them.

    Lengths are drawn as :func:`synthesize` draws them (prompts, then outputs, from
    ``numpy.random.default_rng(seed)``); ``arrival_s`` is 0: the simulation issues request
    ``i`` when a client is free (:class:`~archsim.serve.cluster.Simulation`,
    ``concurrency``).

    Raises:
        WorkloadError: ``count`` < 1 (names ``--requests``).
    """
    if count < 1:
        raise WorkloadError(Problem(f"expected a request count >= 1, got {count!r}",
                                    "--requests"))
    rng = np.random.default_rng(_seed(seed))
    p = prompt.sample(rng, count)
    o = output.sample(rng, count)
    return [Request(i, 0.0, int(p[i]), int(o[i])) for i in range(count)]


def _bad(file: str, line: int, msg: str) -> WorkloadError:
    return WorkloadError(Problem(msg, "", file, line))


def _num(file: str, line: int, key: str, v: object, integer: bool) -> float:
    if isinstance(v, bool):
        raise _bad(file, line, f"{key}: expected a number, got {v!r}")
    try:
        x = float(v) if not isinstance(v, (int, float)) else v  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise _bad(file, line, f"{key}: expected a number, got {v!r}") from None
    if not math.isfinite(x):
        raise _bad(file, line, f"{key}: expected a finite number, got {v!r}")
    if integer:
        if x != int(x) or x < (0 if key == "priority" else 1):
            low = 0 if key == "priority" else 1
            raise _bad(file, line, f"{key}: expected an integer >= {low}, got {v!r}")
    elif x < 0:
        raise _bad(file, line, f"{key}: expected a time >= 0 s, got {v!r}")
    return x


def _row(file: str, line: int, rec: dict[str, object], prev: float, rid: int) -> Request:
    missing = [k for k in _FIELDS if k not in rec or rec[k] in ("", None)]
    if missing:
        raise _bad(file, line, f"missing {', '.join(missing)}; expected keys "
                               f"{', '.join(_FIELDS)} ({_OPT_TEXT})")
    extra = sorted(set(rec) - set(_FIELDS) - set(_OPTIONAL))
    if extra:
        raise _bad(file, line, f"unknown key(s) {', '.join(extra)}; expected "
                               f"{', '.join(_FIELDS)} ({_OPT_TEXT})")
    t = _num(file, line, "arrival_s", rec["arrival_s"], False)
    if t < prev:
        raise _bad(file, line, f"arrival_s: expected arrivals in non-decreasing order, got "
                               f"{t!r} after {prev!r}")
    p = int(_num(file, line, "prompt_tokens", rec["prompt_tokens"], True))
    o = int(_num(file, line, "output_tokens", rec["output_tokens"], True))
    pr = int(_num(file, line, "priority", rec.get("priority", 0) or 0, True))
    group = str(rec.get("prefix_group", "") or "").strip()
    pt = rec.get("prefix_tokens", "")
    if bool(group) != (pt not in ("", None, 0, "0")):
        raise _bad(file, line, "prefix_group and prefix_tokens come together: a shared "
                               "prefix's name and its length (tokens)")
    n = int(_num(file, line, "prefix_tokens", pt, True)) if group else 0
    if n > p:
        raise _bad(file, line, f"prefix_tokens: expected at most the prompt's {p} tokens, "
                               f"got {n}")
    return Request(rid, float(t), p, o, pr, group, n)


def load_trace(path: str | Path, max_rows: int | None = None) -> list[Request]:
    """Read a CSV or JSONL trace (by suffix: ``.csv``, ``.jsonl``/``.json``), line by line,
    stopping once ``max_rows`` requests are read (None: the whole file).

    Raises:
        WorkloadError: unreadable file, unknown suffix, or the first bad line (``file:line``
            and what was expected). An empty trace is an error.
    """
    p = Path(path)
    name = str(path)
    if not p.is_file():
        raise WorkloadError(Problem("no such trace file", "--trace", name))
    if p.suffix not in (".csv", ".jsonl", ".json"):
        raise WorkloadError(Problem(f"unknown trace format {p.suffix!r}; expected .csv or "
                                    ".jsonl", "--trace", name))
    out: list[Request] = []
    try:
        # a spreadsheet's BOM is not a header
        with open(p, encoding="utf-8-sig", newline="") as fh:
            _read_rows(fh, name, p.suffix == ".csv", out, max_rows)
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(Problem(f"cannot read the trace: {exc}", "--trace", name)) from None
    if not out:
        raise WorkloadError(Problem("the trace has no requests", "--trace", name))
    return out


def _read_rows(fh: TextIO, name: str, is_csv: bool, out: list[Request],
               max_rows: int | None) -> None:
    """Append the requests of an open trace to ``out`` (at most ``max_rows``)."""
    header: list[str] | None = None
    prev = 0.0
    for i, line in enumerate(fh, start=1):
        if max_rows is not None and len(out) >= max_rows:
            return
        line = line.rstrip("\r\n")
        if is_csv and header is None:
            header = [h.strip() for h in next(csv.reader([line]), [])]
            if any(k not in header for k in _FIELDS) or len(set(header)) != len(header):
                raise _bad(name, 1, f"expected a header with {', '.join(_FIELDS)} "
                                    f"({_OPT_TEXT}), got {','.join(header)}")
            continue
        if not line.strip():
            continue
        if is_csv:
            assert header is not None
            row = next(csv.reader([line]), [])
            if all(not c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise _bad(name, i, f"expected {len(header)} comma-separated values, "
                                    f"got {len(row)}")
            rec: dict[str, object] = {h: c.strip() for h, c in zip(header, row)}
        else:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise _bad(name, i, f"not valid JSON ({exc.msg}); expected one object per "
                                    "line") from None
            if not isinstance(obj, dict):
                raise _bad(name, i, f"expected a JSON object, got {type(obj).__name__}")
            rec = obj
        r = _row(name, i, rec, prev, len(out))
        prev = r.arrival_s
        out.append(r)
    if is_csv and header is None:
        raise _bad(name, 1, "empty trace; expected a header arrival_s,prompt_tokens,"
                            "output_tokens")


def write_trace(requests: list[Request], path: str | Path) -> None:
    """Write a CSV or JSONL trace (by suffix) that :func:`load_trace` reads back."""
    p = Path(path)
    if p.suffix == ".csv":
        lines = [",".join(_FIELDS)]
        lines += [f"{r.arrival_s:.6f},{r.prompt_tokens},{r.output_tokens}" for r in requests]
    else:
        lines = [json.dumps({"arrival_s": round(r.arrival_s, 6),
                             "prompt_tokens": r.prompt_tokens,
                             "output_tokens": r.output_tokens}) for r in requests]
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")


def shipped_traces() -> list[str]:
    """Names of the traces shipped in ``archsim/serve/data``."""
    return sorted(q.stem for q in DATA_DIR.glob("*.csv")) + sorted(
        q.stem for q in DATA_DIR.glob("*.jsonl"))


def trace_path(name: str) -> Path:
    """A trace file path, or a shipped trace name (``sharegpt_like``)."""
    p = Path(name)
    if p.suffix in (".csv", ".jsonl", ".json") or p.exists():
        return p
    for suffix in (".csv", ".jsonl"):
        q = DATA_DIR / f"{name}{suffix}"
        if q.is_file():
            return q
    raise WorkloadError(Problem(f"no trace file or shipped trace called {name!r}; shipped: "
                                f"{', '.join(shipped_traces())}", "--trace"))
