"""Board power, the power cap and DVFS of a tensor-core GPU (``GpuSpec.power``).

Board power while a kernel runs at SM clock ``f`` and core voltage ``V(f)``::

    P(f) = P_idle                                   (measured idle board power)
         + e_cycle * f * (V/V_top)^2                (active chip: clock tree, schedulers,
                                                     instruction fetch, uncore; per clock)
         + E_core(V_top) * (V/V_top)^2 / T(f)       (per-action energies of the on-chip
                                                     actions: MMA, RF, smem, L2, CUDA cores)
         + E_hbm / T(f)                             (HBM device + PHY: own rail, not scaled)

with ``T(f) = max(t_clk * f_top / f, t_mem)``: the part of the kernel that runs on the SM
clock (MMA mainloop, L2) stretches as the clock falls, the HBM-bound part does not. This is
``P_dyn ~ C V^2 f`` per action class. The sustained clock is the highest point of the
V-f curve (in ``clock_step_mhz`` steps, NVIDIA's clock table granularity) at which
``P(f) <= power_limit_w``; a memory-bound kernel fits at the top clock, a dense GEMM does
not and settles where it fits. ``e_cycle`` and the energy scale of the on-chip actions are
fitted from measured board energy (``archsim calibrate``, ``docs/gpu.md``).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from archsim.arch.spec import param

__all__ = ["PowerSpec", "DvfsPoint", "solve_clock"]


@dataclass(frozen=True)
class PowerSpec:
    """Power limit, V-f curve and the calibrated power constants of one GPU board."""

    power_limit_w: float = param(doc="board power limit the firmware enforces (nvidia-smi "
                                     "power.limit)", unit="W", min=0, min_exclusive=True)
    vf_mhz: tuple[float, ...] = param(doc="clock points of the voltage-frequency curve, "
                                          "ascending; the last is the top clock", unit="MHz")
    vf_volts: tuple[float, ...] = param(doc="core voltage at each vf_mhz point", unit="V",
                                        min=0.2, max=2.0)   # CMOS logic cores: ~0.5-1.2 V
    active_pj_per_cycle: float = param(
        doc="whole-chip energy per SM clock while a kernel runs, at the top voltage (clock "
            "tree, warp schedulers, instruction fetch/decode, crossbar, leakage above idle); "
            "fitted", unit="pJ", min=0, max=1e7)   # 1e7 pJ x 2 GHz = 20 kW: far above a board
    core_energy_scale: float = param(
        1.0, doc="multiplier on the bottom-up (energy/ library) energies of the on-chip "
                 "actions (MMA, register file, shared memory, L2, CUDA cores) at the top "
                 "voltage; fitted (1 = library value)", min=0, min_exclusive=True)
    hbm_energy_scale: float = param(
        1.0, doc="multiplier on the library HBM energy per byte; fitted (1 = library)",
        min=0, min_exclusive=True)
    clock_step_mhz: float = param(15.0, doc="granularity of the DVFS clock table", unit="MHz",
                                  min=0, min_exclusive=True)
    source: str = param("", doc="where the limit, the curve and the fitted constants come from")

    def check(self) -> list[tuple[str, str]]:
        out = []
        if len(self.vf_mhz) < 2 or len(self.vf_mhz) != len(self.vf_volts):
            out.append(("vf_mhz", "expected >= 2 points and as many vf_volts as vf_mhz"))
        elif any(b <= a for a, b in zip(self.vf_mhz, self.vf_mhz[1:], strict=False)):
            out.append(("vf_mhz", "expected strictly ascending clocks"))
        elif any(b < a for a, b in zip(self.vf_volts, self.vf_volts[1:], strict=False)):
            out.append(("vf_volts", "expected non-decreasing voltages"))
        if any(v <= 0 for v in self.vf_volts):
            out.append(("vf_volts", "expected voltages > 0"))
        return out

    @property
    def top_mhz(self) -> float:
        return self.vf_mhz[-1]

    @property
    def min_mhz(self) -> float:
        return self.vf_mhz[0]

    def voltage(self, mhz: float) -> float:
        """Core voltage at ``mhz`` (piecewise linear in the V-f table, clamped at the ends)."""
        xs, ys = self.vf_mhz, self.vf_volts
        if mhz <= xs[0]:
            return ys[0]
        if mhz >= xs[-1]:
            return ys[-1]
        i = bisect.bisect_right(xs, mhz)
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        return y0 + (y1 - y0) * (mhz - x0) / (x1 - x0)

    def v2(self, mhz: float) -> float:
        """(V(f) / V_top)^2: the dynamic-energy factor of one core-rail action at ``mhz``."""
        return (self.voltage(mhz) / self.vf_volts[-1]) ** 2


@dataclass(frozen=True)
class DvfsPoint:
    """The sustained operating point of one kernel.

    Attributes:
        clock_mhz: SM clock.
        volts: core voltage.
        v2: (V / V_top)^2.
        body_s: kernel body time at this clock (without launch overhead).
        power_w: board power at this point.
        capped: True when the power limit (not the top clock) set the clock.
    """

    clock_mhz: float
    volts: float
    v2: float
    body_s: float
    power_w: float
    capped: bool


def board_power_w(p: PowerSpec, idle_w: float, mhz: float, t_clk_s: float, t_mem_s: float,
                  e_core_j: float, e_hbm_j: float) -> tuple[float, float]:
    """(board power W, body time s) at ``mhz`` (see the module equation).

    ``t_clk_s`` is the SM-clock-bound time at the top clock, ``t_mem_s`` the HBM-bound time,
    ``e_core_j`` the on-chip dynamic energy at the top voltage, ``e_hbm_j`` the HBM energy.
    """
    body = max(t_clk_s * p.top_mhz / mhz, t_mem_s)
    v2 = p.v2(mhz)
    if body <= 0:
        return idle_w, 0.0
    dyn = (e_core_j * v2 + e_hbm_j) / body + p.active_pj_per_cycle * 1e-12 * mhz * 1e6 * v2
    return idle_w + dyn, body


def solve_clock(p: PowerSpec, idle_w: float, t_clk_s: float, t_mem_s: float,
                e_core_j: float, e_hbm_j: float, other_j: float = 0.0,
                other_s: float = 0.0) -> DvfsPoint:
    """Highest clock on the V-f curve (``clock_step_mhz`` grid down from the top) whose
    board power fits under ``power_limit_w``; the lowest curve point if none does.

    ``other_j`` / ``other_s``: energy and time of other work that alternates with this
    kernel inside the limiter's averaging window (e.g. a benchmark's L2-flush memset between
    calls); the limit then applies to the average ``(P(f) T(f) + other_j) / (T(f) + other_s)``.
    """
    # P(f) rises with f (V(f) non-decreasing, T(f) non-increasing), so bisect the steps
    n = int((p.top_mhz - p.min_mhz) // p.clock_step_mhz)

    def at(k: int) -> tuple[float, float, float, float]:
        f = p.top_mhz - k * p.clock_step_mhz
        pw, body = board_power_w(p, idle_w, f, t_clk_s, t_mem_s, e_core_j, e_hbm_j)
        avg = (pw * body + other_j) / (body + other_s) if body + other_s > 0 else pw
        return f, pw, body, avg

    f, pw, body, avg = at(0)
    if avg > p.power_limit_w:
        lo, hi = 0, n          # at(lo) is over the limit; find the first k that fits
        if at(hi)[3] > p.power_limit_w:
            lo = hi
        else:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if at(mid)[3] > p.power_limit_w:
                    lo = mid
                else:
                    hi = mid
        f, pw, body, avg = at(hi)
    return DvfsPoint(f, p.voltage(f), p.v2(f), body, pw, f < p.top_mhz)
