"""Builders behind :mod:`workloads.zoo`: the transformer builder shared with the Hugging
Face importer (``transformer``), the CNNs (``cnn``) and the training transformation and
parameter ledger (``common``)."""
