"""Loop-nest mapping analysis: hand-worked access counts (WS, OS, IS), tile coverage,
feasibility reasons."""

from __future__ import annotations

import math
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.dataflow import (
    ArchParams,
    Mapping,
    Shape,
    analyse,
    cost,
    feasible,
    iterate,
    make,
    tile_shape,
)

M, N, K = 0, 1, 2
ARR = ArchParams(rows=2, cols=2, rf_bytes=64, glb_bytes=4096, dram_bytes_per_cycle=4,
                 a_bytes=1, b_bytes=1, psum_bytes=4, out_bytes=1)


def nz(ac):
    return {k: v for k, v in ac.counts.items() if v}


def test_ws_hand_worked():
    # C[4,2] += A[4,4] B[4,2] on 2x2 PEs. rows K2, cols N2, RF M4 (B stationary), DRAM K2.
    s = Shape(4, 2, 4)
    m = make(s, srow=(1, 1, 2), scol=(1, 2, 1), rf=(4, 1, 1), dataflow="ws")
    assert feasible(m, s, ARR) == []
    assert m.factors[4] == (1, 1, 2)
    ac = analyse(m, s)
    # MACs = 4*2*4 = 32
    # A (M,K): RF tile = M4 = 4; loops above RF = [DRAM K2], relevant -> refetch 2;
    #   RF fills = 4*2*4 PEs = 32; GLB reads = 4*2*(spatial K2) = 16 (all of A once, multicast
    #   over the N columns); GLB tile = M4*K2 = 8, refetch 2 -> DRAM reads = GLB fills = 16.
    # B (K,N): RF tile 1, refetch 2 -> RF fills 1*2*4 = 8; GLB reads 1*2*(K2*N2) = 8; DRAM 8.
    # C (M,N): RF tile = M4 = 4; the only loop above is K (irrelevant) -> refetch 1: the psum
    #   stays in the PE while K iterates. Leaving the PEs: 4*1*(spatial N2) = 8 = M*N
    #   (reduced over the K rows), no re-entry. GLB tile 8 -> DRAM updates 8, GLB reads 8.
    assert nz(ac) == {
        ("A", "RF", "reads"): 32, ("A", "RF", "fills"): 32, ("A", "GLB", "reads"): 16,
        ("A", "GLB", "fills"): 16, ("A", "DRAM", "reads"): 16,
        ("B", "RF", "reads"): 32, ("B", "RF", "fills"): 8, ("B", "GLB", "reads"): 8,
        ("B", "GLB", "fills"): 8, ("B", "DRAM", "reads"): 8,
        ("C", "RF", "reads"): 32, ("C", "RF", "updates"): 32, ("C", "GLB", "updates"): 8,
        ("C", "GLB", "reads"): 8, ("C", "DRAM", "updates"): 8,
    }
    c = cost(m, s, ARR)
    assert c.compute_cycles == 8                    # RF M4 x DRAM K2
    # DRAM bytes = A 16*1 + B 8*1 + C 8*1 (final outputs) = 32 -> 32/4 = 8 cycles
    assert c.dram_bytes == 32 and c.dram_cycles == 8 and c.cycles == 8
    assert c.utilization == 1.0


