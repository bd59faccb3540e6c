"""Sliding-window access counts of dataflow.nest against hand-worked examples.

Each expected value is worked out in the test from the tile boxes (no model output is
copied). Convention (Timeloop's): the input width spanned by P outputs and R taps is
``(P-1)*stride + (R-1)*dilation + 1``.
"""

from __future__ import annotations

from archsim.dataflow.einsum import conv2d, from_timeloop
from archsim.dataflow.hierarchy import ComputeLevel, Hierarchy, StorageLevel
from archsim.dataflow.nest import LevelMapping, NestMapping, analyse

HIER = Hierarchy((StorageLevel("buf", size_words=1024), StorageLevel("dram", technology="DRAM")),
                 ComputeLevel("mac", 1))
ALL = frozenset({"Weights", "Inputs", "Outputs"})


def _one_d(p: int, r: int, p_in: int, stride: int = 1, dilation: int = 1,
           dram: tuple[tuple[str, int], ...] | None = None, **kw: bool) -> tuple[int, int]:
    """1-D conv: buffer holds P=p_in, R=r; DRAM walks P. Returns (buf fills, DRAM reads)."""
    prob = conv2d(1, 1, 1, p, 1, r, 1, stride=(stride, 1), dilation=(dilation, 1))
    mp = NestMapping((LevelMapping((("R", r), ("P", p_in)), (), ALL),
                      LevelMapping(dram or (("P", p // p_in),), (), ALL)))
    res = analyse(prob, HIER, mp, **kw)
    st = res.stats["buf"]["Inputs"]
    assert res.stats["dram"]["Inputs"].reads == st.fills
    return st.fills, res.stats["dram"]["Inputs"].reads


def test_stride1_halo_is_reused() -> None:
    # tile P2 R3 spans (2-1)+3 = 4 inputs; each of the 3 later steps moves 2 -> 2 new.
    # 4 + 3*2 = 10 = the whole input (8-1)+3: compulsory traffic only.
    assert _one_d(8, 3, 2) == (10, 10)


def test_stride2() -> None:
    # tile P2 R3 stride 2 spans 2*1+3 = 5; a step moves 2*2 = 4 -> 1 input of overlap.
    # 5 + 3*4 = 17 = (8-1)*2+3.
    assert _one_d(8, 3, 2, stride=2)[0] == 17


def test_stride2_no_overlap_when_window_smaller_than_stride() -> None:
    # R=1, stride 2: tile P2 spans 2*1+1 = 3 (the gap counts, as in Timeloop's boxes);
    # steps of 4 never overlap: 4 tiles * 3 = 12 (the input box is 15 wide).
    assert _one_d(8, 1, 2, stride=2)[0] == 12


def test_dilation2() -> None:
    # W = P + 2R: tile P2 R3 spans 1 + 2*2 + 1 = 6; steps of 2 -> 2 new each.
    # 6 + 3*2 = 12 = (8-1) + (3-1)*2 + 1.
    assert _one_d(8, 3, 2, dilation=2)[0] == 12


def test_padding_does_not_enter_the_projection() -> None:
    # Timeloop problem with Wpad=1: the input box is still (P-1)*s + R = 2*55+3 = 113 wide.
    doc = {"problem": {"shape": {
        "name": "c", "dimensions": ["C", "M", "R", "S", "N", "P", "Q"],
        "coefficients": [{"name": "Wstride", "default": 1}, {"name": "Hstride", "default": 1}],
        "data_spaces": [
            {"name": "Weights", "projection": [[["C"]], [["M"]], [["R"]], [["S"]]]},
            {"name": "Inputs", "projection": [[["N"]], [["C"]], [["R"], ["P", "Wstride"]],
                                              [["S"], ["Q", "Hstride"]]]},
            {"name": "Outputs", "projection": [[["N"]], [["M"]], [["Q"]], [["P"]]],
             "read_write": True}]},
        "instance": {"C": 1, "M": 1, "R": 3, "S": 3, "N": 1, "P": 56, "Q": 56,
                     "Wstride": 2, "Hstride": 2, "Wpad": 1, "Hpad": 1, "W": 112, "H": 112}}}
    prob = from_timeloop(doc)
    assert prob.size("Inputs") == 113 * 113


def test_direction_change_discards_residual() -> None:
    # 2-D: buffer tile P2 R3 S3 (4 wide, 3 high); DRAM: Q2 (outer) then P4 (inner).
    # Along P: 12 + 3*(2*3) = 30 per row of tiles. The Q step jumps back in W (direction
    # change) -> full refill, although 1 of 3 rows overlaps: 2*30 = 60 (exact reuse: 10*4=40).
    prob = conv2d(1, 1, 1, 8, 2, 3, 3)
    mp = NestMapping((LevelMapping((("R", 3), ("S", 3), ("P", 2)), (), ALL),
                      LevelMapping((("P", 4), ("Q", 2)), (), ALL)))
    assert analyse(prob, HIER, mp).stats["buf"]["Inputs"].fills == 60


def test_stationary_step_rule() -> None:
    # DRAM: P4 (outer), M2 (inner, irrelevant to Inputs). Pre-2025 Timeloop (default): a
    # stationary step is a direction, so every P step refills: 4 tiles * 4 = 16.
    # Post-#297 rule: stationarity does not break the slide: 4 + 3*2 = 10.
    prob = conv2d(1, 1, 2, 8, 1, 3, 1)
    mp = NestMapping((LevelMapping((("R", 3), ("P", 2)), (), ALL),
                      LevelMapping((("M", 2), ("P", 4)), (), ALL)))
    assert analyse(prob, HIER, mp).stats["buf"]["Inputs"].fills == 16
    assert analyse(prob, HIER, mp, stationary_breaks=False).stats["buf"]["Inputs"].fills == 10


def test_multicast_and_spatial_reduction() -> None:
    # The buffer level fans out M2 to two MACs: both need the same Inputs (one multicast
    # read per MAC step: 8*3 = 24 reads, not 48) and produce different Outputs.
    # C2 instead: both read different inputs (48) and their partial sums of the same
    # outputs are reduced spatially: one update per step (24), not two.
    hier = Hierarchy((StorageLevel("buf", mesh_x=2), StorageLevel("dram", technology="DRAM")),
                     ComputeLevel("mac", 2))
    prob = conv2d(1, 1, 2, 8, 1, 3, 1)
    mp = NestMapping((LevelMapping((("R", 3), ("P", 8)), (("M", 2, "X"),), ALL),
                      LevelMapping((), (), ALL)))
    res = analyse(prob, hier, mp)
    assert res.compute_cycles == 24 and res.compute_instances == 2
    assert res.stats["buf"]["Inputs"].reads == 24          # 24 MAC steps, multicast to 2
    assert res.stats["buf"]["Outputs"].updates == 48       # 2 MACs * 24, distinct outputs
    prob_c = conv2d(1, 2, 1, 8, 1, 3, 1)
    mp_c = NestMapping((LevelMapping((("R", 3), ("P", 8)), (("C", 2, "X"),), ALL),
                        LevelMapping((), (), ALL)))
    res_c = analyse(prob_c, hier, mp_c)
    assert res_c.stats["buf"]["Inputs"].reads == 48
    assert res_c.stats["buf"]["Outputs"].updates == 24     # 2 partial sums reduced into 1
    # read-write: 8 outputs, first update of each needs no read: 24 - 8 = 16 reads
    assert res_c.stats["buf"]["Outputs"].reads == 16
