"""Regenerate the small public-shaped traces shipped in ``archsim/serve/data``.

    python3 benchmarks/make_serve_traces.py

They are SYNTHETIC: Poisson arrivals at 1 request/s and lognormal lengths whose median
(or mean) matches a published statistic; the spreads (sigma) are our assumption. Seeds are
fixed, so the files regenerate byte for byte. Sources and parameters: archsim/serve/data/
README.md.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from archsim.serve.requests import DATA_DIR, LengthDist, synthesize, write_trace  # noqa: E402

#: name -> (prompt dist, output dist, seed, file suffix)
TRACES = {
    # vLLM (Kwon et al. SOSP'23, Sec. 6.1/Fig. 11): ShareGPT mean input 161, mean output 338
    # tokens; lognormal sigma 1.0 / 0.8 assumed -> median = mean / exp(sigma^2 / 2)
    "sharegpt_like": (LengthDist("lognormal", 161 / math.exp(0.5), 1.0, 4000),
                      LengthDist("lognormal", 338 / math.exp(0.32), 0.8, 2000), 101, ".jsonl"),
    # Splitwise (Patel et al. ISCA'24, Sec. III, Azure LLM inference trace 2023):
    # conversation median prompt 1020, median output 129 tokens; sigma 0.7 / 1.0 assumed
    "azure_conv_like": (LengthDist("lognormal", 1020, 0.7, 4000),
                        LengthDist("lognormal", 129, 1.0, 2000), 102, ".csv"),
    # coding: median prompt 1500, median output 13 tokens; sigma 0.7 / 1.0 assumed
    "azure_code_like": (LengthDist("lognormal", 1500, 0.7, 4000),
                        LengthDist("lognormal", 13, 1.0, 2000), 103, ".csv"),
}


def main() -> None:
    for name, (p, o, seed, suf) in TRACES.items():
        reqs = synthesize(1.0, 1000.0, p, o, seed=seed, max_requests=1000)
        write_trace(reqs, DATA_DIR / f"{name}{suf}")
        print(name, len(reqs), "requests")


if __name__ == "__main__":
    main()
