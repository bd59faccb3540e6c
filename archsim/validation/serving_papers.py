"""Serving and memory-tier papers whose headline figures archsim cannot score yet (issue 31):
each entry names the paper's setup, the switch that asks archsim the same question, and what
is missing -- a dataset, an engine, or a mechanism. Text only: no simulation runs here (the
scored figures of these techniques are in ``cluster.py`` and ``kv_techniques.py``)."""

from __future__ import annotations

from archsim.arch.reference import Comparison, EvaluationAPI, Gap, checks


@checks("serving")
def _serving(api: EvaluationAPI) -> tuple[list[Comparison], list[Gap]]:
    gaps = [
        Gap("serving", "Sarathi-Serve: up to 2.6x serving capacity over vLLM, Mistral-7B on one "
            "A100, and 3.7x for Yi-34B on two (Agrawal et al. OSDI'24, abstract)",
            "asked, not reached: python3 benchmarks/serve_studies.py sarathi (the same engine "
            "with --scheduler vllm at max batch 32/64/128, best taken, against --scheduler "
            "sarathi --chunk 512; capacity = the highest Poisson rate with P99 TBT <= 100 ms "
            "(Mistral) / 200 ms (Yi) and median TTFT <= 2 s; lengths lognormal through the "
            "paper's openchat_sharegpt4 medians and P90s, Table 3 as an earlier session read "
            "it) gives 1.09 -> 2.09 req/s, 1.91x (-26%) and 0.504 -> 1.39 req/s, 2.76x (-25%) "
            "at this commit (docs/serving.md). The mechanism is the paper's (vLLM's prefill-"
            "only iterations stall every running decode; chunks bound each iteration) and the "
            "direction and size hold, but both miss the issue's 20%. Not tuned; candidate "
            "causes: the lengths are fits, not the dataset (the authors' processed traces are "
            "not in their public snapshot), the SLOs are one reading of the paper, and the "
            "figure is the best of the paper's settings ('up to')"),
        Gap("serving", "DistServe: 7.4x more requests or 12.6x tighter SLO than the state of "
            "the art, >90% of requests within SLO (Zhong et al. OSDI'24, abstract)",
            "askable, not scored: prefill/decode disaggregation is a switch (--decode-replicas, "
            "--decode-tp, --kv-link; archsim provision searches the pools), but the figure is "
            "goodput per GPU of whole engines (vLLM, DeepSpeed-MII) on OPT-13B/66B/175B with "
            "per-application SLOs over ShareGPT, HumanEval and LongBench lengths; the "
            "baselines' engine behaviour and those length distributions are not in reach. "
            "The one DistServe number with a full setup (its simulator README: OPT-13B, "
            "ShareGPT, 4x A100-80G, 1.56 req/s per GPU) is asked in benchmarks/serve_studies.py "
            "distserve and missed (docs/serving.md 'DistServe': our decode instance sustains "
            "larger batches than DistServe's measured profile, and our ShareGPT lengths are "
            "the vLLM paper's means, not DistServe's OPT-tokenised ones)"),
        Gap("serving", "Splitwise: 1.4x throughput at 20% lower cost, or 2.35x throughput at "
            "the same cost and power (Patel et al. ISCA'24, abstract)",
            "askable, not scored: archsim provision searches prefill and decode pools of "
            "designs under cost and power budgets, and serve/data ships Splitwise-shaped "
            "traces (azure_conv_like, azure_code_like); but those traces are synthetic "
            "(the lengths' medians from the paper, the spreads assumed), the machines' prices "
            "and power caps are the paper's own, and its baseline is a fleet of its own "
            "simulator's machines: a ratio of two provisioning results would repeat our "
            "assumptions, not check them"),
        Gap("serving", "vLLM (PagedAttention): 1.7-2.7x higher request rate than Orca "
            "(Oracle) and 2.7-8x than Orca (Max) on ShareGPT at similar latency (Kwon et al. "
            "SOSP'23, Sec. 6.2; 2-4x over FasterTransformer and Orca in the abstract)",
            "askable, not scored: the same engine with two memory managers, --scheduler vllm "
            "(paged blocks allocated as the sequence grows) against --scheduler orca (prompt + "
            "the request's own output reserved on admission: the paper's Orca (Oracle)), "
            "--find-capacity. Ours for OPT-13B on an A100 40 GB (--set "
            "units[0].memory.capacity_gb=40) with serve/data/sharegpt_like.jsonl and --slo "
            "ttft=30s: 3.63 against 2.65 req/s, 1.37x (docs/serving.md). Not scored because "
            "that trace is synthetic (the paper's mean lengths, spreads assumed) and the "
            "published figure is a range over three models read off latency-rate curves, not "
            "one number per setup"),
        Gap("serving", "FlexGen: OPT-175B on one 16 GB GPU at 1 token/s, effective batch 144 "
            "(Sheng et al. ICML'23, abstract)",
            "not askable: FlexGen streams the weights themselves from CPU DRAM and disk every "
            "step (its zig-zag block schedule); archsim's serving offloads only KV blocks "
            "(--kv-offload-gb) and weight offload exists for training plans only (--offload "
            "params). archsim serve gpu/t4 --model opt-175b refuses with the reason (349 GB "
            "of weights for a 16 GB device): a missing mechanism, weight streaming in "
            "inference"),
        Gap("serving", "ZeRO-Infinity: over 25 PFLOP/s (40% of peak) on 512 V100s, a 1T model "
            "fine-tuned on one DGX-2 (Rajbhandari et al. SC'21, abstract)",
            "askable in part: --offload optimizer,params --offload-tier nvme on dgx2 prices "
            "NVMe-resident state and weights streamed per block; the models, batches and "
            "per-node NVMe bandwidth behind the figures are not in reach, and the V100's "
            "efficiency is unmeasured here (see the ZeRO-Offload gap: ours runs its GEMMs far "
            "above what the 2019-20 stack reached)"),
    ]
    return [], gaps
