"""One model on several designs, side by side (``archsim compare``).

Each design is evaluated through :func:`archsim.run_request.evaluate_request`, in its native
number format unless formats are given; :class:`Comparison` formats the metrics as a text
table or CSV.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from archsim.api import load
from archsim.result import Result
from archsim.run_request import RunRequest, evaluate_request
from archsim.workloads.errors import inert

__all__ = ["Comparison", "compare_designs", "COMPARE_ROWS"]

#: (label, Result attribute, unit) of each compared metric, in table order.
COMPARE_ROWS = (("latency", "latency_s", "s"), ("energy", "energy_j", "J"),
                ("power", "power_w", "W"), ("area", "area_mm2", "mm2"),
                ("utilization", "utilization", ""), ("TFLOP/s", "throughput_flops", "T"),
                ("tokens/s", "tokens_per_s", ""), ("samples/s", "samples_per_s", ""),
                ("DRAM bytes", "dram_bytes", "B"))


@dataclass(frozen=True)
class Comparison:
    """The results of one model on several designs.

    Attributes:
        model: the model evaluated.
        batch: its batch (sequences or samples).
        results: (design as given, its :class:`~archsim.result.Result`) in order.
    """

    model: str
    batch: int
    results: tuple[tuple[str, Result], ...]

    def rows(self) -> list[tuple[str, list[Any]]]:
        """(metric label, one value per design); metrics no design reports are left out."""
        rows: list[tuple[str, list[Any]]] = [
            ("format", [r.extra["provenance"]["a_format"] or "model" for _, r in self.results])]
        for label, key, _ in COMPARE_ROWS:
            vals = [getattr(r, key) for _, r in self.results]
            if all(v is None for v in vals):
                continue
            rows.append((label, vals))
        return rows

    def table(self) -> str:
        """A text table: one column per design."""
        width = max(12, *(len(d) for d, _ in self.results))
        lines = [f"{self.model} ({self.results[0][1].phase}, batch {self.batch})",
                 f"{'':<12} " + " ".join(f"{d:>{width}}" for d, _ in self.results)]
        for label, vals in self.rows():
            lines.append(f"{label:<12} " + " ".join(f"{_fmt(v):>{width}}" for v in vals))
        return "\n".join(inert(line) for line in lines)

    def to_csv(self) -> str:
        """CSV: a ``metric`` column and one column per design."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["metric", *[d for d, _ in self.results]])
        for label, vals in self.rows():
            w.writerow([label, *["" if v is None else v for v in vals]])
        return buf.getvalue()


def compare_designs(designs: Sequence[str], model: str, *, phase: str | None = None,
                    batch: int = 1, seq: int | None = None, context: int | None = None,
                    a_format: str | None = None, w_format: str | None = None,
                    fidelity: str = "analytical") -> Comparison:
    """Evaluate ``model`` on each of ``designs`` (config paths or reference names)."""
    out = []
    for d in designs:
        req = RunRequest(cmd="run", config=d, model=model, phase=phase, batch=batch, seq=seq,
                         context=context, a_format=a_format, w_format=w_format,
                         fidelity=fidelity)
        out.append((d, evaluate_request(req, load(d))))
    return Comparison(model, batch, tuple(out))


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    return f"{v:.4g}"
