"""The comparisons of each family (registered with ``archsim.validation.checks``)."""

from __future__ import annotations

from archsim.validation import Comparison, Gap, checks


@checks("workloads")
def _workloads() -> tuple[list[Comparison], list[Gap]]:
    """Model zoo identity: parameter counts and MACs against the published figures."""
    from workloads.zoo import model_info, model_names

    comps = []
    for name in model_names():
        info = model_info(name)
        comps.append(Comparison(
            "workloads", "parameters", info.published_source, "A", info.published_parameters,
            info.parameters, "params", 0.02, "identity: shapes from the published configs",
            design=name))
        if info.published_macs:
            comps.append(Comparison(
                "workloads", "MACs per sample", info.published_macs_source, "A",
                info.published_macs, _macs(name), "MAC", 0.02,
                "identity: counted from op shapes", design=name))
    return comps, []


def _macs(name: str) -> float:
    from workloads.zoo import build

    w = build(name)
    return float(sum(op.macs() for op in w.ops() if op.pass_ == "fwd")) / w.batch


@checks("spatial")
def _spatial() -> tuple[list[Comparison], list[Gap]]:
    gaps = [Gap("spatial", "tpu_like, eyeriss_like",
                "shared/reference has no figure for these designs; their cycle model is "
                "checked against closed-form SCALE-Sim fold counts in tests/arch, and the "
                "Timeloop Eyeriss cross-check arrives with the mapper (issue 4)")]
    return [], gaps
