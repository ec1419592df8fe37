"""int8 and onnxruntime against fp32 PyTorch (bertlab's and the peers'), same inputs, one process.

    python benchmarks/bench_export.py [--only embed,gpt] [--repeat 3] [--texts 1000] [--new 64] [--no-onnx]

embed: all-MiniLM-L6-v2 (the real weights) embeds the first --texts lines of
  data/python-docs/summaries.txt (real docstring summaries), batch 32, mean pooling, normalised:
  sentence-transformers fp32 (the peer), bertlab fp32, bertlab int8 (inference.int8), onnxruntime
  on `bertlab export`'s graph fp32 and int8 (onnxruntime.quantization.quantize_dynamic), the last
  two through bertlab's own embed_ids (length-sorted batches). Quality: cosine to bertlab fp32.
gpt: GPT-2 124M's config with random weights (no hub weights), batch 1, a 32-token prompt and
  --new greedy tokens: HF GPT2LMHeadModel.generate fp32 (the peer), bertlab fp32, bertlab int8,
  onnxruntime fp32 (the export, through bertlab's generate). Quality: how many of int8's greedy tokens
  equal fp32's, and the relative error of int8's prompt logits (random weights have no perplexity:
  docs/guide/export.md gives int8's perplexity on a trained GPT).

Each round calls every implementation once, in an order that rotates by round, so all meet the
same load on a shared machine; rows give the best round and the median round. Ratios are against
the peer's fp32.
"""
import argparse
import copy
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Row, print_table  # noqa: E402

from bertlab.inference.int8 import quantize_int8  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def rounds(functions: dict, repeat: int) -> tuple[dict, dict]:
    """({name: [wall seconds per round]}, {name: [CPU seconds per round]}): one untimed call each,
    then `repeat` rounds in rotating order. CPU seconds count the work done, not the time spent
    waiting for a core on a machine shared with other jobs (every implementation here runs on
    the threads torch.get_num_threads() gives: run with OMP_NUM_THREADS=1 for one each)."""
    for fn in functions.values():
        fn()
    names = list(functions)
    wall, cpu = {name: [] for name in functions}, {name: [] for name in functions}
    for i in range(repeat):
        for name in names[i % len(names):] + names[:i % len(names)]:
            start, cpu_start = time.perf_counter(), time.process_time()
            functions[name]()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - cpu_start)
    return wall, cpu


def timed_rows(workload, work, unit, times):
    wall, cpu = times
    return ([Row(workload, name, work, unit, s) for name, s in wall.items()] +
            [Row(workload + " per CPU-second", name, work, unit.replace("/s", "/CPU-s"), s) for name, s in cpu.items()])


def quantize_onnx_folder(folder, out):
    """A copy of an export with every graph's MatMul weights in int8 (onnxruntime's dynamic quantisation)."""
    import shutil

    from onnxruntime.quantization import QuantType, quantize_dynamic
    shutil.copytree(folder, out)
    for name in os.listdir(folder):
        if name.endswith(".onnx"):
            quantize_dynamic(os.path.join(folder, name), os.path.join(out, name), weight_type=QuantType.QInt8,
                             per_channel=True)
    return out


def embed_bench(args, tmp):
    from sentence_transformers import SentenceTransformer

    from bertlab.inference.embed import embed_texts
    from bertlab.interop.load import load_model
    from bertlab.interop.pretrained import resolve
    with open(os.path.join(ROOT, "data", "python-docs", "summaries.txt"), encoding="utf-8") as f:
        texts = [line.strip() for line in f if line.strip()][:args.texts]
    loaded = load_model("minilm")
    fp32, tokenizer = loaded.model, loaded.tokenizer
    int8 = quantize_int8(copy.deepcopy(fp32))
    peer = SentenceTransformer(resolve("minilm"), device="cpu")
    models = {"sentence-transformers fp32": None, "bertlab fp32": fp32, "bertlab int8": int8}
    if not args.no_onnx:
        from bertlab.inference.onnx_export import export_onnx
        from bertlab.inference.onnx_runtime import load_onnx
        export_onnx("minilm", os.path.join(tmp, "minilm.onnx"), log=lambda m: None)
        models["onnxruntime fp32"] = load_onnx(os.path.join(tmp, "minilm.onnx"))
        models["onnxruntime int8"] = load_onnx(quantize_onnx_folder(os.path.join(tmp, "minilm.onnx"),
                                                                    os.path.join(tmp, "minilm-int8.onnx")))
    out = {}

    def job(name, model):
        def run():
            if model is None:
                out[name] = peer.encode(texts, batch_size=32, normalize_embeddings=True)
            else:
                out[name] = embed_texts(model, tokenizer, texts, normalize=True, batch_size=32)
        return run
    times = rounds({name: job(name, model) for name, model in models.items()}, args.repeat)
    rows = timed_rows(f"MiniLM embed {len(texts)} real lines", len(texts), "texts/s", times)
    reference = out["bertlab fp32"]
    for name, vectors in out.items():
        cosine = (vectors * reference).sum(1)
        print(f"quality {name}: cosine to bertlab fp32 mean {cosine.mean():.4f}, min {cosine.min():.4f}")
    return rows


