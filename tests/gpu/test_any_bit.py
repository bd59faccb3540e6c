"""Any-bit GEMM kernels as the mixed-precision baseline family (issue 31, item 4c): weights
of 2-8 bits streamed at their width (+ group scales), MMA at the activation's format.

Closed forms worked out here: weight bytes = bits/8 per element + one scale and one zero
point (activation format) per group; a decode GEMV is HBM-bound, so its HBM time is those
bytes (+ the activation vector and output) over the sustained bandwidth; integer
activations run ``ceil(a/f) * ceil(w/f)`` passes on the int``f`` tensor cores.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gpu_helpers import gpu  # noqa: E402

from archsim.workloads.formats import FORMATS  # noqa: E402
from archsim.workloads.ops import Gemm  # noqa: E402

N, K, G = 28672, 8192, 128
BITS = (2, 3, 4, 5, 6, 7, 8)


@pytest.mark.parametrize("bits", BITS)
def test_weight_bytes_closed_form(bits):
    g = Gemm(name="g", m=1, n=N, k=K, a_format=FORMATS["fp16"],
             w_format=FORMATS[f"int{bits}"], group_size=G)
    # packed values + (fp16 scale + fp16 zero) per group of 128 along K
    assert g.weight_bytes() == pytest.approx(K * N * bits / 8 + (K // G) * N * 2 * 2)


@pytest.mark.parametrize("bits", BITS)
def test_decode_gemv_streams_the_weights_at_their_width(bits):
    u = gpu("h100")
    g = Gemm(name="g", m=1, n=N, k=K, a_format=FORMATS["fp16"],
             w_format=FORMATS[f"int{bits}"], group_size=G)
    e = u.estimate(g)
    moved = K * N * bits / 8 + (K // G) * N * 4 + (K + N) * 2
    assert e.bound == "memory"
    assert e.details["hbm_s"] == pytest.approx(moved / u.spec.memory.sustained_bytes_per_s,
                                               rel=1e-3)


@pytest.mark.parametrize(("a", "w", "passes"), [("int4", "int5", 2), ("int4", "int3", 1),
                                                 ("int8", "int7", 1), ("int8", "int6", 1)])
def test_integer_activations_run_digit_passes(a, w, passes):
    """A100 has int8 and int4 tensor cores: W5A4 = 1 x 2 int4 passes, W3A4 = one int4 pass,
    W7A8 / W6A8 = one int8 pass."""
    u = gpu("a100")
    g = Gemm(name="g", m=4096, n=4096, k=4096, a_format=FORMATS[a], w_format=FORMATS[w])
    assert u.estimate(g).details["passes"] == passes
