"""N:M sparse FPGA family (``kind: nm_sparse_fpga``): a SAT-like weight-stationary PE
array whose PEs select N of every M activations by index multiplexers, on an FPGA whose
DSP48E2 / LUT / FF / BRAM36 / URAM are its "area".

Model (equations and sources in ``docs/fpga.md``):

* **Timing.** GEMMs and convolutions (im2col) run weight-stationary on ``rows x cols`` PEs
  of ``macs_per_pe`` lanes, with the SCALE-Sim fold model of ``arch.spatial`` (dense mode
  is exactly the spatial array's result for the same configuration). In N:M sparse mode a
  lane holds non-zero weights and their indices, so the reduction shrinks to ``K N / M``
  (compute follows effective MACs), while activations stay dense: each lane's mux picks
  from a window of ``M/N`` activations, so the array reads ``M/N`` times more activation
  bits per cycle (a narrow activation buffer stalls) and activation traffic does not shrink.
  Weight traffic shrinks to N/M plus ceil(log2 M) index bits per non-zero.
* **Training (BDWP).** The workload carries the passes (``Workload.with_sparsity``):
  forward and backward-data run sparse (backward-data on the transposed weight's own N:M
  pattern), backward-weight and the update run dense. Pre-generation of the sparse weights
  (read dense weights, top-N-of-M selection, write the forward and the transposed copy) is
  charged to each sparse backward-data op on the generator's lanes and on DRAM; offline
  scheduling (``pregen.overlap``) overlaps it with that op's compute.
* **Resources** per component (``arch.fpga.resources``), utilisation against the part, and
  a fit check that names the exceeded resource (an infeasible design gives infeasible
  estimates, reported by the mapper with that reason).
* **Power**: part static power + clock-tree power of the used flip-flops + per-event
  dynamic energy of the resources each action exercises (DSP ops, LUT/FF toggles at
  ``activity``, BRAM/URAM accesses) + DDR4 energy per byte.
"""

from archsim.arch.fpga.spec import BufferSpec, NmSparseFpgaSpec, PartSpec, PregenSpec, SparseSpec
from archsim.arch.fpga.unit import NmSparseFpga

__all__ = ["NmSparseFpga", "NmSparseFpgaSpec", "PartSpec", "BufferSpec", "SparseSpec",
           "PregenSpec"]

import archsim.arch.fpga.reference  # noqa: E402,F401  (registers golden workloads and checks)
