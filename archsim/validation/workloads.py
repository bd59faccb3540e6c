"""Model zoo identity: parameter counts, MACs and layer shapes against published figures."""

from __future__ import annotations

from archsim.arch.reference import Comparison, EvaluationAPI, Gap, checks, load_reference
from archsim.workloads.zoo import build, model_info, model_names


@checks("workloads")
def _workloads(api: EvaluationAPI) -> tuple[list[Comparison], list[Gap]]:
    """Model zoo identity: parameter counts and MACs against the published figures."""

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
    shape_comps, gaps = _zoo_shapes()
    return comps + shape_comps, gaps


#: models.yaml entry -> zoo names, keyed by size where the entry has sizes
_MODELS_YAML = {"gpt2": "gpt2-{}", "gpt3": "gpt3-{}", "llama2": "llama2-{}",
                "llama3_8b": "llama3-8b", "opt_175b": "opt-175b", "bloom_176b": "bloom-176b",
                "bitnet_b158_3b": "bitnet-b1.58-3b", "vit_b16": "vit-b16", "bert_base": "bert-base"}


#: documented deviations of the zoo from models.yaml (workloads/zoo.py)
_SHAPE_DEVIATIONS = {"gpt3-xl": "Brown et al. 2020 (Table 2.1) list 24 heads of d_head 128, which "
                                "does not divide d_model 2048; 2048 = 16 x 128 and the published "
                                "1.3B parameter count both need 16 heads"}


def _zoo_shapes() -> tuple[list[Comparison], list[Gap]]:
    """The zoo's transformer shapes against models.yaml: per model, the number of its
    hyper-parameters (L, d, h, kv, ffn, vocab, as far as the file gives them) that match."""

    ref = load_reference("models.yaml")
    comps: list[Comparison] = []
    gaps: list[Gap] = []
    for key, pattern in _MODELS_YAML.items():
        entry = ref.get(key)
        if not isinstance(entry, dict):
            continue
        shared = {k: v for k, v in entry.items() if not isinstance(v, dict)}
        sized = {k: v for k, v in entry.items() if isinstance(v, dict)}
        for size, fields in (sized.items() if sized else [("", {})]):
            want = {**shared, **fields}
            name = pattern.format(size)
            info = model_info(name)
            ffn = want.get("ffn")
            if isinstance(ffn, str) and ffn.endswith("d"):
                ffn = int(ffn[:-1]) * int(want["d"])
            expect = {"L": want.get("L"), "d": want.get("d"), "h": want.get("h"),
                      "kv": want.get("kv", want.get("h")), "ffn": ffn, "vocab": want.get("vocab")}
            ours = {"L": info.layers, "d": info.d_model, "h": info.heads, "kv": info.kv_heads,
                    "ffn": info.ffn, "vocab": info.vocab}
            given = [k for k, v in expect.items() if isinstance(v, int)]
            wrong = [f"{k} {ours[k]} (file {expect[k]})" for k in given if ours[k] != expect[k]]
            c = Comparison("workloads", "shape fields matching models.yaml", f"models.yaml {key}"
                           + (f".{size}" if size else ""), "C", len(given),
                           len(given) - len(wrong), "fields", 0.0,
                           "identity: the zoo is built from these shapes", design=name)
            if c.ok:
                comps.append(c)
            else:
                gaps.append(Gap("workloads", f"{name} shape in models.yaml",
                                f"ours differs in {', '.join(wrong)}: "
                                f"{_SHAPE_DEVIATIONS.get(name, 'see workloads/zoo.py')}"))
    return comps, gaps


def _macs(name: str) -> float:

    w = build(name)
    return float(sum(op.macs() for op in w.ops() if op.pass_ == "fwd")) / w.batch
