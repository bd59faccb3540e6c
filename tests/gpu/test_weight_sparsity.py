"""Unstructured weight sparsity as sparse loads + dense tensor-core MMA (issue 31, item 4a;
Flash-LLM / SpInfer): the weights travel bitmap-compressed (``density x bytes + 1/8`` B per
element), each CTA expands its tile into shared memory, the MMAs stay dense.

Closed forms worked out here: the decode GEMV is HBM-bound, so its HBM time is the
compressed bytes over the sustained bandwidth; a compute-bound prefill GEMM pays the
expansion and never gets faster than the dense one. Refusals: a non-GPU design, training,
a fraction outside [0, 1).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gpu_helpers import gpu  # noqa: E402

from archsim.api import check_weight_sparsity, device_build, load  # noqa: E402
from archsim.cli import main  # noqa: E402
from archsim.parallel import shape_of  # noqa: E402
from archsim.run_request import RunRequest, evaluate_request  # noqa: E402
from archsim.workloads.errors import MappingError, WorkloadError  # noqa: E402
from archsim.workloads.formats import FORMATS  # noqa: E402
from archsim.workloads.graph import SPARSE_WEIGHT_ROLES  # noqa: E402
from archsim.workloads.ops import Gemm, Sparsity  # noqa: E402
from archsim.workloads.zoo import build  # noqa: E402

FP16 = FORMATS["fp16"]
N, K = 28672, 8192          # Llama-3-70B's FFN up projection (one TP shard's worth: 8 x)
SP60 = Sparsity(density=0.4, encoding="bitmap")
DENSE = Sparsity()


def _gemm(m: int, sp: Sparsity = DENSE) -> Gemm:
    return Gemm(name="g", m=m, n=N, k=K, a_format=FP16, w_format=FP16, w_sparsity=sp)


def test_bitmap_bytes_closed_form():
    # 60% zeros, fp16: 0.4 x 2 B of values + 1 bit of bitmap per element = 0.925 B/element
    assert SP60.stored_bytes_per_element(2.0) == pytest.approx(0.4 * 2 + 1 / 8)
    assert _gemm(1, SP60).weight_bytes() == pytest.approx(N * K * 0.925)
    # the index encoding (CSR / tiled-CSL: 2 B value + 2 B index per non-zero) costs more
    # above 1/16 density: 0.4 x 4 = 1.6 B/element
    assert Sparsity(density=0.4).stored_bytes_per_element(2.0) == pytest.approx(1.6)


def test_decode_gemv_time_is_compressed_bytes_over_bandwidth():
    u = gpu("h100")
    bw = u.spec.memory.sustained_bytes_per_s
    e = u.estimate(_gemm(1, SP60))
    # A (1 x K) and C (1 x N) fp16 are read / written once: K + N elements of 2 B
    moved = N * K * 0.925 + (K + N) * 2
    assert e.dram_read_bytes + e.dram_write_bytes == pytest.approx(moved, rel=1e-3)
    assert e.details["hbm_s"] == pytest.approx(moved / bw, rel=1e-3)
    assert e.bound == "memory"
    dense = u.estimate(_gemm(1))
    # the kernel's time falls by the byte ratio 0.925 / 2, less the fixed launch share
    ratio = e.latency_s / dense.latency_s
    assert 0.925 / 2 <= ratio <= 0.925 / 2 + 0.03


def test_prefill_pays_the_expansion():
    """Compute-bound (M = 4096): the MMAs are the dense ones; the expansion's shared-memory
    writes and INT32 decode ops only add, so the sparse kernel is never faster."""
    u = gpu("h100")
    dense = u.estimate(_gemm(4096))
    sparse = u.estimate(_gemm(4096, SP60))
    assert dense.bound == "compute"
    assert sparse.bound in ("compute", "feed")      # on chip: MMA, or the expansion feeding it
    assert sparse.latency_s >= dense.latency_s
    assert sparse.macs == dense.macs


def test_workload_sparsifies_the_blocks_linear_layers_only():
    wl = build("llama3-8b", phase="decode", batch=1, context=128)
    sp = wl.with_weight_sparsity(0.6)
    for a, b in zip(wl.ops(), sp.ops(), strict=True):
        hit = isinstance(a, Gemm) and a.b_is_weight and a.role in SPARSE_WEIGHT_ROLES
        assert (b.w_sparsity == SP60) if hit else (b == a), a.name
    assert any(op.role == "lm_head" for op in sp.ops())    # the head is there and dense
    assert wl.with_weight_sparsity(0.0) is wl


def test_device_build_weight_bytes():
    b = device_build(load("h100"), w_format="fp16", weight_sparsity=0.6)
    head, blocks = b.weight_bytes(shape_of("llama3-8b"), "decode")
    assert (head, blocks) == (2.0, pytest.approx(0.925))


def test_refused_off_gpu_and_in_training():
    with pytest.raises(MappingError, match="--weight-sparsity.*dram_pim unit"):
        check_weight_sparsity(load("pim_gpt"), 0.6)
    check_weight_sparsity(load("pim_gpt"), 0.0)             # dense: nothing to refuse
    with pytest.raises(WorkloadError, match=r"--weight-sparsity.*\[0, 1\)"):
        check_weight_sparsity(load("h100"), 1.0)
    b = device_build(load("h100"), weight_sparsity=0.5)
    with pytest.raises(WorkloadError, match="--weight-sparsity.*inference kernel"):
        b.graph(shape_of("llama3-8b"), "train", 1, 128, None)


@pytest.mark.parametrize("args", [
    ["run", "pim_gpt", "--model", "llama3-8b", "--phase", "decode", "--weight-sparsity", "0.6"],
    ["run", "h100", "--model", "llama3-8b", "--phase", "train", "--weight-sparsity", "0.6"],
    ["run", "h100", "--model", "llama3-8b", "--weight-sparsity", "1"],
    ["plan", "h100", "--model", "llama3-8b", "--devices", "2", "--phase", "train",
     "--weight-sparsity", "0.5"],
])
def test_cli_refusals_exit_2_naming_the_flag(capsys, args):
    try:
        code = main(args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2
    assert "--weight-sparsity" in err and "Traceback" not in err


def test_run_decode_faster_by_the_block_bytes():
    """Whole-model decode on H100 (batch 1): the blocks' weight bytes shrink to 0.925/2 of
    dense, the head and embedding do not; the step falls, but by less than the byte ratio."""
    def step(fraction: float) -> float:
        req = RunRequest(config="h100", model="llama3-8b", phase="decode", context=1024,
                         weight_sparsity=fraction)
        return evaluate_request(req).latency_s
    dense, sparse = step(0.0), step(0.6)
    assert 0.925 / 2 < sparse / dense < 1.0
