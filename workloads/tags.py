"""Op tags: what an op *is* in its network, so that code selects ops by tag, never by name.

Every :class:`~workloads.ops.Op` carries three tags (names stay labels for people):

* ``pass_``: its training pass, one of :data:`PASSES`; :func:`pass_group` folds it into
  ``forward``, ``backward`` or ``optimizer``;
* ``block``: the index of the repeated block (transformer layer) it belongs to; None outside
  the blocks (embeddings, final norm, head; CNN layers);
* ``role``: one of :data:`ROLES` ("" = unknown: an imported or a single op).

The builders (:mod:`workloads.models`) set them; the training transform, tensor-parallel
sharding, format changes and renaming keep them; backward and optimizer-update ops carry the
``block`` and ``role`` of the forward op they belong to. Who selects by them: plan evaluation
(``archsim.parallel``: passes, the attention core for context parallelism, norms and residuals
for sequence parallelism, routed experts for load imbalance, the blocks), serving
(``archsim.serve.cost``: attention core vs the rest of a block), the units' attention fusion
(``qk``, ``attn``, ``av``) and the per-op result rows (``archsim.OpResult``).
"""

from __future__ import annotations

from typing import Literal

__all__ = ["PASSES", "PassGroup", "pass_group", "ROLES", "ATTENTION_CORE_ROLES",
           "EXPERT_ROLES", "SEQUENCE_PARALLEL_ROLES", "FUSED_AR_NORM_ROLES"]

PASSES = ("fwd", "bwd_data", "bwd_weight", "update")

#: forward, backward or optimizer: the coarse training pass of an op
PassGroup = Literal["forward", "backward", "optimizer"]
_PASS_GROUP: dict[str, PassGroup] = {"fwd": "forward", "bwd_data": "backward",
                                     "bwd_weight": "backward", "update": "optimizer"}


def pass_group(pass_: str) -> PassGroup:
    """``forward`` (fwd), ``backward`` (bwd_data, bwd_weight) or ``optimizer`` (update)."""
    return _PASS_GROUP[pass_]


#: The closed set of op roles (``Op.role``), each with what it means.
ROLES: dict[str, str] = {
    "": "unknown (an imported or a single op)",
    "embedding": "token / position / token-type lookup, patch embedding, their sum, the "
                 "projection into the model width",
    "norm": "a normalisation of the activations (a block's norms, embedding and final norm, "
            "CNN batch norm)",
    "qkv": "query / key / value projections (MLA: the low-rank projections, their "
           "up-projections and the absorbed query)",
    "qkv_norm": "a norm inside the attention projections (MLA's latent norms, q/k norms)",
    "rope": "rotary position embedding of queries and keys",
    "qk": "attention scores Q K^T (attention core)",
    "attn": "a vector op on the attention scores: softmax, ALiBi bias, dropout of the "
            "probabilities (attention core)",
    "av": "attention probabilities x V (attention core)",
    "attention": "fused attention, QK^T + softmax + AV in one op (attention core)",
    "kv_remat": "K and V recomputed from the cached layer input X (KV rematerialisation, "
                "workloads.kvtech)",
    "proj": "attention output projection (MLA: and the absorbed value projection)",
    "residual": "a residual add",
    "ffn_up": "MLP up projection (dense FFN, shared experts)",
    "ffn_gate": "MLP gate projection (dense FFN, shared experts)",
    "ffn_down": "MLP down projection (dense FFN, shared experts)",
    "act": "an activation function (MLP activation, CNN ReLU)",
    "router": "MoE router and its softmax over the experts",
    "expert_gate": "routed experts' gate projections",
    "expert_up": "routed experts' up projections",
    "expert_act": "routed experts' activation",
    "expert_down": "routed experts' down projections",
    "combine": "the weighted sum of the experts' outputs",
    "moe": "a fused mixture-of-experts call: top-k, token sort, the routed experts' grouped "
           "GEMMs, activation and weighted combine in one op",
    "lm_head": "the language-model head (and its input projection)",
    "loss": "the loss (cast of the logits, log-softmax, NLL)",
    "classifier": "a classifier head (ViT)",
    "pooler": "a pooler (BERT)",
    "conv": "a convolution",
    "fc": "a fully-connected layer (CNNs, imported graphs)",
    "pool": "a pooling op",
    "collective": "all-reduce, all-gather, reduce-scatter, all-to-all, send/recv",
    "elementwise": "another element-wise kernel (cast, dropout, copy, head merge)",
}

#: roles of the attention core: the ops that grow with (queries x keys); context
#: parallelism multiplies them, serving prices them per request
ATTENTION_CORE_ROLES = frozenset({"qk", "attn", "av", "attention"})
#: roles of the routed experts' ops (expert-load imbalance scales them)
EXPERT_ROLES = frozenset({"expert_gate", "expert_up", "expert_act", "expert_down"})
#: roles of a block that Megatron sequence parallelism splits over the tensor-parallel group
#: (the block's norms and residual adds)
SEQUENCE_PARALLEL_ROLES = frozenset({"norm", "residual"})
#: roles of a block that a fused all-reduce + RMSNorm kernel (TokenWeave) folds into the
#: tensor-parallel all-reduce: the norms that follow it and the residual adds fused with them
FUSED_AR_NORM_ROLES = frozenset({"norm", "residual"})
