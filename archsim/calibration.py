"""Fit a GPU config's measured constants to silicon rows (``archsim calibrate``).

    from archsim import calibrate, write_calibrated
    cal = calibrate("h100.jsonl", "gpu/h100")
    print("\n".join(cal.report)); write_calibrated(cal, "h100_calibrated.yaml")

``DATA.jsonl`` is what ``benchmarks/silicon/measure.py`` writes (format in
``../shared/reference/silicon/README.md``). Fitted, in this order (``archsim.silicon``):

1. power: ``power.active_pj_per_cycle`` and ``power.core_energy_scale`` by least squares on
   the ``energy`` rows (measured board energy at the measured clock and time);
2. ``tensor_core.mma_efficiency``: the prior times the median of (model time at the
   measured clock / measured time) over the compute-bound GEMM ``energy`` rows (sustained:
   their clock is known);
3. ``tensor_core.library_rate_fraction.<fmt>`` for each format the config lists: the value
   on a 0.05 grid that minimises the median |log(pred / measured)| of that format's GEMM
   rows;
4. ``cuda_core.reduce_pass_bytes_per_clock`` (when the config has the key): from the softmax
   rows with more than 1,024 columns (``archsim.silicon.fit_reduce_pass_rate``).

A framework kernel table (``.csv`` / ``.csv.gz``, ``shared/reference/kernels_h100/gemm``;
``archsim.kernel_tables``) instead fits ``launch_b2b_us`` (the back-to-back per-kernel cost)
and the per-token quantisation kernel's ``quant_row_us`` / ``quant_chunk_us`` on its fit
half (K a power of two) and reports the fit and check halves per class.

The report holds the error per kernel class before and after and the fitted constants with
their residuals; :func:`write_calibrated` writes the config (the input file with only those
values replaced, comments kept). The config must already have a ``power:`` section (see
``docs/gpu.md``).
"""

from __future__ import annotations

import math
import os
import re
import statistics
import tempfile
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from archsim import kernel_tables, silicon
from archsim.api import find_config, load
from archsim.workloads.errors import ConfigError, Problem
from archsim.workloads.formats import FORMATS

__all__ = ["calibrate", "write_calibrated", "Calibration", "check_device", "MIN_ROWS_PER_CONSTANT"]


@dataclass(frozen=True)
class Calibration:
    """What :func:`calibrate` fitted.

    Attributes:
        values: fitted constants (key path under ``units[0]`` -> value).
        notes: residual notes, one line each.
        text: the calibrated config (the input YAML, only those values replaced).
        report: the report lines (errors per kernel class before and after, the constants).
        source: the config file that was calibrated.
    """

    values: dict[str, float]
    notes: list[str]
    text: str
    report: list[str]
    source: Path


def _set_value(text: str, path: tuple[str, ...], value: float, where: str) -> str:
    """Replace the scalar at ``path`` (nested block keys) in YAML ``text``, keeping comments."""
    lines = text.splitlines(keepends=True)
    start, indent = 0, -1
    for depth, key in enumerate(path):
        pat = re.compile(rf"^(\s*)(-\s+)?{re.escape(key)}\s*:")
        for i in range(start, len(lines)):
            m = pat.match(lines[i])
            if m and len(m.group(1)) + len(m.group(2) or "") > indent:
                indent = len(m.group(1)) + len(m.group(2) or "")
                start = i
                break
        else:
            raise ConfigError(Problem(f"key {'.'.join(path[:depth + 1])} not found; calibrate "
                                      "needs it in the config", where))
    line = lines[start]
    m = re.match(r"^(\s*(?:-\s+)?[\w.]+\s*:\s*)([^#\n]*?)(\s*)(#.*)?$", line.rstrip("\n"))
    assert m is not None
    new = f"{value:.6g}"
    comment = m.group(4) or ""
    col = len(m.group(1)) + len(m.group(2)) + len(m.group(3))   # keep the comment column
    pad = " " * max(1, col - len(m.group(1)) - len(new)) if comment else ""
    lines[start] = m.group(1) + new + pad + comment + "\n"
    return "".join(lines)


def _table(title: str, scores: dict[str, Any]) -> list[str]:
    w = max([18, *map(len, scores)])
    out = [title, f"  {'class':{w}s} {'n':>3s} {'median |err|':>13s} {'worst |err|':>12s}"]
    for c in sorted(scores):
        s = scores[c]
        out.append(f"  {c:{w}s} {len(s.errors):3d} {s.median_abs:13.1%} {s.worst_abs:12.1%}")
    return out