def test_os_hand_worked():
    # C[4,4] += A[4,4] B[4,4]; rows M2, cols N2, RF K2 (C stationary), GLB N2, DRAM M2 K2,
    # DRAM order M, K, N (outermost first), GLB order M, N, K.
    s = Shape(4, 4, 4)
    m = make(s, srow=(2, 1, 1), scol=(1, 2, 1), rf=(1, 1, 2), glb=(1, 2, 1),
             order_glb=(M, N, K), order_dram=(M, K, N), dataflow="os")
    assert feasible(m, s, ARR) == []
    assert m.factors[4] == (2, 1, 2)
    ac = analyse(m, s)
    # loops above RF, outermost first: DRAM M2 K2 N1, GLB M1 N2 K1. MACs = 64, PEs = 4.
    # A (M,K): innermost relevant loop >1 is DRAM K2 -> refetch 2*2 = 4 (GLB N2 reuses A).
    #   RF fills 2*4*4 = 32; GLB reads 2*4*(M2) = 16; GLB tile M2*K2 = 4, refetch 4 -> DRAM 16.
    # B (K,N): innermost relevant >1 is GLB N2 -> refetch 2*2*1*1*2 = 8.
    #   RF fills 2*8*4 = 64; GLB reads 2*8*(N2) = 32 (B read twice: DRAM M2 is outside);
    #   GLB tile K2*N4 = 8, DRAM refetch (K innermost relevant) 2*2 = 4 -> DRAM reads 32.
    # C (M,N): RF tile 1, innermost relevant >1 is GLB N2 -> refetch 8; psums leaving PEs
    #   1*8*(M2*N2) = 32 = GLB updates; re-entries 32 - 16 = 16 = GLB reads = RF fills.
    #   GLB tile M2*N4 = 8, DRAM refetch M2 -> 16 = M*N: DRAM updates 16, no DRAM reads;
    #   GLB reads = 16 (to PEs) + 16 (write-back) = 32.
    assert nz(ac) == {
        ("A", "RF", "reads"): 64, ("A", "RF", "fills"): 32, ("A", "GLB", "reads"): 16,
        ("A", "GLB", "fills"): 16, ("A", "DRAM", "reads"): 16,
        ("B", "RF", "reads"): 64, ("B", "RF", "fills"): 64, ("B", "GLB", "reads"): 32,
        ("B", "GLB", "fills"): 32, ("B", "DRAM", "reads"): 32,
        ("C", "RF", "reads"): 64, ("C", "RF", "updates"): 64, ("C", "RF", "fills"): 16,
        ("C", "GLB", "updates"): 32, ("C", "GLB", "reads"): 32, ("C", "DRAM", "updates"): 16,
    }
    assert cost(m, s, ARR).compute_cycles == 16     # RF K2 x GLB N2 x DRAM M2 K2


def test_is_hand_worked():
    # C[2,8] += A[2,2] B[2,8]; rows K2, cols M2, RF N4 (A stationary), DRAM N2.
    s = Shape(2, 8, 2)
    m = make(s, srow=(1, 1, 2), scol=(2, 1, 1), rf=(1, 4, 1), dataflow="is")
    assert feasible(m, s, ARR) == []
    ac = analyse(m, s)
    # MACs 32. A (M,K): RF tile 1; DRAM N2 is irrelevant -> refetch 1 (A stays in the PE):
    #   RF fills 1*1*4 = 4, GLB reads 1*(K2*M2) = 4, DRAM 4 (A read once).
    # B (K,N): RF tile N4 = 4, refetch 2 -> RF fills 4*2*4 = 32; GLB reads 4*2*(K2) = 16
    #   (multicast over the M columns); GLB tile K2*N4 = 8, refetch 2 -> DRAM 16.
    # C (M,N): RF tile 4, refetch 2 -> leaving PEs 4*2*(M2) = 16 = M*N (reduced over K rows).
    assert nz(ac) == {
        ("A", "RF", "reads"): 32, ("A", "RF", "fills"): 4, ("A", "GLB", "reads"): 4,
        ("A", "GLB", "fills"): 4, ("A", "DRAM", "reads"): 4,
        ("B", "RF", "reads"): 32, ("B", "RF", "fills"): 32, ("B", "GLB", "reads"): 16,
        ("B", "GLB", "fills"): 16, ("B", "DRAM", "reads"): 16,
        ("C", "RF", "reads"): 32, ("C", "RF", "updates"): 32, ("C", "GLB", "updates"): 16,
        ("C", "GLB", "reads"): 16, ("C", "DRAM", "updates"): 16,
    }


