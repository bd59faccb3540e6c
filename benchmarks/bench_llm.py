"""LLM evaluation speed (issue 30, item 3): CPU seconds of four ``archsim run`` evaluations,
Llama-2-70B TP8 on H100 and Llama-3-8B on A100, prefill and decode.

    python3 benchmarks/bench_llm.py [--repeat 3]

Each case is one ``archsim.run_request.evaluate_request`` (what ``archsim run`` does: the
design's native formats and attention, batch 1, prefill 2048 tokens / decode at context
2048). CPU seconds (``time.process_time``), so a loaded machine does not skew them. "first"
is the first pass in a fresh process (imports excluded, caches empty); "warm" the best of
the later passes. Target: the four together <= 0.5 CPU-s warm; peers on the same four cases
(issue 30): GenZ 4.3 CPU-s, llm-analysis 0.86 CPU-s.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from archsim.run_request import RunRequest, evaluate_request  # noqa: E402

CASES = (
    ("llama2-70b TP8 prefill on h100", RunRequest(config="h100", model="llama2-70b",
                                                  phase="prefill", seq=2048, tp=8)),
    ("llama2-70b TP8 decode on h100", RunRequest(config="h100", model="llama2-70b",
                                                 phase="decode", context=2048, tp=8)),
    ("llama3-8b prefill on a100", RunRequest(config="a100", model="llama3-8b",
                                             phase="prefill", seq=2048)),
    ("llama3-8b decode on a100", RunRequest(config="a100", model="llama3-8b",
                                            phase="decode", context=2048)),
)
TARGET_CPU_S = 0.5
PEERS = "GenZ 4.3, llm-analysis 0.86"


def one_pass() -> list[tuple[str, float, float]]:
    """(case, CPU-s, latency s) of each case once."""
    out = []
    for label, req in CASES:
        t0 = time.process_time()
        res = evaluate_request(req)
        out.append((label, time.process_time() - t0, res.latency_s))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3, help="warm passes after the first")
    args = ap.parse_args()
    first = one_pass()
    warm = [one_pass() for _ in range(max(1, args.repeat))]
    print("| case | first CPU-s | warm CPU-s (best) | latency (s) |")
    print("|---|---|---|---|")
    for i, (label, cpu, lat) in enumerate(first):
        best = min(w[i][1] for w in warm)
        print(f"| {label} | {cpu:.3f} | {best:.3f} | {lat:.6g} |")
    tot_first = sum(c for _, c, _ in first)
    tot_warm = min(sum(c for _, c, _ in w) for w in warm)
    print(f"| **all four** | {tot_first:.3f} | {tot_warm:.3f} | target <= {TARGET_CPU_S} "
          f"warm; peers: {PEERS} |")


if __name__ == "__main__":
    main()
