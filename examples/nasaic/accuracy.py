"""Illustrative accuracy predictors for the NASAIC co-search example.

archsim does not predict accuracy: a co-search takes it from the user (a trained
predictor, a table of measured accuracies, ...). These two functions stand in for such a
predictor with the usual power-law shape of accuracy versus model size (error falls as a
power of the parameter count until it saturates; Kaplan et al. 2020, Hestness et al. 2017):

    accuracy = a_max - b * (P / P0) ** -alpha

The constants are chosen so that CIFAR-10-sized residual networks land in the familiar
85-94 % range (ResNet-20, 0.27 M parameters: 91.3 %; ResNet-56, 0.85 M: 93.0 %; He et al.
2016) and small text encoders in the 80-90 % range. They are illustrative (tag C), not
fitted to any measurement; replace them with a real predictor for real decisions.
"""

from __future__ import annotations

from typing import Any

from archsim.explore.nas import build_network


def _params(net: dict[str, Any], embeddings: bool = True) -> int:
    w = build_network(net)
    if embeddings:
        return w.parameters
    return w.parameters - net.get("vocab", 0) * net.get("d_model", 0) \
        - net.get("seq", 0) * net.get("d_model", 0)


def cifar10(net: dict[str, Any]) -> float:
    """CIFAR-10 top-1 of a candidate CNN: 0.955 - 0.08 (P / 100k) ** -0.5 (tag C).
    ResNet-20 (P = 0.27 M): 0.906; ResNet-56-sized (0.85 M): 0.928."""
    return 0.955 - 0.08 * (_params(net) / 1e5) ** -0.5


def text(net: dict[str, Any]) -> float:
    """Sentence-classification accuracy of a small encoder from its non-embedding
    parameters: 0.93 - 0.10 (P / 1 M) ** -0.3 (tag C)."""
    return 0.93 - 0.10 * (_params(net, embeddings=False) / 1e6) ** -0.3
