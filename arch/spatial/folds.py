"""The SCALE-Sim fold model of a GEMM on a ``rows x cols`` array and the GLB tiling rule
(Samajdar et al., ISPASS 2020, Sec. III); see :mod:`arch.spatial.unit` for the equations.
Shared by the spatial array's estimate, its lowering and the N:M FPGA family.
"""

from __future__ import annotations

from dataclasses import dataclass

from archsim.arch.base import ceil_div

__all__ = ["fold_cycles", "gemm_traffic", "dims"]


def fold_cycles(dataflow: str, m: int, n: int, k: int, rows: int, cols: int) -> tuple[int, int, int]:
    """SCALE-Sim compute cycles of one GEMM: returns (cycles, folds, temporal T).

    cycles = ceil(Sr/rows) * ceil(Sc/cols) * (2*rows + cols + T - 2).
    """
    sr, sc, t = dims(dataflow, m, n, k)
    folds = ceil_div(sr, rows) * ceil_div(sc, cols)
    return folds * (2 * rows + cols + t - 2), folds, t


def dims(dataflow: str, m: int, n: int, k: int) -> tuple[int, int, int]:
    if dataflow == "ws":
        return k, n, m
    if dataflow == "os":
        return m, n, k
    if dataflow == "is":
        return k, m, n
    raise ValueError(f"unknown dataflow {dataflow!r}")


@dataclass(frozen=True)
class _Traffic:
    a_elems: float          # A elements fetched from DRAM
    b_elems: float
    c_write_elems: float    # C elements written to DRAM (incl. spills)
    c_read_elems: float     # partial sums read back from DRAM (spills)
    glb_reads: float        # elements read from the GLB into the array
    glb_writes: float       # elements written into the GLB (from DRAM and from the array)
    first_tile_elems: float


def gemm_traffic(dataflow: str, m: int, n: int, k: int, rows: int, cols: int,
                 glb_elems_per_part: float) -> _Traffic:
    """Element traffic of one GEMM under the documented GLB rule (see module docstring)."""
    sr, sc, t = dims(dataflow, m, n, k)
    fr, fc = ceil_div(sr, rows), ceil_div(sc, cols)
    part = glb_elems_per_part
    if dataflow == "ws":      # stationary B[k-tile, n-tile]; stream A[:, k-tile]; psum C[:, n-tile]
        a = m * k * (1 if m * k <= part else fc)
        b = k * n
        spill = (m * min(n, cols) > part) and fr > 1
        c_w = m * n * (fr if spill else 1)
        c_r = m * n * (fr - 1) if spill else 0
        stream_in = fr * fc * t * rows           # A values entering the array
        out = fr * fc * t * cols                 # partial sums leaving it
        first = min(k, rows) * min(n, cols)
    elif dataflow == "os":    # stationary C[m-tile, n-tile]; stream A[m-tile,:], B[:, n-tile]
        a = m * k * (1 if min(m, rows) * k <= part else fc)
        b = k * n * (1 if k * n <= part else fr)
        c_w, c_r = m * n, 0
        stream_in = fr * fc * t * (rows + cols)
        out = m * n
        first = min(m, rows) * k
    else:                     # is: stationary A[k-tile, m-tile]; stream B[k-tile,:]; psum C[m-tile,:]
        a = m * k
        b = k * n * (1 if k * n <= part else fc)
        spill = (min(m, cols) * n > part) and fr > 1
        c_w = m * n * (fr if spill else 1)
        c_r = m * n * (fr - 1) if spill else 0
        stream_in = fr * fc * t * rows
        out = fr * fc * t * cols
        first = min(k, rows) * min(m, cols)
    stationary_loads = fr * fc * rows * cols if dataflow != "os" else 0
    glb_reads = stream_in + stationary_loads + (out - m * n if out > m * n else 0)
    glb_writes = a + b + c_r + out
    return _Traffic(a, b, c_w, c_r, glb_reads, glb_writes, first)
