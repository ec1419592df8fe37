"""GPT vs HF GPT2LMHeadModel, same config (GPT-2 124M), random weights, in one process.

    python benchmarks/bench_gpt.py [--repeat 5] [--only gen1,gen8,train]

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
from harness import Row, print_table  # noqa: E402

from bertlab.inference.generate import SamplingOptions, generate  # noqa: E402
from bertlab.models import GPT, GPTConfig  # noqa: E402
from bertlab.training.engine import train_step  # noqa: E402
from bertlab.training.schedules import make_scheduler  # noqa: E402

PROMPT, NEW, TRAIN_BATCH, TRAIN_LEN = 32, 128, 8, 256


def models(config):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    ours = GPT(config)
    hf = GPT2LMHeadModel(GPT2Config(**{k: v for k, v in config.to_dict().items() if k != "architectures"}))
    return ours, hf


def alternating(ours, theirs, repeat):
    """Wall and CPU seconds of `repeat` calls of each, after one untimed call each; the order
    alternates by round. CPU seconds (both threads) count the work done, not the time a thread
    waited for a core on a machine shared with other jobs."""
    ours(), theirs()
    wall, cpu = {ours: [], theirs: []}, {ours: [], theirs: []}
    for i in range(repeat):
        for fn in (ours, theirs) if i % 2 == 0 else (theirs, ours):
            start, cpu_start = time.perf_counter(), time.process_time()
            fn()
            wall[fn].append(time.perf_counter() - start)
            cpu[fn].append(time.process_time() - cpu_start)
    return (wall[ours], cpu[ours]), (wall[theirs], cpu[theirs])


def paired_rows(work, units, ours, theirs, repeat):
    """Rows of wall seconds, and rows of CPU seconds (workload suffixed "per CPU-second")."""
    (ours_s, ours_cpu), (hf_s, hf_cpu) = alternating(ours, theirs, repeat)
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


def training_rows(ours, hf, repeat):
    ours.train(), hf.train()
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, 50257, (TRAIN_BATCH, TRAIN_LEN + 1), generator=g)
    x, y = data[:, :-1], data[:, 1:]

    def engine_step(model, loss_of):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        scheduler = make_scheduler(optimizer, "constant")
        return lambda: train_step(model, optimizer, scheduler, lambda: (x, y), grad_clip=1.0, loss_of=loss_of)

    step_ours = engine_step(ours, lambda model, batch: model(*batch)[1])
    step_hf = engine_step(hf, lambda model, batch: model(input_ids=batch[0], labels=batch[0]).loss)  # HF shifts
    return paired_rows(f"train b={TRAIN_BATCH}x{TRAIN_LEN}, AdamW", TRAIN_BATCH * TRAIN_LEN, step_ours, step_hf, repeat)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--only", default="gen1,gen8,train")
    args = p.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load {os.getloadavg()}", flush=True)
    ours, hf = models(GPTConfig.preset("gpt2"))
    rows, start = [], time.time()
    for job in args.only.split(","):
        if job.startswith("gen"):
            rows += generation_rows(ours, hf, int(job[3:]), args.repeat)
        elif job == "train":
            rows += training_rows(ours, hf, args.repeat)
        print_table(rows)
    for work in dict.fromkeys(r.workload for r in rows):
        ours_row, hf_row = (next(r for r in rows if r.workload == work and r.implementation == name)
                            for name in ("bertlab", "HF GPT2LMHeadModel"))
        for stat in ("best", "median"):
            print(f"speed-up {work} ({stat}): {ours_row.throughput(stat) / hf_row.throughput(stat):.2f}x")
        rounds = [theirs / mine for mine, theirs in zip(ours_row.seconds, hf_row.seconds)]
        print(f"speed-up {work} (median of {len(rounds)} rounds' ratios): {statistics.median(rounds):.2f}x "
              f"(rounds: {' '.join(f'{r:.2f}' for r in rounds)})")
    print(f"({time.time() - start:.0f} s, load after {os.getloadavg()})")


if __name__ == "__main__":
    main()
