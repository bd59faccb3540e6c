"""KV-cache techniques (archsim.workloads.kvtech): the papers' headline figures, scored where
archsim reaches them through its own cache and attention model, else a gap with the reason."""

from __future__ import annotations

from pathlib import Path

from archsim.arch.reference import Comparison, EvaluationAPI, Gap, checks
from archsim.serve.cost import IterationCost
from archsim.workloads.kvtech import KVTechniques

#: LongChat-7B-v1.5-32K's config.json (lmsys; Llama-2-7B's shape with a 32K context), the
#: model of Quest's efficiency figures ("Llama2-7B", Tang et al. ICML'24, Sec. 4.3.1)
_LONGCHAT = (Path(__file__).resolve().parents[2] / "tests" / "data" / "hf_dense"
             / "longchat-7b-v1.5-32k.json")
_QUEST = "Tang et al. ICML'24 (Quest), arXiv:2406.10774"
#: Quest's page size (tokens per KV block): "a 16 page size" (Sec. 4.3.1)
_QUEST_PAGE = 16


def quest_attention_speedup(api: EvaluationAPI, design: str, context: int,
                            budget: int) -> tuple[float, float]:
    """Quest's self-attention speedup over full-cache attention for one decode token of
    LongChat-7B (batch 1, one block): the full decode attention over ``context`` keys against
    the selection pass over the pages' min/max metadata (``ceil(context / 16)`` key + value
    pairs) plus the attention over the ``budget`` selected tokens -- the two kernels
    ``--topk-blocks`` prices (serve.kvtech). Returns (time ratio, byte ratio)."""
    c = IterationCost(api.load(design), str(_LONGCHAT), 1, attention="fused")
    full = c.decode_attention(1, context)
    quest = c.decode_attention(1, -(-context // _QUEST_PAGE)) + c.decode_attention(1, budget)
    return full.time_s / quest.time_s, full.dram_bytes / quest.dram_bytes


@checks("kvcache")
def _kvcache(api: EvaluationAPI) -> tuple[list[Comparison], list[Gap]]:
    """XQuant's 2x (cache X, not K and V) on a multi-head model; Quest's self-attention
    speedups on the RTX 4090 (held out: nothing of the attention model is fitted on them);
    Quest's end-to-end and SGLang's throughput as gaps (docs/serving.md, "KV-cache
    techniques")."""
    a100 = api.load("gpu/a100")
    base = IterationCost(a100, "llama2-7b", 1)
    remat = IterationCost(a100, "llama2-7b", 1, kv=KVTechniques(remat=True))
    comps = [Comparison(
        "kvcache", "XQuant: caching X instead of K and V saves 2x memory (FP16, MHA)",
        "XQuant, Tomar et al. 2025, arXiv:2508.10395, abstract", "B", 2.0,
        base.kv_bytes_per_token / remat.kv_bytes_per_token, "x", 0.05,
        "the cache's bytes per token, no fitted constant: a property of the mechanism on "
        "a multi-head model (llama2-7b, TP1)", "gpu/a100 llama2-7b")]
    # Quest, Sec. 4.3.1 / Fig. 9 (RTX 4090, CUDA 12.2, Llama2-7B, FP16 FlashInfer baseline,
    # page 16): the text's 7.03x at 32K with a 2048-token budget, and the figure's three
    # arrow labels, drawn on its 4096-budget rows (their y positions in the PDF's drawing
    # match the 4096 row label of each panel): 1.69x, 2.92x, 4.86x at 8K, 16K, 32K
    why = ("issue 31: 20% (held out; the RTX 4090 is a spec-sheet design, its GDDR6X "
           "efficiency carried from the A6000/T4, nothing fitted on Quest)")
    for ctx, budget, ref, src in ((32768, 2048, 7.03, "Sec. 4.3.1 text and Fig. 9 caption"),
                                  (8192, 4096, 1.69, "Fig. 9 arrow label, 8K panel"),
                                  (16384, 4096, 2.92, "Fig. 9 arrow label, 16K panel"),
                                  (32768, 4096, 4.86, "Fig. 9 arrow label, 32K panel")):
        t, _ = quest_attention_speedup(api, "gpu/rtx4090", ctx, budget)
        comps.append(Comparison(
            "kvcache", f"Quest self-attention speedup over FlashInfer, {ctx // 1024}K context, "
            f"{budget}-token budget (--topk-blocks {budget // _QUEST_PAGE})",
            f"{_QUEST}, {src}", "B", ref, t, "x", 0.20, why,
            "gpu/rtx4090 longchat-7b-32k"))
    _, b = quest_attention_speedup(api, "gpu/rtx4090", 32768, 2048)
    gaps = [
        Gap("kvcache", "Quest: 1.74x (FP16 weights) and 2.23x (4-bit AWQ weights) end-to-end "
            "decode speedup at 32K context, 2048-token budget (Sec. 4.3.2, Fig. 10)",
            "not scored: measured on an RTX 6000 Ada (not among the designs) through a "
            "Hugging Face Transformers pipeline, with Quest off in the first two layers (Sec. "
            "3.4) and AWQ 4-bit weight kernels; the self-attention figures of the same paper "
            f"are scored on the RTX 4090 above ({b:.2f}x fewer bytes at 32K / 2048)"),
        Gap("kvcache", "SGLang RadixAttention: up to 5x throughput over vLLM/Guidance/LMQL",
            "not scored: the speedup depends on each benchmark's hit rate (40-88% reported) "
            "and on the baselines' engines (CPU-bound Python runtimes archsim does not model); "
            "archsim takes the hit rate as input (--prefix-hit-rate) and prices the skipped "
            "prefill and the shared blocks"),
    ]
    return comps, gaps