def gpt_bench(args, tmp):
    from transformers import GPT2Config, GPT2LMHeadModel

    from bertlab.inference.generate import SamplingOptions, generate
    from bertlab.models import GPT, GPTConfig
    config = GPTConfig.preset("gpt2")
    torch.manual_seed(0)
    from bertlab.models.accelerate import accelerate
    fp32 = accelerate(GPT(config)).eval()
    hf = GPT2LMHeadModel(GPT2Config(**{k: v for k, v in config.to_dict().items() if k != "architectures"})).eval()
    int8 = quantize_int8(copy.deepcopy(fp32))
    prompt = torch.randint(0, 50000, (1, 32), generator=torch.Generator().manual_seed(1))
    options = SamplingOptions(max_new_tokens=args.new)
    models = {"HF GPT2LMHeadModel fp32": hf, "bertlab fp32": fp32, "bertlab int8": int8}
    if not args.no_onnx:
        import json

        from bertlab.inference.onnx_export import export_graph, graphs_of, metadata
        from bertlab.inference.onnx_runtime import load_onnx
        from bertlab.interop.load import LoadedModel
        folder, loaded = os.path.join(tmp, "gpt2.onnx"), LoadedModel("gpt", fp32, None)
        os.makedirs(folder)
        files = graphs_of(loaded)
        export_graph(*files["model.onnx"], os.path.join(folder, "model.onnx"))
        with open(os.path.join(folder, "onnx.json"), "w", encoding="utf-8") as f:
            json.dump(metadata(loaded, "random weights", files), f)
        models["onnxruntime fp32"] = load_onnx(folder)
    out = {}

    def job(name, model):
        def run():
            if name.startswith("HF"):
                with torch.inference_mode():
                    ids = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=args.new,
                                         min_new_tokens=args.new, do_sample=False, pad_token_id=50256)
                out[name] = ids[0, 32:].tolist()
            else:
                out[name] = generate(model, prompt, options)[0]
        return run
    times = rounds({name: job(name, model) for name, model in models.items()}, args.repeat)
    rows = timed_rows(f"GPT-2 124M generate b=1, 32+{args.new}", args.new, "tokens/s", times)
    same = sum(a == b for a, b in zip(out["bertlab int8"], out["bertlab fp32"]))
    with torch.inference_mode():
        a, b = int8(prompt)[0], fp32(prompt)[0]
    print(f"quality bertlab int8: {same}/{args.new} greedy tokens equal fp32's (random weights: near-uniform "
          f"logits, the hardest case for agreement); prompt logits relative error {float((a - b).norm() / b.norm()):.4f}")
    if "onnxruntime fp32" in out:
        print(f"quality onnxruntime fp32: greedy tokens identical to bertlab fp32: {out['onnxruntime fp32'] == out['bertlab fp32']}")
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default="embed,gpt")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--texts", type=int, default=1000)
    p.add_argument("--new", type=int, default=64)
    p.add_argument("--no-onnx", action="store_true")
    args = p.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load {os.getloadavg()}", flush=True)
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for job in args.only.split(","):
            rows = {"embed": embed_bench, "gpt": gpt_bench}[job](args, tmp)
            baseline = rows[0].implementation
            for stat in ("best", "median"):
                print_table(rows, baseline=baseline, stat=stat)
            for work in dict.fromkeys(r.workload for r in rows):
                mine = [r for r in rows if r.workload == work]
                for r in mine[1:]:
                    ratios = [b / a for a, b in zip(r.seconds, mine[0].seconds)]
                    print(f"{work}: {r.implementation} / {baseline}, median of {len(ratios)} rounds' ratios: "
                          f"{statistics.median(ratios):.2f}x")
    print(f"({time.time() - start:.0f} s, load after {os.getloadavg()})")


if __name__ == "__main__":
    main()