#: Rows each fitted constant needs at least (a least-squares fit of c constants needs
#: ``c * MIN_ROWS_PER_CONSTANT``); a constant with fewer is left as it is.
MIN_ROWS_PER_CONSTANT = 1


def _device_tokens(name: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", name.lower()))


def check_device(rows: list[silicon.Row], design: str, where: str) -> None:
    """Every row that names a ``device`` names ``design`` (the config's name, e.g. ``h100``,
    as a word of "NVIDIA H100 80GB HBM3"); ConfigError naming ``file:line`` otherwise."""
    want = _device_tokens(design)
    for r in rows:
        dev = r.data.get("device")
        if dev is not None and not want <= _device_tokens(str(dev)):
            raise ConfigError(Problem(
                f"row measured on {str(dev)!r}, not on the design {design!r}; "
                "calibrate against the matching config or pass --force", f"{where}:{r.line}"))


def calibrate(data: str | Path, config: str | Path, *, force: bool = False) -> Calibration:
    """Fit the constants of the GPU config ``config`` to the measured rows in ``data``.

    Args:
        force: accept rows whose ``device`` is not the config's design.

    Raises:
        ConfigError: not a tensor-core GPU config, no ``power:`` section, a key missing, no
            rows, rows of another device (without ``force``), or no constant with its
            :data:`MIN_ROWS_PER_CONSTANT` rows: nothing to write.
    """
    rows = silicon.load_rows(data)
    if not rows:
        raise ConfigError(Problem("no measurement rows; nothing to calibrate", str(data)))
    path = find_config(config)
    acc = load(path)
    _check_gpu(acc, path, power=not kernel_tables.is_kernel_table(data))
    if not force:
        check_device(rows, acc.name, str(data))
    elif all(_device_tokens(acc.name) <= _device_tokens(str(r.data.get("device", acc.name)))
             for r in rows):
        warnings.warn(f"--force changes nothing: every row of {data} was measured on the "
                      f"design {acc.name!r} (or names no device)", UserWarning, stacklevel=2)
    if kernel_tables.is_kernel_table(data):
        cal = _calibrate_kernel_table(rows, path)
    else:
        cal = _calibrate_rows(rows, acc, path)
    if not cal.values and not (kernel_tables.is_kernel_table(data) and cal.report):
        # a kernel table whose classes archsim scores but does not refit (the attention
        # tables: tests/gpu/fa_refit.py) still gives its report; nothing is written from it
        raise ConfigError(Problem(
            f"no constant could be fitted (each needs {MIN_ROWS_PER_CONSTANT} usable row(s) "
            f"per constant; {len(rows)} rows of kinds "
            f"{', '.join(sorted({r.kind for r in rows}))}); no calibrated config written",
            str(data)))
    return cal


def _check_gpu(acc: Any, path: Path, *, power: bool) -> None:
    """A tensor-core GPU config, with a ``power:`` section when ``power`` (ConfigError)."""
    spec = getattr(acc.units[0], "spec", None)
    if spec is None or not hasattr(spec, "tensor_core"):
        raise ConfigError(Problem("expected a tensor_core_gpu config", str(path)))
    if power and spec.power is None:
        raise ConfigError(Problem("the config has no power: section (power_limit_w, vf_mhz, "
                                  "vf_volts, active_pj_per_cycle); see docs/gpu.md",
                                  f"{path} units[0].power"))


def _calibrate_rows(rows: list[silicon.Row], acc: Any, path: Path) -> Calibration:
    """Fit the JSON-lines measurement rows (module docstring, steps 1-4)."""
    unit = acc.units[0]
    spec = unit.spec
    text = Path(path).read_text()
    report = _table(f"before ({path.name}, {len(rows)} rows):", silicon.score(unit, rows))
    values: dict[str, float] = {}
    notes: list[str] = []
    idle = [r.data for r in rows if r.kind == "energy" and r.data.get("op") == "idle"]
    idle_w = float(idle[0]["avg_w"]) if idle else spec.static_power_w
    energy = [r for r in rows if r.kind == "energy" and silicon.row_op(r.data) is not None
              and "mj_per_call" in r.data and "sm_mhz" in r.data]
    if len(energy) >= 2 * MIN_ROWS_PER_CONSTANT and len(energy) >= 2:
        fit = silicon.fit_power(unit, energy, idle_w)
        values["static_power_w"] = idle_w
        values["power.active_pj_per_cycle"] = fit.active_pj_per_cycle
        values["power.core_energy_scale"] = fit.core_energy_scale
        notes += [f"  energy residual {lab}: {res:+.1%}" for lab, res in fit.residuals]
        spec = replace(spec, static_power_w=idle_w, power=replace(
            spec.power, active_pj_per_cycle=fit.active_pj_per_cycle,
            core_energy_scale=fit.core_energy_scale))
    else:
        notes.append("  fewer than 2 energy rows: power constants left as they are")
    # MMA efficiency from sustained compute-bound GEMM rows (their clock is measured)
    ratios = []
    for r in energy:
        d = r.data
        if d.get("op") != "gemm" or min(d["m"], d["n"], d["k"]) < 1024:
            continue
        raw = type(unit)(unit.name, replace(spec, power=None,
                                            tensor_clock_mhz=float(d["sm_mhz"])), unit.node_nm)
        op = silicon.row_op(d)
        assert op is not None
        ratios.append(raw.estimate(op).latency_s / (float(d["ms"]) * 1e-3))
    if len(ratios) >= MIN_ROWS_PER_CONSTANT:
        eta = min(1.0, spec.tensor_core.mma_efficiency * statistics.median(ratios))
        values["tensor_core.mma_efficiency"] = eta
        notes.append(f"  mma_efficiency: {len(ratios)} sustained GEMM rows, time ratios "
                     + ", ".join(f"{x:.3f}" for x in ratios))
        spec = replace(spec, tensor_core=replace(spec.tensor_core, mma_efficiency=eta))
    # library rate fraction per listed format
    inv = {v: k for k, v in silicon._DTYPES.items()}
    for fmt in sorted(spec.tensor_core.library_rate_fraction):
        frows = [r.data for r in rows if r.kind == "gemm" and r.data.get("dtype") == inv.get(fmt)
                 and min(r.data["m"], r.data["n"]) > 64]
        if len(frows) < MIN_ROWS_PER_CONSTANT or fmt not in FORMATS:
            continue
        best: tuple[float, float] | None = None
        for i in range(6, 21):
            x = i * 0.05
            lrf = {**spec.tensor_core.library_rate_fraction, fmt: x}
            trial = type(unit)(unit.name, replace(spec, tensor_core=replace(
                spec.tensor_core, library_rate_fraction=lrf)), unit.node_nm)
            errs = [abs(math.log(silicon.predict_ms(trial, d) / float(d["ms"])))  # type: ignore[operator]
                    for d in frows]
            med = statistics.median(errs)
            if best is None or med < best[1] - 1e-12:
                best = (x, med)
        assert best is not None
        values[f"tensor_core.library_rate_fraction.{fmt}"] = best[0]
        notes.append(f"  library_rate_fraction.{fmt}: {len(frows)} rows, median |log err| "
                     f"{best[1]:.3f}")
        spec = replace(spec, tensor_core=replace(spec.tensor_core, library_rate_fraction={
            **spec.tensor_core.library_rate_fraction, fmt: best[0]}))
    # softmax re-read pass rate (only where the config models it)
    if spec.cuda_core.reduce_pass_bytes_per_clock is not None:
        rate = silicon.fit_reduce_pass_rate(type(unit)(unit.name, spec, unit.node_nm), rows)
        if rate is not None:
            values["cuda_core.reduce_pass_bytes_per_clock"] = rate
            notes.append("  reduce_pass_bytes_per_clock: softmax rows with > 1024 columns")
            spec = replace(spec, cuda_core=replace(spec.cuda_core,
                                                   reduce_pass_bytes_per_clock=rate))
    for key, v in values.items():
        text = _set_value(text, ("units", *key.split(".")), v, str(path))
    after = type(unit)(unit.name, spec, unit.node_nm)
    report += _table("after:", silicon.score(after, rows))
    report += ["fitted constants:"] + [f"  {k} = {v:.6g}" for k, v in values.items()] + notes
    return Calibration(values, notes, text, report, Path(path))


#: Every how many rows of a kernel table are scored (71k rows x milliseconds per row).
KERNEL_TABLE_STRIDE = 37


def _calibrate_kernel_table(rows: list[silicon.Row], path: Path) -> Calibration:
    """A framework kernel table (``archsim.kernel_tables``): fit ``launch_b2b_us`` and the
    quantisation kernel's constants on the fit half (K a power of two), report both halves
    per class (every
    :data:`KERNEL_TABLE_STRIDE`-th row)."""
    unit = load(path).units[0]
    data = [r.data for r in rows]
    text = Path(path).read_text()
    fit = kernel_tables.fit_launch_b2b_us(unit, data)
    values: dict[str, float] = {}
    notes: list[str] = []
    shown = kernel_tables.sample(rows, KERNEL_TABLE_STRIDE)
    halves = {h: [r for r in shown if kernel_tables.shape_half(r.data) == h]
              for h in ("fit", "check")}
    report = []
    for h, rs in halves.items():
        report += _table(f"before ({path.name}), {h} half ({len(rs)} rows):",
                         silicon.score(unit, rs))
    if fit is not None:
        values["launch_b2b_us"], n = fit
        notes.append(f"  launch_b2b_us: median of measured - modelled body over {n} tiny "
                     f"bf16 GEMMs (m*n*k <= {kernel_tables.TINY_MNK}) of the fit half")
        unit = type(unit)(unit.name, replace(unit.spec, launch_b2b_us=fit[0]), unit.node_nm)
        text = _set_value(text, ("units", "launch_b2b_us"), fit[0], str(path))
    else:
        notes.append("  no tiny bf16 GEMM rows in the fit half: launch_b2b_us left as it is")
    # the quantisation kernel's row time (many rows per SM) and fixed cost (tiny rows) each
    # leave the other in their residual: two rounds settle both (to 0.001 us)
    quant: tuple[float, float, int] | None = None
    call: tuple[float, int] | None = None
    for _ in range(2):
        quant = kernel_tables.fit_row_quant_us(kernel_tables.back_to_back(unit), data)
        if quant is None:
            break
        row_us, chunk_us, n = quant
        unit = type(unit)(unit.name, replace(unit.spec, quant_row_us=row_us,
                                             quant_chunk_us=chunk_us), unit.node_nm)
        call = kernel_tables.fit_quant_call_us(kernel_tables.back_to_back(unit), data)
        if call is not None:
            unit = type(unit)(unit.name, replace(unit.spec, quant_call_us=call[0]),
                              unit.node_nm)
    if quant is not None:
        values["quant_row_us"], values["quant_chunk_us"] = row_us, chunk_us
        notes.append(f"  quant_row_us, quant_chunk_us: least squares over {n} fp8 rows of the "
                     "fit half (N = 32, m >= 4096, K <= 16384)")
        for key, v in (("quant_row_us", row_us), ("quant_chunk_us", chunk_us)):
            text = _set_value(text, ("units", key), v, str(path))
        if call is not None:
            values["quant_call_us"] = call[0]
            notes.append(f"  quant_call_us: median of measured - scaled-mm - row time over "
                         f"{call[1]} tiny fp8 rows of the fit half")
            text = _set_value(text, ("units", "quant_call_us"), call[0], str(path))
    act = kernel_tables.fit_switching_activity(
        kernel_tables.back_to_back(unit), kernel_tables.sample(data, KERNEL_TABLE_STRIDE))
    if act is not None:
        notes.append(f"  table switching activity = {act[0]:.3f}: median signed error zero "
                     f"over {act[1]} "
                     "power-capped, compute-bound GEMMs of the fit half (every "
                     f"{KERNEL_TABLE_STRIDE}th row); a property of the table's data, kept in "
                     "archsim.kernel_tables.TABLE_SWITCHING_ACTIVITY "
                     f"({kernel_tables.TABLE_SWITCHING_ACTIVITY}), not in the config")
    for h, rs in halves.items():
        report += _table(f"after, {h} half:", silicon.score(unit, rs))
    report += ["fitted constants:"] + [f"  {k} = {v:.6g}" for k, v in values.items()] + notes
    return Calibration(values, notes, text, report, Path(path))


def write_calibrated(cal: Calibration, out: str | Path | None = None) -> Path:
    """Write the calibrated config to ``out`` (default ``<name>_calibrated.yaml`` in the
    working folder), after checking it loads: nothing is replaced by a broken file.

    Returns:
        the path written.
    """
    dest = Path(out) if out else Path(f"{cal.source.stem}_calibrated.yaml")
    fd, tmp = tempfile.mkstemp(suffix=".yaml", dir=str(dest.parent.resolve()))
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(cal.text)
        load(tmp)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dest
