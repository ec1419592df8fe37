"""GPT vs HF GPT2LMHeadModel, same config (GPT-2 124M), random weights, in one process.

    python benchmarks/bench_gpt.py [--repeat 5] [--only gen1,gen8,train]
    python benchmarks/bench_gpt.py --only train --device cuda --precision bf16 --compile both \
        --batch-size 16 --length 1024 --warmup 3 --repeat 20

On a GPU (--device cuda) each call ends with torch.cuda.synchronize(), and the training rows add
model-FLOPs utilisation: training.flops' estimate (6 x non-embedding parameters + attention's
12 x length x d_model per layer) plus the tied output layer (6 x d_model x vocab) per token, over
the device's dense peak (bertlab.device.peak_tflops). --compile names the sides whose model
torch.compile wraps (their first calls compile: give --warmup a few).

Generation: a 32-token prompt, 128 new tokens, greedy, both with a key/value cache, batch 1 and 8.
Training: batch 8 x 256 tokens, dropout on (train mode), one step of the engine's train_step on both
sides (forward, loss, backward, gradient-norm clip at 1.0, AdamW step): torch's fused AdamW with
lr 1e-4 on both, the kernel of bertlab's make_adamw and HF Trainer's default with torch >= 2.8.

The two sides' calls alternate (ours, HF, then HF, ours, ...), so both meet the same load on a
shared machine. A run reports each side's throughput per wall second and per CPU second (both
threads: the work done, not the time spent waiting for a core), and the median over rounds of the
ratio of one round's two calls, the figure least moved by other jobs.

Our generation prepacks the weights for the batch size once (GPT.prepack_for_decoding, MKL packed
GEMM); that one-time cost falls in the untimed warm-up call and is printed separately.
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Row, alternating, print_table, round_ratios  # noqa: E402

from bertlab.inference.generate import SamplingOptions, generate  # noqa: E402
from bertlab.models import GPT, GPTConfig  # noqa: E402
from bertlab.device import peak_tflops  # noqa: E402
from bertlab.training.engine import autocast_context, train_step  # noqa: E402
from bertlab.training.flops import transformer_flops_per_token  # noqa: E402
from bertlab.training.schedules import make_scheduler  # noqa: E402

PROMPT, NEW, TRAIN_BATCH, TRAIN_LEN = 32, 128, 8, 256


def models(config):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    from bertlab.models.accelerate import accelerate
    ours = accelerate(GPT(config))
    hf = GPT2LMHeadModel(GPT2Config(**{k: v for k, v in config.to_dict().items() if k != "architectures"}))
    return ours, hf


def paired_rows(work, units, ours, theirs, repeat, warmup=1):
    """Rows of wall seconds, and rows of CPU seconds (workload suffixed "per CPU-second")."""
    (ours_s, ours_cpu), (hf_s, hf_cpu) = alternating(ours, theirs, repeat, warmup)
    return [Row(work, "bertlab", units, "tokens/s", ours_s), Row(work, "HF GPT2LMHeadModel", units, "tokens/s", hf_s),
            Row(work + " per CPU-second", "bertlab", units, "tokens/CPU-s", ours_cpu),
            Row(work + " per CPU-second", "HF GPT2LMHeadModel", units, "tokens/CPU-s", hf_cpu)]


def generation_rows(ours, hf, batch, repeat):
    ours.eval(), hf.eval()
    prompt = torch.randint(0, 50000, (batch, PROMPT), generator=torch.Generator().manual_seed(batch))
    options = SamplingOptions(max_new_tokens=NEW)  # no eos: every row makes all 128 tokens

    def run_ours():
        out = generate(ours, prompt, options)
        assert all(len(r) == NEW for r in out)

    def run_hf():
        with torch.inference_mode():
            out = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=NEW,
                              min_new_tokens=NEW, do_sample=False, pad_token_id=50256, use_cache=True)
        assert out.shape[1] == PROMPT + NEW

    ours.drop_prepacked()
    start = time.perf_counter()
    ours.prepack_for_decoding(batch)
    print(f"one-time prepacking for batch {batch}: {time.perf_counter() - start:.2f} s", flush=True)
    return paired_rows("generate b=%d, %d+%d" % (batch, PROMPT, NEW), batch * NEW, run_ours, run_hf, repeat)


def training_rows(ours, hf, args):
    """One training step a call on each side; on a GPU also the MFU line of each."""
    device = torch.device(args.device)
    ours.to(device).train(), hf.to(device).train()
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, 50257, (args.batch_size, args.length + 1), generator=g).to(device)
    x, y = data[:, :-1], data[:, 1:]
    autocast = autocast_context(device, {"fp32": None, "bf16": torch.bfloat16}[args.precision])
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def engine_step(model, loss_of, compiled):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        scheduler = make_scheduler(optimizer, "constant")
        net = torch.compile(model) if compiled else model

        def step():
            train_step(net, optimizer, scheduler, lambda: (x, y), grad_clip=1.0, autocast=autocast, loss_of=loss_of)
            sync()
        return step

    step_ours = engine_step(ours, lambda model, batch: model(*batch)[1], args.compile in ("bertlab", "both"))
    step_hf = engine_step(hf, lambda model, batch: model(input_ids=batch[0], labels=batch[0]).loss,  # HF shifts
                          args.compile in ("hf", "both"))
    work = f"train b={args.batch_size}x{args.length}, AdamW, {args.precision}" + \
        (f", compiled: {args.compile}" if args.compile != "none" else "")
    rows = paired_rows(work, args.batch_size * args.length, step_ours, step_hf, args.repeat, args.warmup)
    peak = peak_tflops(device, args.precision)
    if peak:
        c = ours.config
        per_token = transformer_flops_per_token(ours, args.length) + 6 * c.n_embd * c.vocab_size
        for row in rows[:2]:
            sec = statistics.median(row.seconds)
            tflops = per_token * row.work / sec / 1e12
            print(f"  {row.implementation}: {sec * 1e3:.1f} ms/step (median), {row.work / sec:,.0f} tokens/s, "
                  f"{tflops:.0f} TFLOP/s, MFU {tflops / peak:.1%} of {peak:g}; "
                  f"peak memory {torch.cuda.max_memory_allocated() / 2**20:,.0f} MB (both sides)", flush=True)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--only", default="gen1,gen8,train")
    p.add_argument("--warmup", type=int, default=1, help="untimed training calls per side first (default 1)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (training only)")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="training's autocast")
    p.add_argument("--compile", choices=["none", "bertlab", "hf", "both"], default="none",
                   help="training: the sides torch.compile wraps")
    p.add_argument("--batch-size", type=int, default=TRAIN_BATCH, help=f"training (default {TRAIN_BATCH})")
    p.add_argument("--length", type=int, default=TRAIN_LEN, help=f"training (default {TRAIN_LEN})")
    args = p.parse_args()
    if args.device != "cpu" and any(job.startswith("gen") for job in args.only.split(",")):
        p.error("--device is for --only train")
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"{torch.get_num_threads()} threads"
    print(f"torch {torch.__version__}, {where}, load {os.getloadavg()}", flush=True)
    ours, hf = models(GPTConfig.preset("gpt2"))
    rows, start = [], time.time()
    for job in args.only.split(","):
        if job.startswith("gen"):
            rows += generation_rows(ours, hf, int(job[3:]), args.repeat)
        elif job == "train":
            rows += training_rows(ours, hf, args)
        print_table(rows)
    for work in dict.fromkeys(r.workload for r in rows):
        ours_row, hf_row = (next(r for r in rows if r.workload == work and r.implementation == name)
                            for name in ("bertlab", "HF GPT2LMHeadModel"))
        for stat in ("best", "median"):
            print(f"speed-up {work} ({stat}): {ours_row.throughput(stat) / hf_row.throughput(stat):.2f}x")
        rounds = round_ratios(ours_row.seconds, hf_row.seconds)
        print(f"speed-up {work} (median of {len(rounds)} rounds' ratios): {statistics.median(rounds):.2f}x "
              f"(rounds: {' '.join(f'{r:.2f}' for r in rounds)})")
    print(f"({time.time() - start:.0f} s, load after {os.getloadavg()})")


if __name__ == "__main__":
    main()
