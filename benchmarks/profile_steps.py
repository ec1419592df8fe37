"""Where a training step's time goes: torch.profiler over a few steps, the top operators and kernels.

    python benchmarks/profile_steps.py --data DIR [--device cuda] [--precision bf16] [--compile]
                                       [--only sdpa,base,small,gpt] [--top 25]

base / small: bench_pretrain.py's BERT pretraining step (BERT-base at batch 256, BERT-small at 1024
on a GPU; 8 and 32 on a CPU), over DIR, a create-pretraining-data folder of 128-token instances.
gpt: GPT-2 124M, the engine's train_step (clip 1.0, fused AdamW) on random tokens, 16 x 1024 on a
GPU, 4 x 256 on a CPU. sdpa (GPU only): PyTorch's attention kernels at BERT-base's and BERT-small's
shapes, forward + backward with dropout 0.1, by backend. --compile compiles as the engine's
--compile does (the whole loss). Each profile follows 4 warm-up steps and covers 3; then 10 steps
are timed by the wall clock. On a GPU the table lists device time by kernel, so its total is the
GPU's busy time a step: the wall time over it says how much of the step the GPU waited.
Used on an H100 to find the eager cross-entropy that the engine's --compile now compiles
(docs/guide/pretraining.md).
"""
import argparse
import os
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def report(name, step, device, top):
    cuda = device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for _ in range(4):
        step()
    sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(3):
            step()
        sync()
    events = prof.key_averages()
    if cuda:  # kernels only: aten operators would count their kernels' time twice
        rows = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
        cost = lambda e: e.self_device_time_total  # noqa: E731
    else:
        rows, cost = list(events), (lambda e: e.self_cpu_time_total)
    rows.sort(key=lambda e: -cost(e))
    busy = sum(cost(e) for e in rows) / 3 / 1e3
    print(f"== {name}: {'GPU busy' if cuda else 'CPU, operators self time'} {busy:.2f} ms a step")
    for e in rows[:top]:
        print(f"  {cost(e) / 3 / 1e3:8.3f} ms {cost(e) / 3 / 1e3 / busy:6.1%}  x{e.count // 3:<5} {e.key[:100]}")
    start = time.perf_counter()
    for _ in range(10):
        step()
    sync()
    print(f"  wall {(time.perf_counter() - start) / 10 * 1e3:.2f} ms a step", flush=True)


def bert_step(config, batch, args):
    from bench_pretrain import batches, build_side
    data = [{k: v.to(args.device) for k, v in b.items()} for b in batches(args.data, batch, 4)]
    model, optimizer, loss_of = build_side("bertlab", config, "fused", args.device, compiled=args.compile)
    model.train()
    autocast = torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.precision == "bf16")
    count = [0]

    def step():
        with autocast:
            loss = loss_of(data[count[0] % len(data)])
        count[0] += 1
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def gpt_step(args):
    from bertlab.models import GPT, GPTConfig
    from bertlab.training.engine import autocast_context, train_step
    from bertlab.training.schedules import make_scheduler
    torch.manual_seed(0)
    model = GPT(GPTConfig.preset("gpt2")).to(args.device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    scheduler = make_scheduler(optimizer, "constant")
    net = torch.compile(model) if args.compile else model
    batch, length = (16, 1024) if args.device == "cuda" else (4, 256)
    tokens = torch.randint(0, 50257, (batch, length + 1), device=args.device)
    autocast = autocast_context(torch.device(args.device), torch.bfloat16 if args.precision == "bf16" else None)
    return lambda: train_step(net, optimizer, scheduler, lambda: (tokens[:, :-1], tokens[:, 1:]), grad_clip=1.0,
                              autocast=autocast)


def sdpa_kernels():
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for batch, heads in ((256, 12), (1024, 4)):
        q, k, v = (torch.randn(batch, heads, 128, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        mask = torch.ones(batch, 1, 1, 128, dtype=torch.bool, device="cuda")
        mask[::3, ..., 100:] = False
        grad = torch.randn_like(q)
        for name, backend, m in (("flash, no mask", SDPBackend.FLASH_ATTENTION, None),
                                 ("efficient, mask", SDPBackend.EFFICIENT_ATTENTION, mask),
                                 ("cudnn, mask", SDPBackend.CUDNN_ATTENTION, mask),
                                 ("math, mask", SDPBackend.MATH, mask), ("PyTorch's choice, mask", None, mask)):
            def run():
                if backend is None:
                    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, dropout_p=0.1)
                else:
                    with sdpa_kernel(backend):
                        out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, dropout_p=0.1)
                out.backward(grad)
            try:
                for _ in range(3):
                    run()
                torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(20):
                    run()
                torch.cuda.synchronize()
                print(f"attention {batch}x{heads}x128x64, {name}: "
                      f"{(time.perf_counter() - start) / 20 * 1e3:.3f} ms forward + backward", flush=True)
            except RuntimeError as e:  # a backend that does not take these inputs
                print(f"attention {batch}x{heads}x128x64, {name}: not available ({str(e)[:100]})")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", help="a create-pretraining-data folder (128-token instances) for base and small")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="bf16" if torch.cuda.is_available() else "fp32")
    p.add_argument("--compile", action="store_true", help="torch.compile the loss (BERT) or the model (GPT)")
    p.add_argument("--only", default="base,small,gpt")
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    jobs = args.only.split(",")
    if {"base", "small"} & set(jobs) and not args.data:
        p.error("base and small need --data DIR (bertlab create-pretraining-data, --max-seq-length 128)")
    if "sdpa" in jobs and args.device != "cuda":
        p.error("sdpa compares GPU kernels: --device cuda")
    cuda = args.device == "cuda"
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name() if cuda else 'CPU'}, {args.precision}, "
          f"compile: {args.compile}", flush=True)
    for job in jobs:
        if job == "sdpa":
            sdpa_kernels()
        elif job in ("base", "small"):
            batch = {"base": 256, "small": 1024}[job] if cuda else {"base": 8, "small": 32}[job]
            report(f"BERT-{job} pretraining, batch {batch} x 128", bert_step(job, batch, args), args.device, args.top)
        elif job == "gpt":
            report("GPT-2 124M training", gpt_step(args), args.device, args.top)
        else:
            p.error(f"unknown job {job!r}: sdpa, base, small or gpt")


if __name__ == "__main__":
    main()
