"""Named dataflows (ws / os / is / rs) as constraints of the Einsum nest search.

The GEMM view's dataflows (``dataflow.mapping.DATAFLOW_CONSTRAINTS``) say which dims may be
split onto the array rows and columns and which may iterate inside a PE; the tensor indexed
by none of the in-PE dims stays in the PE register (stationary). For an Einsum with weights
``W``, inputs ``I`` and outputs ``O`` (the read-write data space) the same rules read, with
``dims(T)`` the dims a tensor's coordinates depend on and the reduction dims those not in
``dims(O)``:

| name | rows (Y) | columns (X) | PE-register loops | stationary |
|---|---|---|---|---|
| ws | dims(W) - dims(O) | dims(W) & dims(O) | all - dims(W) | W |
| os | dims(O) & dims(I) | dims(O) & dims(W) | all - dims(O) | O |
| is | dims(I) - dims(O) | dims(I) & dims(O) | all - dims(I) | I |
| rs | reduction dims | dims(O) | any | rows of all three |

For the GEMM ``Z[M,N] += A[M,K] B[K,N]`` these are exactly the GEMM view's sets (ws: rows K,
columns N, register M). A convolution's input depends on P, Q, R, S through its sliding
window, so ``is`` keeps an input window, not a single element, in the register.
"""

from __future__ import annotations

from archsim.dataflow.einsum import Einsum
from archsim.dataflow.nest import Constraints, LevelConstraint

__all__ = ["EINSUM_DATAFLOWS", "roles", "dataflow_constraints"]

EINSUM_DATAFLOWS = ("ws", "os", "is", "rs")
#: Data-space names of the weight operand in ``dataflow.einsum``'s forms.
_WEIGHTS = ("Weights", "B", "K", "V")


def roles(problem: Einsum) -> tuple[str, str, str]:
    """(weights, inputs, outputs) data-space names of ``problem``."""
    out = next(ds.name for ds in problem.data_spaces if ds.read_write)
    ins = [ds.name for ds in problem.data_spaces if not ds.read_write]
    w = next((n for n in ins if n in _WEIGHTS), ins[-1])
    i = next(n for n in ins if n != w)
    return w, i, out


def dataflow_constraints(problem: Einsum, dataflow: str, fanout_level: str,
                         register_level: str) -> Constraints:
    """Constraints making the Einsum search obey ``dataflow`` on a hierarchy whose
    ``fanout_level`` fans out to the PEs (columns on X, rows on Y) and whose
    ``register_level`` is the per-PE register: dims outside the row / column sets get
    spatial factor 1, dims outside the register set temporal factor 1 at the register, and
    the register keeps the stationary operand (ws, os, is)."""
    if dataflow not in EINSUM_DATAFLOWS:
        raise ValueError(f"dataflow {dataflow!r}: expected one of {EINSUM_DATAFLOWS}")
    w, i, o = roles(problem)
    dims = list(problem.dims)
    dw, di, do = (problem.space(n).dims() for n in (w, i, o))
    alld = frozenset(dims)
    rows, cols, reg = {
        "ws": (dw - do, dw & do, alld - dw),
        "os": (do & di, do & dw, alld - do),
        "is": (di - do, di & do, alld - di),
        "rs": (alld - do, do, alld),
    }[dataflow]
    x = [d for d in dims if d in cols]
    y = [d for d in dims if d in rows and d not in cols]
    fan = LevelConstraint(spatial_factors={d: 1 for d in dims if d not in x and d not in y},
                          spatial_permutation=tuple(x + y), spatial_split=len(x))
    stationary = {"ws": w, "os": o, "is": i}.get(dataflow)
    regc = LevelConstraint(temporal_factors={d: 1 for d in dims if d not in reg},
                           must_keep=frozenset({stationary}) if stationary else frozenset())
    return Constraints({fanout_level: fan, register_level: regc})
