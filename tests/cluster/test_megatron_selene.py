"""Reference: Megatron-LM on Selene (Korthikanti et al. 2022, arXiv 2205.05198, Tables 3 and 5),
iteration times with full recomputation and with selective recomputation + sequence
parallelism. Data and sources: tests/data/cluster/megatron_selene.yaml. Tolerance: 15% on
each time, 10% on the full/selective ratio (issue 18)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from archsim.arch.cluster import load_cluster
from archsim.parallel import evaluate_plan
from archsim.workloads.models.transformer import TransformerShape
from archsim.workloads.parallel import ParallelPlan

ROOT = Path(__file__).resolve().parents[2]
DATA = yaml.safe_load((ROOT / "tests" / "data" / "cluster" / "megatron_selene.yaml").read_text())
MODELS = {m["name"]: m for m in DATA["models"]}
#: known gap (docs/validation.md): the 22B model (one pipeline stage, one microbatch of 4) is
#: predicted 19% fast with selective recompute (full: -14%, inside); its 41.5% MFU is lower
#: than the GEMM-bound model reaches (framework overheads on the small model are not modelled)
GAP = {("22b", "selective")}


@pytest.fixture(scope="module")
def selene():
    return load_cluster(ROOT / "configs" / "cluster" / "selene.yaml")


def _predict(cluster, m: dict, recompute: str) -> float:
    s = TransformerShape(name=f"megatron-{m['name']}", kind="decoder", layers=m["layers"],
                         d_model=m["hidden"], heads=m["heads"], ffn=4 * m["hidden"],
                         vocab=DATA["vocab"], context=DATA["seq"], dropout=True)
    plan = ParallelPlan(tp=m["tp"], pp=m["pp"], dp=m["gpus"] // (m["tp"] * m["pp"]),
                        microbatches=m["global_batch"] // m["micro_batch"],
                        recompute=recompute, sequence_parallel=recompute == "selective")
    return evaluate_plan(cluster, s, plan, "train", batch=m["global_batch"],
                         seq=DATA["seq"]).step_s


CASES = [pytest.param(n, rc, marks=pytest.mark.xfail(strict=True, reason="known gap: 22B"))
         if (n, rc) in GAP else (n, rc) for n in MODELS for rc in ("selective", "full")]


@pytest.mark.parametrize("name,recompute", CASES)
def test_iteration_time_within_15pct(selene, name, recompute):
    m = MODELS[name]
    pub = m[f"{recompute}_s"]
    pred = _predict(selene, m, recompute)
    assert abs(pred / pub - 1) <= 0.15, f"{name} {recompute}: {pred:.2f} s vs {pub} s"


@pytest.mark.parametrize("name", list(MODELS))
def test_full_over_selective_ratio_within_10pct(selene, name):
    m = MODELS[name]
    ratio = _predict(selene, m, "full") / _predict(selene, m, "selective")
    pub = m["full_s"] / m["selective_s"]
    assert abs(ratio / pub - 1) <= 0.10, f"{name}: {ratio:.3f} vs {pub:.3f}"
