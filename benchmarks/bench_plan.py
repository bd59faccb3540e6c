"""Plan-search benchmarks (issue 18): wall time of ``archsim plan`` for LLaMA-3 70B training
on 64 H100 and DeepSeek-V3 inference on 16 H100 (target: under 10 s each), the energy search
over power caps and fewer devices (issue 27; LLaMA-3 70B decode on 8 H100, the same target),
and the Megatron / Selene and TokenWeave tables of docs/cluster.md.

Run: ``python3 benchmarks/bench_plan.py``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import yaml  # noqa: E402

from archsim.arch.cluster import load_cluster  # noqa: E402
from archsim.mapper.plan import candidate_plans, search  # noqa: E402
from archsim.parallel import PlanOptions, evaluate_plan  # noqa: E402
from archsim.plans import load_cluster_for, search_plans  # noqa: E402
from archsim.workloads.models.transformer import TransformerShape  # noqa: E402
from archsim.workloads.parallel import ParallelPlan  # noqa: E402
from archsim.workloads.zoo import transformer_shape  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def plan_search(design: str, model: str, devices: int, phase: str, batch: int, seq: int,
                context: int | None = None) -> None:
    t0 = time.perf_counter()
    s = transformer_shape(model)
    c = load_cluster_for(design, devices)
    plans = candidate_plans(s, devices, phase, batch, seq, c.spec.devices_per_node)
    memo: dict = {}
    res = search(plans, lambda p: evaluate_plan(c, s, p, phase, batch, seq, context,
                                                PlanOptions(), memo), key=lambda r: r.step_s)
    dt = time.perf_counter() - t0
    best = res.ranked[0] if res.ranked else None
    print(f"{model} {phase} on {devices} x {design}: {res.tried} plans, {len(res.ranked)} fit, "
          f"{dt:.2f} s; best {best.plan.label() if best else '-'} "
          f"{best.step_s if best else float('nan'):.4g} s")


def energy_search() -> None:
    t0 = time.perf_counter()
    f = search_plans("dgx_h100", "llama3-70b", 8, phase="decode", batch=64, context=4096,
                     objective="energy", power_caps=(1.0, 0.85, 0.7), fewer_devices=True)
    print(f"llama3-70b decode energy search on dgx_h100: {f.tried} points, {len(f.ranked)} fit, "
          f"{time.perf_counter() - t0:.2f} s; {f.tradeoff()}")


def selene() -> None:
    d = yaml.safe_load((ROOT / "tests/data/cluster/megatron_selene.yaml").read_text())
    c = load_cluster(ROOT / "configs/cluster/selene.yaml")
    print("\n| model | selective+SP: paper / ours | full: paper / ours | full/selective: paper / ours |")
    print("|---|---|---|---|")
    for m in d["models"]:
        s = TransformerShape(name=m["name"], kind="decoder", layers=m["layers"],
                             d_model=m["hidden"], heads=m["heads"], ffn=4 * m["hidden"],
                             vocab=d["vocab"], context=d["seq"], dropout=True)
        t = {}
        for rc in ("selective", "full"):
            plan = ParallelPlan(tp=m["tp"], pp=m["pp"],
                                microbatches=m["global_batch"] // m["micro_batch"],
                                recompute=rc, sequence_parallel=rc == "selective")
            t[rc] = evaluate_plan(c, s, plan, "train", m["global_batch"], d["seq"]).step_s
        ps, pf = m["selective_s"], m["full_s"]
        print(f"| {m['name']} | {ps} / {t['selective']:.2f} s ({t['selective'] / ps - 1:+.1%}) | "
              f"{pf} / {t['full']:.2f} s ({t['full'] / pf - 1:+.1%}) | {pf / ps:.3f} / "
              f"{t['full'] / t['selective']:.3f} ({(t['full'] / t['selective']) / (pf / ps) - 1:+.1%}) |")


def tokenweave() -> None:
    c = load_cluster(ROOT / "configs/cluster/dgx_h100.yaml")
    print("\n| tokens | layer fwd (compute) | TP all-reduce | share of layer | exposed with overlap | step plain / overlapped |")
    print("|---|---|---|---|---|---|")
    for tokens in (1024, 2048, 4096, 8192, 16384):
        r = [evaluate_plan(c, "llama3-70b", ParallelPlan(tp=8), "prefill", tokens // 1024,
                           1024, options=PlanOptions(tp_overlap=o)) for o in (False, True)]
        b = r[0].block
        share = b["tp_comm_s"] / (b["fwd_s"] + b["tp_comm_s"])
        print(f"| {tokens} | {b['fwd_s'] * 1e3:.3f} ms | {b['tp_comm_s'] * 1e3:.3f} ms | "
              f"{share:.1%} | {r[1].block['tp_exposed_s'] * 1e3:.3f} ms | "
              f"{r[0].step_s * 1e3:.1f} / {r[1].step_s * 1e3:.1f} ms |")


if __name__ == "__main__":
    plan_search("h100_pod64", "llama3-70b", 64, "train", 128, 4096)
    plan_search("h100_pod16", "deepseek-v3", 16, "decode", 256, 1, 4096)
    plan_search("h100_pod16", "deepseek-v3", 16, "prefill", 16, 4096)
    energy_search()
    selene()
    tokenweave()
