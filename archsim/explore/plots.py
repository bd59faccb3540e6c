"""Plots of a sweep (matplotlib, Agg backend): the Pareto front of two objectives."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from archsim.explore.pareto import designs, pareto_rows
from archsim.explore.spec import ConstraintSpec

__all__ = ["plot_pareto"]


def plot_pareto(db: str | Path, objectives: Sequence[str], out: str | Path,
                constraints: Mapping[str, ConstraintSpec] | None = None,
                hashes: Iterable[str] | None = None) -> Path:
    """Scatter every design on two objectives (infeasible ones grey) and draw the front.
    The format follows ``out``'s suffix (.png, .svg, .pdf)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from archsim.explore.store import ResultStore

    x, y = objectives[0], objectives[1]
    with ResultStore(db, readonly=True) as st:
        rows = st.rows(hashes=hashes)
    ds = [d for d in designs(rows, constraints) if d[x] is not None and d[y] is not None]
    front = pareto_rows(rows, [x, y], constraints)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    bad = [d for d in ds if not d["feasible"]]
    good = [d for d in ds if d["feasible"]]
    if bad:
        ax.scatter([d[x] for d in bad], [d[y] for d in bad], s=8, c="0.8",
                   label="violates constraints")
    if good:
        ax.scatter([d[x] for d in good], [d[y] for d in good], s=8, c="tab:blue",
                   label="feasible")
    if front:
        ax.plot([d[x] for d in front], [d[y] for d in front], "o-", c="tab:red", ms=4,
                label=f"Pareto front ({len(front)})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    out = Path(out)
    fig.savefig(out)
    plt.close(fig)
    return out
