"""On a CUDA machine: compiled bf16 training steps as they are, against variants that were tried for
issue 14's MFU goals, in one process, one after the other (docs/guide/pretraining.md, docs/models/gpt.md).

    python benchmarks/gpu_variants.py --data DIR [--only base,small,gpt] [--variants A,B,C]
                                      [--peer base,gpt] [--profile A]

DIR: a create-pretraining-data folder of 128-token instances. Workloads: BERT-base pretraining at
batch 256 x 128 and BERT-small (L4 H256) at 1024 x 128, bench_pretrain.py's step (forward, loss,
backward, fused AdamW); GPT-2 124M at 16 x 1024, the engine's train_step (clip 1.0, fused AdamW).
All compiled as the engine's --compile compiles them, under bf16 autocast.

Variants (each patches the library for its run only; none of them is the library's behaviour):
  A  the code as it is
  B  LayerNorm returns the autocast dtype instead of fp32, so the residual stream is bf16
     (Megatron-LM's default; autocast keeps it fp32, as HF and nanoGPT do)
  C  B, and the vocabulary-wide products (MLM decoder, GPT's output layer) padded to a multiple of
     64 rows, sliced back before the loss (30,522 and 50,257 are not multiples of 8)
  D  C under CUDA graphs (torch.compile mode="reduce-overhead")
  E  C with attention as the plain formula (softmax, mask and dropout left to Inductor to fuse)
     instead of PyTorch's fused kernel (cuDNN's for a padding mask)
  G  C with Inductor's coordinate-descent tuning of its generated kernels
--peer times HF's model (eager, HF Trainer's default) on the same workload first. Each row is the
median of 12 steps, each ended by torch.cuda.synchronize(), after 4 warm-up steps (the first
compiles); "unsynced" is the mean of 12 steps with one synchronize at the end. MFU counts the
FLOPs of bench_pretrain.step_flops and bench_gpt over bertlab.device.peak_tflops.
"""
import argparse
import os
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_pretrain import batches, build_side, hf_labels, step_flops  # noqa: E402

import bertlab.core.fast_paths as fast_paths  # noqa: E402
from bertlab.device import peak_tflops  # noqa: E402
from bertlab.models import GPT, GPTConfig  # noqa: E402
from bertlab.models.bert import MaskedLMHead  # noqa: E402
from bertlab.models.losses import pretraining_loss  # noqa: E402
from bertlab.training.engine import autocast_context, train_step  # noqa: E402
from bertlab.training.flops import transformer_flops_per_token  # noqa: E402
from bertlab.training.schedules import make_scheduler  # noqa: E402

attention_module = sys.modules["bertlab.core.attention"]  # bertlab.core.attention is also a function's name
PLAIN = {"layer_norm": nn.LayerNorm.forward, "mlm": MaskedLMHead.forward,
         "lce": fast_paths.linear_cross_entropy, "sdpa": attention_module.scaled_dot_product_attention}


def layer_norm_in_autocast_dtype(self, x):
    y = PLAIN["layer_norm"](self, x)
    return y.to(torch.get_autocast_dtype(x.device.type)) if torch.is_autocast_enabled(x.device.type) else y


def padded_linear(x, weight, bias=None, multiple=64):
    pad = (-weight.size(0)) % multiple
    out = F.linear(x, F.pad(weight, (0, 0, 0, pad)), None if bias is None else F.pad(bias, (0, pad)))
    return out[..., :weight.size(0)]


def mlm_head_padded(self, sequence_output, positions=None):
    if positions is not None:
        sequence_output = sequence_output.gather(1, positions[..., None].expand(-1, -1, sequence_output.size(-1)))
    return padded_linear(self.norm(self.act(self.dense(sequence_output))), self.embedding_table, self.bias)


def output_layer_padded(x, weight, targets, ignore_index=-100):
    return F.cross_entropy(padded_linear(x, weight), targets, ignore_index=ignore_index)


def plain_formula(q, k, v, mask=None, dropout_p=0.0, need_weights=False, relative=None):
    if mask is attention_module.CAUSAL:
        return PLAIN["sdpa"](q, k, v, mask, dropout_p, need_weights, relative)
    out, weights = attention_module.attention(q, k, v, mask, dropout_p, relative)
    return out, weights if need_weights else None


def use(variant: str):
    """Patch the library for `variant` (A restores it) and forget compiled graphs."""
    nn.LayerNorm.forward = layer_norm_in_autocast_dtype if variant != "A" else PLAIN["layer_norm"]
    MaskedLMHead.forward = mlm_head_padded if variant not in "AB" else PLAIN["mlm"]
    fast_paths.linear_cross_entropy = output_layer_padded if variant not in "AB" else PLAIN["lce"]
    attention_module.scaled_dot_product_attention = plain_formula if variant == "E" else PLAIN["sdpa"]
    torch._inductor.config.coordinate_descent_tuning = variant == "G"
    torch._dynamo.reset()


