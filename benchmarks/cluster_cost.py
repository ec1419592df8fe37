"""What a real pretraining run costs, before launching it: FLOPs, tokens/s, wall time and GPU-hours of
the notes' BERT-base recipe and of GPT-2 124M, from the MFU bertlab measured on an H100.

    python benchmarks/cluster_cost.py [--mfu-bert 0.363] [--mfu-gpt 0.307] [--peak 989] \\
        [--nodes 1,2,4,8] [--gpus-per-node 8] [--measured RUN=TOKENS_PER_S ...]

The formula, one line per phase:

    FLOPs       = steps x step FLOPs            (the same count the MFU was measured with:
                                                 BERT benchmarks/bench_pretrain.step_flops, 3 x the
                                                 forward, the MLM head at the masked positions only;
                                                 GPT 6 x non-embedding parameters + 12 x length x
                                                 d_model per layer + 6 x d_model x vocab per token)
    GPU-seconds = FLOPs / (MFU x peak)          (peak: the GPU's dense bf16 TFLOP/s)
    wall time   = GPU-seconds / (nodes x GPUs per node)  at perfect data-parallel scaling

The MFU figures are docs/results/gpu.md's, measured on one H100 SXM (bf16, --compile): BERT-base
36.3% at batch 256 x 128 tokens, GPT-2 124M 30.7% at 16 x 1024. Three things make a real run slower
than the table, and the guide (docs/guide/cluster.md) says how to check each: the 512-token phase
is priced at the 128-token MFU (its longer attention usually raises MFU a little; not measured);
a fixed global batch split over more GPUs leaves each GPU a smaller batch (BERT's 256 over 64 GPUs is
4 sequences each, where MFU falls); and the gradient all-reduce between nodes is not free.
`--measured` puts a measured tokens/s (per GPU) beside a row's prediction.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_pretrain import step_flops  # noqa: E402

from bertlab.models import GPT, GPTConfig  # noqa: E402
from bertlab.training.flops import transformer_flops_per_token  # noqa: E402


def bert_phases():
    """The notes' recipe (google-research/bert's): 1M steps of 256 sequences, 90% at 128 tokens
    (20 masked positions), the last 10% at 512 (77: 15% of 512)."""
    return [("BERT-base, phase 1: 900k steps x 256 x 128", 900_000, 256, 128, step_flops("base", 256, seq=128)),
            ("BERT-base, phase 2: 100k steps x 256 x 512", 100_000, 256, 512,
             step_flops("base", 256, seq=512, predictions=77))]


def gpt_flops_per_token(length: int = 1024) -> float:
    config = GPTConfig.preset("gpt2")
    with torch.device("meta"):  # the parameter count without allocating the weights
        model = GPT(config)
    return transformer_flops_per_token(model, length) + 6 * config.n_embd * config.vocab_size


def gpt_phases():
    """GPT-2 124M at 1024 tokens: llm.c's 10B-token FineWeb run (19,073 steps of 524,288 tokens)
    and nanoGPT's OpenWebText recipe (600k steps of 491,520 tokens: 12 x 1024 x 40 accumulated)."""
    per_token = gpt_flops_per_token(1024)
    return [("GPT-2 124M, 10B tokens: 19,073 steps x 512 x 1024", 19_073, 512, 1024, per_token * 512 * 1024),
            ("GPT-2 124M, nanoGPT: 600k steps x 480 x 1024", 600_000, 480, 1024, per_token * 480 * 1024)]


def table(rows, nodes, gpus_per_node, peak, measured) -> str:
    head = ["run", "tokens", "PFLOPs", "MFU", "tokens/s per GPU", "GPU-hours"]
    head += [f"wall, {n} x {gpus_per_node}" for n in nodes]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    totals = {}
    for name, family, mfu, steps, batch, length, flops in rows:
        tokens = steps * batch * length
        total = steps * flops
        gpu_seconds = total / (mfu * peak * 1e12)
        per_gpu = tokens / gpu_seconds
        cells = [name, f"{tokens / 1e9:,.1f}B", f"{total / 1e15:,.0f}", f"{mfu:.1%}", f"{per_gpu:,.0f}",
                 f"{gpu_seconds / 3600:,.1f}"]
        cells += [f"{gpu_seconds / 3600 / (n * gpus_per_node):,.2f} h" for n in nodes]
        if name in measured:
            cells[4] += f" (measured {measured[name]:,.0f})"
        lines.append("| " + " | ".join(cells) + " |")
        totals.setdefault(family, 0.0)
        totals[family] += gpu_seconds
    lines.append("")
    for family, seconds in totals.items():
        lines.append(f"{family}: {seconds / 3600:,.1f} GPU-hours in all; on {nodes[-1]} x {gpus_per_node} GPUs "
                     f"{seconds / 3600 / (nodes[-1] * gpus_per_node):,.2f} h at perfect scaling")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="The formula and its assumptions: the module's docstring and docs/guide/cluster.md.")
    p.add_argument("--mfu-bert", type=float, default=0.363, help="BERT-base MFU (default: the H100's, docs/results/gpu.md)")
    p.add_argument("--mfu-gpt", type=float, default=0.307, help="GPT-2 124M MFU (default: the H100's)")
    p.add_argument("--peak", type=float, default=989.0, help="dense bf16 TFLOP/s of one GPU (H100 SXM: 989)")
    p.add_argument("--nodes", default="1,2,4,8", help="node counts for the wall-time columns")
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--measured", nargs="*", default=[], metavar="RUN=TOKENS_PER_S",
                   help="a measured tokens/s per GPU beside the row whose name starts with RUN")
    args = p.parse_args()
    nodes = [int(n) for n in args.nodes.split(",")]
    rows = [(name, "BERT-base", args.mfu_bert, *rest) for name, *rest in bert_phases()]
    rows += [(name, "GPT-2 124M (" + name.split(", ")[1].split(":")[0] + ")", args.mfu_gpt, *rest)
             for name, *rest in gpt_phases()]
    measured = {}
    for item in args.measured:
        key, _, value = item.partition("=")
        match = [row[0] for row in rows if row[0].startswith(key)]
        if not match or not value:
            p.error(f"--measured {item!r}: give RUN=TOKENS_PER_S where RUN starts one of: {[r[0] for r in rows]}")
        measured[match[0]] = float(value)
    print(f"peak {args.peak:g} TFLOP/s a GPU; MFU BERT {args.mfu_bert:.1%}, GPT {args.mfu_gpt:.1%}\n")
    print(table(rows, nodes, args.gpus_per_node, args.peak, measured))


if __name__ == "__main__":
    main()
