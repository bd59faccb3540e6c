"""Variable-length work in training: a step over documents of different lengths, packed into
the plan's sequences, with document (within-document causal) attention masks.

    from archsim import Varlen, search_plans
    from archsim.serve import LengthDist
    v = Varlen(LengthDist("lognormal", 1200, 1.2), packing="balanced",
               cp_sharding="per-document")          # or Varlen((4096, 512, 300, ...))
    found = search_plans("dgx_h100", "llama3-8b", 16, batch=64, seq=8192, varlen=v)
    print(found.best.varlen)                        # attention share, imbalance factors

Mechanism (docs/cluster.md, "Variable-length documents"):

* the documents come from a length distribution (``LengthDist`` of ``archsim.serve``, seeded)
  or an explicit list; a document longer than the sequence is cut into sequence-long pieces;
* packing fills ``batch`` sequences of ``seq`` tokens: ``fixed`` takes the documents in
  arrival order, first-fit; once every sequence is open, a document that fits nowhere is cut
  to fill the first sequence with room (as concatenate-and-cut packing does) until the step
  is full (the rest waits for the next step); ``balanced`` re-packs the same documents (and
  pieces) longest-first into the sequence of least attention work that has room
  (workload-aware packing, WLB-LLM); room left over (a list that runs out) is padding,
  computed like tokens;
* with a document mask a fused causal kernel scores, per document of ``l`` tokens,
  ``l (l + 1) / 2`` (query, key) pairs (``Attention.pairs``; a sliding window caps each row),
  so a sequence costs the sum over its documents instead of ``seq (seq + 1) / 2``; dense
  (unfused) attention scores the whole square and masks it, so its cost does not change;
* context parallelism: each of ``cp`` ranks holds a share of every sequence's tokens and the
  ranks run a microbatch's attention in lock-step (ring exchange), so the rank with the most
  pairs sets the time: ``contiguous`` (rank ``r`` holds the ``r``-th ``seq/cp`` tokens),
  ``zigzag`` (the sequence in ``2 cp`` chunks, rank ``r`` holds chunks ``r`` and
  ``2cp-1-r``: Megatron-Core's load balancing, exact for one document) or ``per-document``
  (every document in ``2 cp`` chunks the same way: WLB-LLM's per-document sharding);
* each microbatch ``j`` then has an attention factor ``a_j = cp max_r P_r(j) / (mb
  pairs(seq))`` over the uniform microbatch the plan prices (one full-length document per
  sequence); its stage times are ``t_f + (a_j - 1) A_f`` and ``t_b + (a_j - 1) A_b`` with
  ``A`` the stage's attention-core time, and the pipeline of unequal microbatches is the flow
  shop ``sum_j (f_j + b_j) + (p - 1)/v (max f + max b)`` (the slowest microbatch sets each
  pipeline slot of the ramp); data-parallel replicas wait for the slowest one.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from archsim.serve.requests import LengthDist, parse_length
from archsim.workloads.errors import ConfigError, Problem, WorkloadError
from archsim.workloads.parallel import ParallelPlan

__all__ = ["Varlen", "PACKINGS", "CP_SHARDINGS", "parse_doc_lengths", "pack", "doc_pairs",
           "rank_pairs", "microbatch_factors", "VarlenStats", "stats", "pipeline_varlen",
           "VarlenStep", "varlen_step"]

#: Packing policies (module doc).
PACKINGS = ("fixed", "balanced")
#: How a sequence's tokens are split over the context-parallel ranks (module doc).
CP_SHARDINGS = ("zigzag", "contiguous", "per-document")
#: Documents one step may hold (a guard against a distribution of one-token documents).
MAX_DOCUMENTS = 2_000_000


@dataclass(frozen=True)
class Varlen:
    """A training step over variable-length documents.

    Attributes:
        lengths: a length distribution (documents drawn from it, seeded) or an explicit list
            of document lengths in tokens (taken in order).
        packing: ``fixed`` or ``balanced`` (:data:`PACKINGS`).
        cp_sharding: ``zigzag``, ``contiguous`` or ``per-document`` (:data:`CP_SHARDINGS`).
        seed: seed of the draws from a distribution.
    """

    lengths: LengthDist | tuple[int, ...]
    packing: str = "fixed"
    cp_sharding: str = "zigzag"
    seed: int = 0

    def check(self) -> None:
        """Raises ConfigError naming the flag of a bad choice."""
        if self.packing not in PACKINGS:
            raise ConfigError(Problem(f"expected one of {', '.join(PACKINGS)}, got "
                                      f"{self.packing!r}", "--packing"))
        if self.cp_sharding not in CP_SHARDINGS:
            raise ConfigError(Problem(f"expected one of {', '.join(CP_SHARDINGS)}, got "
                                      f"{self.cp_sharding!r}", "--cp-sharding"))
        if isinstance(self.lengths, tuple) and (
                not self.lengths or any(not isinstance(x, int) or isinstance(x, bool) or x < 1
                                        for x in self.lengths)):
            raise ConfigError(Problem("expected a non-empty list of document lengths >= 1",
                                      "--doc-lengths"))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(Problem(f"expected an integer >= 0, got {self.seed!r}",
                                      "--doc-seed"))


def parse_doc_lengths(text: str, flag: str = "--doc-lengths") -> LengthDist | tuple[int, ...]:
    """``N``, ``uniform:A:B``, ``lognormal:MEDIAN:SIGMA`` (the serving side's forms) or a file
    of document lengths (integers separated by white space or commas; ``#`` comments).

    Raises:
        ConfigError: names ``flag`` (and the file and line of a bad entry).
    """
    p = Path(text)
    if p.is_file():
        out: list[int] = []
        for no, line in enumerate(p.read_text().splitlines(), 1):
            for tok in re.split(r"[\s,]+", line.split("#", 1)[0].strip()):
                if not tok:
                    continue
                if not tok.isdigit() or int(tok) < 1:
                    raise ConfigError(Problem(f"expected document lengths (integers >= 1), "
                                              f"got {tok!r}", flag, f"{p}:{no}"))
                out.append(int(tok))
        if not out:
            raise ConfigError(Problem("the file holds no document lengths", flag, str(p)))
        return tuple(out)
    try:
        return parse_length(text, flag)
    except WorkloadError:
        raise ConfigError(Problem(f"expected N, uniform:A:B, lognormal:MEDIAN:SIGMA (tokens) "
                                  f"or a file of document lengths, got {text!r}", flag)
                          ) from None


def _pieces(lengths: Iterable[int], seq: int, need: int) -> list[int]:
    """Documents of ``lengths`` tokens, in order, each as ``seq``-long pieces and the rest,
    up to the first piece that brings the total to ``need`` tokens (a step of ``need``
    tokens places every piece whole or cut, in order, so pieces past that one are never
    used: a document of 10^8 tokens costs its first ``need / seq`` pieces, not 10^8 / seq)."""
    out: list[int] = []
    for x in lengths:
        x = int(x)
        if need <= 0:
            break
        whole = min(x // seq, -(-need // seq))
        out.extend([seq] * whole)
        need -= whole * seq
        if need > 0 and x % seq:
            out.append(x % seq)
            need -= x % seq
    return out


def pack(v: Varlen, batch: int, seq: int, dp: int = 1,
         microbatches: int = 1) -> tuple[tuple[int, ...], ...]:
    """The ``batch`` sequences of one step, each the lengths of its documents (module doc), in
    the order the plan takes them (sequence ``i`` to replica ``i // (m mb)``, microbatch
    ``(i mod m mb) // mb``): ``fixed`` in arrival order, ``balanced`` dealt heaviest first
    over the ``dp x microbatches`` groups in snake order (replicas first), so no replica or
    microbatch collects the heavy sequences.

    Raises:
        ConfigError: the step would need more than :data:`MAX_DOCUMENTS` documents.
    """
    v.check()
    room = np.full(batch, seq, dtype=np.int64)
    bins: list[list[int]] = [[] for _ in range(batch)]
    opened = 0
    placed: list[int] = []
    rng = None if isinstance(v.lengths, tuple) else np.random.default_rng(v.seed)
    docs = (_pieces(v.lengths, seq, batch * seq) if isinstance(v.lengths, tuple) else [])
    i = 0
    while True:
        if i >= len(docs):
            if rng is None or not room.any():   # (a full step draws no more documents)
                break
            if len(placed) > MAX_DOCUMENTS:
                raise ConfigError(Problem(f"a step of {batch} x {seq} tokens needs more than "
                                          f"{MAX_DOCUMENTS:,} documents of this distribution",
                                          "--doc-lengths"))
            assert isinstance(v.lengths, LengthDist)
            docs = _pieces(v.lengths.sample(rng, 4096).tolist(), seq, int(room.sum()))
            i = 0
        d = docs[i]
        fit = np.flatnonzero(room[:opened] >= d)
        if fit.size:
            k = int(fit[0])
        elif opened < batch:
            k = opened
            opened += 1
        else:                      # fits nowhere: cut to fill the first sequence with room
            open_ = np.flatnonzero(room > 0)
            if not open_.size:
                break              # the step is full; the rest waits for the next one
            k = int(open_[0])
            docs[i] = d - int(room[k])
            d = int(room[k])
            i -= 1
        room[k] -= d
        bins[k].append(d)
        placed.append(d)
        i += 1
    if v.packing == "fixed":
        return tuple(tuple(b) for b in bins)
    return _deal(_balanced(placed, batch, seq), dp, microbatches)


def _deal(seqs: tuple[tuple[int, ...], ...], dp: int, m: int) -> tuple[tuple[int, ...], ...]:
    """Sequences dealt heaviest first (attention pairs) over the ``dp x m`` groups in snake
    order, group ``g`` = microbatch ``g // dp`` of replica ``g mod dp``; returned in the
    plan's order (replica, microbatch, sequence)."""
    groups = dp * m
    if groups <= 1 or len(seqs) % groups:
        return seqs
    order = sorted(seqs, key=lambda d: -sum(x * (x + 1) // 2 for x in d))
    slots: list[list[tuple[int, ...]]] = [[] for _ in range(groups)]
    for t in range(0, len(order), groups):
        row = order[t:t + groups]
        for g, d in zip(range(groups) if (t // groups) % 2 == 0 else
                        range(groups - 1, -1, -1), row, strict=False):
            slots[g].append(d)
    return tuple(d for r in range(dp) for j in range(m) for d in slots[j * dp + r])


def _balanced(docs: list[int], batch: int, seq: int) -> tuple[tuple[int, ...], ...]:
    """Longest first into the sequence of least attention pairs with room; a document that
    fits nowhere is split over the sequence with the most room (rare: the fixed packing
    held these documents)."""
    room = np.full(batch, seq, dtype=np.int64)
    load = np.zeros(batch)
    bins: list[list[int]] = [[] for _ in range(batch)]
    todo = sorted(docs, reverse=True)
    while todo:
        d = todo.pop(0)
        ok = room >= d
        if ok.any():
            k = int(np.argmin(np.where(ok, load, np.inf)))
        else:
            k = int(np.argmax(room))
            rest = d - int(room[k])
            d = int(room[k])
            todo.append(rest)
            todo.sort(reverse=True)
        room[k] -= d
        load[k] += d * (d + 1) / 2
        bins[k].append(d)
    return tuple(tuple(b) for b in bins)


def _prefix_pairs(n: int, window: int) -> int:
    """Pairs of the first ``n`` query rows of one causal document: ``sum_{i<n} min(i+1, w)``
    (``w`` <= 0: no window)."""
    if n <= 0:
        return 0
    if window <= 0 or n <= window:
        return n * (n + 1) // 2
    return window * (window + 1) // 2 + (n - window) * window


def doc_pairs(length: int, window: int = 0) -> int:
    """(query, key) pairs one causal document of ``length`` tokens scores per head:
    ``l (l + 1) / 2`` (``Attention.pairs`` with ``q = kv = l``; a window caps each row)."""
    return _prefix_pairs(length, window)


def _chunks(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` near-equal [start, end) chunks of ``n`` positions."""
    return [(k * n // parts, (k + 1) * n // parts) for k in range(parts)]


def rank_pairs(docs: Sequence[int], seq: int, cp: int, sharding: str,
               window: int = 0) -> list[int]:
    """Pairs each of ``cp`` ranks scores for one packed sequence (module doc)."""
    return list(_rank_pairs(tuple(docs), seq, cp, sharding, window))


@functools.lru_cache(maxsize=1 << 16)
def _rank_pairs(docs: tuple[int, ...], seq: int, cp: int, sharding: str,
                window: int) -> tuple[int, ...]:
    """:func:`rank_pairs`, memoised (a plan search asks for the same sequences per plan)."""
    starts = np.cumsum([0, *docs])
    out = [0] * cp
    if sharding == "per-document":
        for ln in docs:
            for k, (a, b) in enumerate(_chunks(ln, 2 * cp)):
                r = k if k < cp else 2 * cp - 1 - k
                out[r] += _prefix_pairs(b, window) - _prefix_pairs(a, window)
        return tuple(out)
    if sharding == "contiguous":
        owner = [(a, b, r) for r, (a, b) in enumerate(_chunks(seq, cp))]
    else:
        owner = [(a, b, k if k < cp else 2 * cp - 1 - k)
                 for k, (a, b) in enumerate(_chunks(seq, 2 * cp))]
    for s0, ln in zip(starts[:-1], docs, strict=True):
        s0 = int(s0)
        for a, b, r in owner:
            lo, hi = max(a, s0), min(b, s0 + ln)
            if lo < hi:
                out[r] += _prefix_pairs(hi - s0, window) - _prefix_pairs(lo - s0, window)
    return tuple(out)


def microbatch_factors(packed: Sequence[Sequence[int]], dp: int, microbatches: int, seq: int,
                       cp: int, sharding: str, window: int = 0,
                       busiest: bool = True) -> np.ndarray:
    """Attention factor ``a`` of every (dp replica, microbatch): the busiest cp rank's pairs
    over those of the uniform microbatch (one full-length document per sequence, split evenly
    over the ranks): ``cp max_r P_r / (mb pairs(seq))`` (module doc; the time). With
    ``busiest`` False the mean rank's, ``sum_r P_r / (mb pairs(seq))`` (the FLOPs).
    Shape (dp, m)."""
    mb = len(packed) // (dp * microbatches)
    per = np.array([rank_pairs(d, seq, cp, sharding, window) for d in packed], dtype=np.float64)
    per = per.reshape(dp, microbatches, mb, cp).sum(axis=2)
    full = mb * doc_pairs(seq, window)
    if not busiest:
        return per.sum(axis=2) / full
    return per.max(axis=2) * cp / full


@dataclass(frozen=True)
class VarlenStats:
    """What the documents did to a step.

    Attributes:
        documents: documents (pieces) packed in the step.
        padding: fraction of the step's tokens that are padding.
        attention_fraction: attention pairs scored with document masks over those of full
            causal sequences (cp = 1 view; 1 for one full-length document per sequence).
        pp_imbalance: slowest microbatch's attention factor over the mean (worst replica).
        cp_imbalance: busiest cp rank's pairs over the mean rank's (worst microbatch).
        dp_imbalance: slowest replica's step over the mean replica's.
        packing, cp_sharding: the policies.
    """

    documents: int
    padding: float
    attention_fraction: float
    pp_imbalance: float
    cp_imbalance: float
    dp_imbalance: float
    packing: str
    cp_sharding: str

    def row(self) -> dict[str, float | int | str]:
        """JSON-able."""
        return dict(self.__dict__)


def stats(packed: Sequence[Sequence[int]], dp: int, microbatches: int, seq: int, cp: int,
          sharding: str, packing: str, window: int = 0) -> tuple[VarlenStats, np.ndarray]:
    """The statistics of a packed step and its factors (:func:`microbatch_factors`)."""
    a = microbatch_factors(packed, dp, microbatches, seq, cp, sharding, window)
    tokens = sum(sum(d) for d in packed)
    pairs = sum(doc_pairs(x, window) for d in packed for x in d)
    cp_worst = 1.0
    if cp > 1:
        for d in packed:
            r = rank_pairs(d, seq, cp, sharding, window)
            if sum(r):
                cp_worst = max(cp_worst, max(r) * cp / sum(r))
    mean = a.mean(axis=1)
    pp = float(max((row.max() / m if m > 0 else 1.0) for row, m in zip(a, mean, strict=True)))
    return VarlenStats(documents=sum(len(d) for d in packed),
                       padding=1.0 - tokens / (len(packed) * seq),
                       attention_fraction=pairs / (len(packed) * doc_pairs(seq, window)),
                       pp_imbalance=pp, cp_imbalance=cp_worst, dp_imbalance=1.0,
                       packing=packing, cp_sharding=sharding), a


def pipeline_varlen(t_f: np.ndarray, t_b: np.ndarray, p: int, v: int = 1) -> float:
    """Step of a pipeline of unequal microbatches (forward ``t_f[j]``, backward ``t_b[j]``;
    ``t_b`` all 0 for inference): every stage runs microbatch ``j`` in the same time, so the
    flow shop's makespan is ``sum_j (f_j + b_j) + (p - 1)/v (max f + max b)``; equal
    microbatches give ``mapper.plan.pipeline_time``."""
    f, b = float(np.max(t_f)), float(np.max(t_b))
    if b == 0:
        return float(np.sum(t_f)) + (p - 1) * f
    return float(np.sum(t_f) + np.sum(t_b)) + (p - 1) / v * (f + b)


@dataclass(frozen=True)
class VarlenStep:
    """A step whose microbatches hold packed documents (:func:`varlen_step`).

    Attributes:
        pipe: the slowest replica's pipeline (s).
        slowest_delta_s: its stage time over the uniform microbatches', summed (s).
        slowest_work_s: its microbatches' stage times, summed (s).
        mean_delta_s: the mean replica's change of attention work (busy time, s; the mean cp
            rank's: the others wait).
        mean_delta_j: ... its energy change (J, one device).
        mean_delta_flops: ... its FLOPs change (one device).
        stats: :class:`VarlenStats`.
    """

    pipe: float
    slowest_delta_s: float
    slowest_work_s: float
    mean_delta_s: float
    mean_delta_j: float
    mean_delta_flops: float
    stats: VarlenStats


def varlen_step(v: Varlen, attention: Mapping[int, tuple[float, float, float, float]],
                plan: ParallelPlan, batch: int, seq: int, t_f: float, t_b: float, train: bool,
                memo: dict, extra: tuple[Sequence[float], Sequence[float]] | None = None
                ) -> VarlenStep:
    """The pipeline of a step whose microbatches hold packed documents (module doc):
    microbatch ``j`` of replica ``r`` runs ``t_f + sum_w (a_rj(w) - 1) A_f(w)`` forward (and
    so backward), ``A`` the stage's causal attention-core time per microbatch with window
    ``w`` (``attention``: window -> forward s, backward s, J, FLOPs); each replica's pipeline
    is the flow shop of its microbatches (:func:`pipeline_varlen`); the slowest replica sets
    the step. ``memo`` keeps the packing between plans. ``extra``: what each microbatch's
    forward and backward pass grows by on every stage (an offload's exposed transfers,
    :func:`archsim.offload.offload_pipeline`), the same on every replica."""
    key = ("varlen-pack", v, batch, seq, plan.dp, plan.microbatches)
    if key not in memo:
        memo[key] = pack(v, batch, seq, plan.dp, plan.microbatches)
    packed = memo[key]
    m, dp = plan.microbatches, plan.dp
    w0 = min(attention, default=0)
    st, a0 = stats(packed, dp, m, seq, plan.cp, v.cp_sharding, v.packing, w0)
    d_f = np.zeros((dp, m))
    d_b = np.zeros((dp, m))
    d_busy = np.zeros((dp, m))    # the work itself (the mean cp rank): busy time, J, FLOPs
    d_e = np.zeros((dp, m))
    d_fl = np.zeros((dp, m))
    for w, (a_f, a_b, e_w, fl_w) in attention.items():
        a = a0 if w == w0 else microbatch_factors(packed, dp, m, seq, plan.cp, v.cp_sharding, w)
        am = microbatch_factors(packed, dp, m, seq, plan.cp, v.cp_sharding, w, False) - 1.0
        d_f += (a - 1.0) * a_f
        d_b += (a - 1.0) * a_b
        d_busy += am * (a_f + a_b)
        d_e += am * e_w
        d_fl += am * fl_w
    f = t_f + d_f
    b = t_b + d_b if train else np.zeros_like(d_b)
    if extra is not None:
        f = f + np.asarray(extra[0], dtype=float)
        b = b + np.asarray(extra[1], dtype=float)
    pipes = np.array([pipeline_varlen(f[r], b[r], plan.pp, plan.interleave if train else 1)
                      for r in range(dp)])
    r = int(np.argmax(pipes))
    mean_pipe = float(pipes.mean())
    st = replace(st, dp_imbalance=float(pipes[r]) / mean_pipe if mean_pipe > 0 else 1.0)
    return VarlenStep(pipe=float(pipes[r]), slowest_delta_s=float(d_f[r].sum() + d_b[r].sum()),
                      slowest_work_s=float(f[r].sum() + b[r].sum()),
                      mean_delta_s=float(d_busy.sum(1).mean()),
                      mean_delta_j=float(d_e.sum(1).mean()),
                      mean_delta_flops=float(d_fl.sum(1).mean()), stats=st)
