"""Exploration (co-search) figures and why they do not apply numerically."""

from __future__ import annotations

from archsim.arch.reference import Comparison, EvaluationAPI, Gap, checks


@checks("explore")
def _explore(api: EvaluationAPI) -> tuple[list[Comparison], list[Gap]]:
    """NASAIC (nasaic.yaml): figures that do not apply numerically, and why."""
    return [], [Gap(
        "explore", "NASAIC vs successive NAS->ASIC: latency -17.77%, energy 2.49x, area 2.32x, "
        "accuracy -0.76% (nasaic.yaml)",
        "not comparable as numbers: NASAIC's template set, tasks and accuracy data are not "
        "public; examples/nasaic reproduces the narrative with an illustrative accuracy "
        "predictor (tag C): the network-first baseline violates spec S1 (latency 2.75 ms, "
        "energy 2.24 mJ) that co-search meets at 0.73 points lower accuracy (docs/explore.md)")]
