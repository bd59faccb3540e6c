"""Golden predictions: every reference config x its reference workloads, pinned in
``tests/reference/golden/<design>.yaml`` so that any change of a prediction shows in review.

Regenerating is a deliberate act: ``python3 -m pytest tests/reference --update-golden``
(or ``python3 -m archsim.golden``). Values are compared with a relative tolerance and
differences are reported by key path (``resnet18.latency_s``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

import archsim
import archsim.arch.registry  # noqa: F401  (imports every family package)
from archsim.arch.reference import REFERENCE_WORKLOADS

__all__ = ["reference_workloads", "predict", "diff", "golden_dir", "golden_path", "write",
           "write_all", "RTOL"]

RTOL = 1e-6
METRICS = ("latency_s", "cycles", "energy_j", "area_mm2", "utilization", "dram_bytes")

def reference_workloads() -> Mapping[str, Mapping[str, Mapping[str, Any]]]:
    """Golden workloads per unit kind, as each family registers them in its own package
    (``arch/<family>/reference.py``, :func:`arch.reference.reference_workloads`)."""

    return REFERENCE_WORKLOADS


def golden_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "tests" / "reference" / "golden"


def _sig(x: float) -> float:
    return float(f"{x:.10g}")


def predict(config: Path) -> dict[str, dict[str, float]]:
    """Predictions of every reference workload that applies to ``config``'s first unit."""

    acc = archsim.load(config)
    out: dict[str, dict[str, float]] = {}
    for label, kw in reference_workloads().get(acc.units[0].kind, {}).items():
        res = archsim.evaluate(acc, archsim.workload_from_dict(kw))
        out[label] = {k: _sig(float(getattr(res, k))) for k in METRICS}
    return out


def diff(expected: dict, actual: dict, rtol: float = RTOL, path: str = "") -> list[str]:
    """Key paths whose values differ by more than ``rtol`` (or are missing)."""
    msgs = []
    for k in sorted(set(expected) | set(actual)):
        p = f"{path}.{k}" if path else str(k)
        if k not in actual:
            msgs.append(f"{p}: missing in the new prediction")
        elif k not in expected:
            msgs.append(f"{p}: new key (not in the golden file)")
        elif isinstance(expected[k], dict):
            msgs += diff(expected[k], actual[k], rtol, p)
        else:
            e, a = float(expected[k]), float(actual[k])
            if not math.isclose(e, a, rel_tol=rtol, abs_tol=1e-30):
                msgs.append(f"{p}: golden {e:.6g}, now {a:.6g} ({a / e - 1 if e else math.inf:+.3%})")
    return msgs


def golden_path(cfg: Path) -> Path:
    """The golden file of a reference config (``<folder>_<stem>.yaml``)."""
    return golden_dir() / f"{cfg.parent.name}_{cfg.stem}.yaml"


def write(cfg: Path, pred: dict) -> Path:
    """Write the golden file of ``cfg`` (a deliberate, reviewed act)."""
    path = golden_path(cfg)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# Golden predictions of configs/{cfg.parent.name}/{cfg.name}.\n"
              "# Regenerate deliberately: python3 -m pytest tests/reference --update-golden\n")
    path.write_text(header + yaml.safe_dump(pred, sort_keys=True))
    return path


def write_all() -> list[Path]:
    """Regenerate every golden file."""

    return [write(cfg, pred) for cfg in archsim.list_configs() if (pred := predict(cfg))]


if __name__ == "__main__":
    for p in write_all():
        print(f"wrote {p}")
