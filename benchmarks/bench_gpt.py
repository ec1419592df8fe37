"""GPT vs HF GPT2LMHeadModel, same config (GPT-2 124M), random weights, in one process.

    python benchmarks/bench_gpt.py [--repeat 3] [--only gen1,gen8,train]

Generation: a 32-token prompt, 128 new tokens, greedy, both with a key/value cache, batch 1 and 8.
Training: batch 8 x 256 tokens, forward + backward + AdamW step, dropout on (train mode).

Our generation prepacks the weights for the batch size once (GPT.prepack_for_decoding, MKL packed
GEMM); that one-time cost falls in the untimed warm-up call and is printed separately.
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Row, measure, print_table  # noqa: E402

from bertlab.inference.generate import SamplingOptions, generate  # noqa: E402
from bertlab.models import GPT, GPTConfig  # noqa: E402

PROMPT, NEW, TRAIN_BATCH, TRAIN_LEN = 32, 128, 8, 256


def models(config):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    ours = GPT(config)
    hf = GPT2LMHeadModel(GPT2Config(**{k: v for k, v in config.to_dict().items() if k != "architectures"}))
    return ours, hf


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
    work = "generate b=%d, %d+%d" % (batch, PROMPT, NEW)
    return [Row(work, "bertlab", batch * NEW, "tokens/s", measure(run_ours, repeat=repeat)),
            Row(work, "HF GPT2LMHeadModel", batch * NEW, "tokens/s", measure(run_hf, repeat=repeat))]


def training_rows(ours, hf, repeat):
    ours.train(), hf.train()
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, 50257, (TRAIN_BATCH, TRAIN_LEN + 1), generator=g)
    x, y = data[:, :-1], data[:, 1:]
    opt_ours = torch.optim.AdamW(ours.parameters(), lr=1e-4)
    opt_hf = torch.optim.AdamW(hf.parameters(), lr=1e-4)

    def step_ours():
        _, loss = ours(x, y)
        loss.backward()
        opt_ours.step()
        opt_ours.zero_grad(set_to_none=True)

    def step_hf():
        loss = hf(input_ids=x, labels=x).loss  # HF shifts the labels itself
        loss.backward()
        opt_hf.step()
        opt_hf.zero_grad(set_to_none=True)

    work = f"train b={TRAIN_BATCH}x{TRAIN_LEN}, AdamW"
    return [Row(work, "bertlab", TRAIN_BATCH * TRAIN_LEN, "tokens/s", measure(step_ours, repeat=repeat)),
            Row(work, "HF GPT2LMHeadModel", TRAIN_BATCH * TRAIN_LEN, "tokens/s", measure(step_hf, repeat=repeat))]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=3)
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
    print(f"({time.time() - start:.0f} s, load after {os.getloadavg()})")


if __name__ == "__main__":
    main()