def test_bypass_glb_goes_to_dram():
    s = Shape(4, 2, 4)
    m = make(s, srow=(1, 1, 2), scol=(1, 2, 1), rf=(4, 1, 1), bypass="A", dataflow="ws")
    ac = analyse(m, s)
    assert ac.get("A", "GLB", "reads") == 0 and ac.get("A", "GLB", "fills") == 0
    assert ac.get("A", "DRAM", "reads") == 16      # RF-level refetch, multicast


def test_batch_scales_counts():
    s1, s3 = Shape(4, 2, 4), Shape(4, 2, 4, batch=3)
    m = make(s1, srow=(1, 1, 2), scol=(1, 2, 1), rf=(4, 1, 1), dataflow="ws")
    a1, a3 = analyse(m, s1), analyse(m, s3)
    assert all(a3.counts[k] == 3 * v for k, v in a1.counts.items())


def test_feasible_reasons_not_exceptions():
    s = Shape(4, 4, 4)
    m = make(s, srow=(4, 1, 1), scol=(1, 1, 1), rf=(1, 4, 4), dataflow="ws")
    r = feasible(m, s, ARR)
    assert any("rows" in x for x in r)              # fan-out 4 > 2 rows, and M not allowed
    tiny = ArchParams(rows=2, cols=2, rf_bytes=2, glb_bytes=8, dram_bytes_per_cycle=1)
    r2 = feasible(make(s, rf=(1, 1, 4), dataflow="os"), s, tiny)
    assert any("RF tiles" in x for x in r2)
    assert any("GLB" in x for x in feasible(make(s, glb=(4, 4, 4)), s, tiny))
    assert feasible(Mapping(((1,),)), s, ARR)       # malformed: a reason, no exception
    assert feasible(make(s, dataflow="zz"), s, ARR)
    bad = Mapping(((1, 1, 1),) * 5)
    assert any("multiply" in x for x in feasible(bad, s, ARR))


def _split(draw, n: int) -> list[int]:
    out = []
    rest = n
    for _ in range(4):
        divs = [d for d in range(1, rest + 1) if rest % d == 0]
        f = draw(st.sampled_from(divs))
        out.append(f)
        rest //= f
    return out + [rest]


@st.composite
def mappings(draw):
    dims = [draw(st.sampled_from([1, 2, 3, 4, 6, 8, 12])) for _ in range(3)]
    per_dim = [_split(draw, d) for d in dims]
    factors = tuple(tuple(per_dim[d][s] for d in range(3)) for s in range(5))
    og = tuple(draw(st.permutations([0, 1, 2])))
    od = tuple(draw(st.permutations([0, 1, 2])))
    return Shape(*dims), Mapping(factors, (og, od))


@settings(max_examples=60, deadline=None)
@given(mappings())
def test_tiles_cover_iteration_space_exactly_once(sm):
    s, m = sm
    seen = Counter(iterate(m))
    assert len(seen) == s.m * s.n * s.k
    assert set(seen.values()) == {1}
    assert all(0 <= p[d] < s.dims[d] for p in seen for d in range(3))
    # the GLB tile times the DRAM trip counts is the whole problem
    g = tile_shape(m, "GLB")
    assert all(g[d] * m.factors[4][d] == s.dims[d] for d in range(3))
    assert tile_shape(m, "DRAM") == s.dims


@settings(max_examples=60, deadline=None)
@given(mappings())
def test_compulsory_traffic_lower_bound(sm):
    s, m = sm
    ac = analyse(m, s)
    assert ac.get("A", "DRAM", "reads") >= s.m * s.k
    assert ac.get("B", "DRAM", "reads") >= s.k * s.n
    assert ac.get("C", "DRAM", "updates") >= s.m * s.n
    c = cost(m, s, ARR)
    assert c.compute_cycles * m.pes_used == s.macs
    assert c.cycles >= math.ceil(s.macs / (ARR.rows * ARR.cols)) or m.pes_used > 4