def bert_step(config: str, batch: int, data_dir: str, variant: str, peer: bool):
    data = batches(data_dir, batch, 6)
    if peer:
        for b in data:
            b["labels"] = hf_labels(b)
    data = [{k: v.cuda() for k, v in b.items()} for b in data]
    model, optimizer, loss_of = build_side("hf" if peer else "bertlab", config, "fused", "cuda", compiled=not peer)
    if variant == "D":
        loss_of = torch.compile(lambda b: pretraining_loss(model, b)[0], mode="reduce-overhead")
    model.train()
    count = [0]

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_of(data[count[0] % len(data)])
        count[0] += 1
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step, step_flops(config, batch)


def gpt_step(variant: str, peer: bool):
    torch.manual_seed(0)
    config = GPTConfig.preset("gpt2")
    if peer:
        from transformers import GPT2Config, GPT2LMHeadModel
        model = GPT2LMHeadModel(GPT2Config(**{k: v for k, v in config.to_dict().items() if k != "architectures"}))
        loss_of = lambda m, b: m(input_ids=b[0], labels=b[0]).loss  # noqa: E731  (HF shifts the labels)
    else:
        model = GPT(config)
        loss_of = lambda m, b: m(*b)[1]  # noqa: E731
    per_token = transformer_flops_per_token(model if not peer else GPT(config), 1024) + 6 * config.n_embd * config.vocab_size
    model = model.cuda().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    scheduler = make_scheduler(optimizer, "constant")
    net = model if peer else torch.compile(model, mode="reduce-overhead" if variant == "D" else None)
    tokens = torch.randint(0, config.vocab_size, (16, 1025), device="cuda")
    autocast = autocast_context(torch.device("cuda"), torch.bfloat16)
    return (lambda: train_step(net, optimizer, scheduler, lambda: (tokens[:, :-1], tokens[:, 1:]), grad_clip=1.0,
                               autocast=autocast, loss_of=loss_of)), per_token * 16 * 1024


def timed(step, steps=12, warmup=4):
    """(median seconds of synchronised steps, mean seconds of steps synchronised once at the end)."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return statistics.median(times), (time.perf_counter() - start) / steps


def profile(step, top=18):
    """The kernels of two steps by device time, and their sum (the GPU's busy time a step)."""
    from torch.profiler import ProfilerActivity
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(2):
            step()
        torch.cuda.synchronize()
    rows = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    rows.sort(key=lambda e: -e.self_device_time_total)
    busy = sum(e.self_device_time_total for e in rows) / 2 / 1e3
    print(f"    GPU busy {busy:.2f} ms a step")
    for e in rows[:top]:
        ms = e.self_device_time_total / 2 / 1e3
        print(f"    {ms:7.3f} ms {ms / busy:6.1%} x{e.count // 2:<4} {e.key[:110]}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", help="a create-pretraining-data folder (128-token instances); needed for base, small")
    p.add_argument("--only", default="base,small,gpt")
    p.add_argument("--variants", default="A,B,C")
    p.add_argument("--peer", default="base,gpt", help="workloads whose HF model is timed too (eager)")
    p.add_argument("--profile", default="A", help="variants whose kernels are listed")
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_variants.py needs a CUDA device")
    jobs = args.only.split(",")
    if {"base", "small"} & set(jobs) and not args.data:
        p.error("base and small need --data DIR")
    peak = peak_tflops(torch.device("cuda"), "bf16")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, peak {peak} TFLOP/s bf16", flush=True)
    for job in jobs:
        make = {"base": lambda v, peer: bert_step("base", 256, args.data, v, peer),
                "small": lambda v, peer: bert_step("small", 1024, args.data, v, peer),
                "gpt": gpt_step}[job]
        runs = ([("HF eager", "A", True)] if job in args.peer.split(",") else []) + \
            [(v, v, False) for v in args.variants.split(",")]
        for name, variant, peer in runs:
            use(variant)
            try:
                start = time.perf_counter()
                step, flops = make(variant, peer)
                step()
                torch.cuda.synchronize()
                first = time.perf_counter() - start
                synced, unsynced = timed(step)
                print(f"{job} {name}: {synced * 1e3:.2f} ms a step (unsynced {unsynced * 1e3:.2f}), "
                      f"MFU {flops / synced / 1e12 / peak:.1%}, first step {first:.0f} s, "
                      f"peak memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB", flush=True)
                if not peer and variant in args.profile.split(","):
                    profile(step)
                del step
            except Exception:  # a variant that fails says so and the others still run
                traceback.print_exc()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
    use("A")


if __name__ == "__main__":
    main()
