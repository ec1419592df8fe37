"""bertlab translate-train: train a Transformer translation model on a parallel corpus."""
import argparse
import os
import sys

from ..models.transformer_config import PRESETS
from .args import flags_for

EXAMPLE = """examples:
  bertlab data gettext -o corpus/en-de --lang de          # DIR/{train,valid,test}.{en,de}
  bertlab translate-train --data corpus/en-de --src en --tgt de --out runs/en-de --joint-vocab --max-minutes 30
  bertlab translate-train --train-src a.en --train-tgt a.zh --valid-src v.en --valid-tgt v.zh --out runs/zh
  bertlab translate-train --data corpus/en-de --src en --tgt de --out runs/en-de --resume   # continue exactly
  torchrun --nproc_per_node 2 -m bertlab translate-train --data corpus/en-de --src en --tgt de --out runs/ddp
  bertlab translate --model runs/en-de/model test.en --ref test.de

OUT gets vocab/ (the learned subword vocabularies), inputs.json (the data files and vocabulary
settings it was made from), checkpoint.pt (for --resume), metrics.jsonl, curves.png (loss, learning
rate), bleu.png, summary.json, and model/ -- config.json, model.safetensors, source_tokenizer/,
target_tokenizer/, translation.json: all `bertlab translate` needs. With --average-last N, model/
holds the mean of the last N saved weights. --resume reuses OUT/vocab and refuses data files or
vocabulary settings other than those the run started with. Under torchrun, process k of N takes
every N-th batch from the k-th: an optimizer step reads N x --grad-accum batches.

The defaults are sized for a CPU: the small preset, 500 steps of 1,024-token batches, peak learning
rate 1e-3 after 100 warmup steps -- about 7 minutes on 2 CPU cores for the shipped 2,926-pair
corpus (data/gettext-gnu-de: 6 min 45 s measured with one thread, valid BLEU 22). --max-minutes
without --max-steps trains until the time is up. The paper's schedule on a GPU: --preset base
--max-tokens 25000 --warmup 4000 --max-steps 100000 --lr 7e-4 (its d_model^-0.5 * warmup^-0.5).
Progress and validations go to stderr (a line every 30 s in a log)."""


def add_parser(subparsers):
    from .args import add_run_arguments, fraction_below_one, nonnegative_int, positive_int
    p = subparsers.add_parser(
        "translate-train", help="train a Transformer (encoder-decoder) translation model",
        description="Train the Transformer of 'Attention Is All You Need' on line-aligned parallel text: "
                    "a subword vocabulary learned from the training data, label-smoothed cross-entropy, "
                    "Adam with warmup and inverse-square-root decay, token-budget batches.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(p.add_argument_group("run and optimisation"), defaults=dict(
        grad_accum=1, lr=1e-3, grad_clip=0.0, max_steps=None, max_minutes=None, eval_every=250, save_every=None,
        seed=0, device="auto", precision="auto", sharding="ddp", checkpoint_format="file", compile=False,
        resume=False),
        help={"grad_clip": "clip the gradient norm (0: off, as the paper)",
              "max_steps": "optimizer steps (500; 100000 with --max-minutes, so that the time decides)",
              "eval_every": "steps between validations",
              "save_every": "steps between checkpoints (default: --eval-every)",
              "resume": "continue from OUT/checkpoint.pt (with the data files and vocabulary settings it started "
                        "with)"})
    g = p.add_argument_group("data")
    g.add_argument("--data", metavar="DIR", help="folder with train.SRC/train.TGT and valid.SRC/valid.TGT")
    g.add_argument("--src", metavar="LANG", help="source language suffix with --data (e.g. en)")
    g.add_argument("--tgt", metavar="LANG", help="target language suffix with --data (e.g. de, zh_CN)")
    for name in ("train-src", "train-tgt", "valid-src", "valid-tgt"):
        g.add_argument(f"--{name}", metavar="FILE", help="line-aligned UTF-8 text (instead of --data)")
    g.add_argument("--max-sentence-tokens", type=positive_int, default=256,
                   help="skip pairs with more subword tokens on either side (256)")
    g = p.add_argument_group("vocabulary")
    g.add_argument("--vocab-size", type=positive_int, default=8000,
                   help="subword vocabulary to learn per side or joint (8000)")
    g.add_argument("--joint-vocab", action="store_true",
                   help="one vocabulary for both languages, its embeddings shared by encoder, decoder and "
                        "output (the paper's en-de setting)")
    g.add_argument("--vocab", metavar="DIR", help="reuse a model folder's (or OUT/vocab's) vocabularies")
    g.add_argument("--min-frequency", type=positive_int, default=2, help="merge only pairs seen this often (2)")
    g = p.add_argument_group("model")
    g.add_argument("--preset", default="small", choices=sorted(PRESETS),
                   help="base (the paper's, 6+6 layers of 512), small (3+3 of 256; default), test")
    g.add_argument("--layers", type=positive_int, help="encoder and decoder layers each")
    for name in ("--d-model", "--heads", "--ffn-dim"):
        g.add_argument(name, type=positive_int)
    g.add_argument("--dropout", type=fraction_below_one, help="P_drop (0.1 in the presets)")
    g.add_argument("--max-positions", type=positive_int, default=512,
                   help="longest sentence the model handles, EOS included (512; at least 3)")
    g = p.add_argument_group("optimisation")
    g.add_argument("--max-tokens", type=positive_int, default=1024,
                   help="padded tokens per micro-batch and side (1024)")
    g.add_argument("--warmup", type=nonnegative_int, default=100, help="linear warmup steps (100)")
    g.add_argument("--schedule", choices=["inverse_sqrt", "linear"], default="inverse_sqrt",
                   help="after warmup: the paper's inverse square root (default) or linear decay to 0")
    g.add_argument("--label-smoothing", type=fraction_below_one, default=0.1, help="epsilon_ls (0.1)")
    g.add_argument("--bleu-sentences", type=nonnegative_int, default=100,
                   help="validation sentences translated (greedily) for BLEU at each validation (100; 0: none)")
    g.add_argument("--average-last", type=nonnegative_int, default=0, metavar="N",
                   help="write the mean of the last N checkpoints' weights as the model (paper: 5)")
    g.add_argument("--overwrite", action="store_true", help="start afresh in an OUT that holds a checkpoint")
    g.add_argument("--quiet", action="store_true", help="no progress bar or lines")
    p.set_defaults(run=run)


def data_paths(args) -> tuple[str, str, str, str]:
    explicit = [args.train_src, args.train_tgt, args.valid_src, args.valid_tgt]
    if args.data:
        if any(explicit):
            raise ValueError("give either --data DIR --src --tgt or the four --train-*/--valid-* files, not both")
        if not (args.src and args.tgt):
            raise ValueError("--data needs --src LANG and --tgt LANG (the files' suffixes)")
        return tuple(os.path.join(args.data, f"{split}.{lang}") for split in ("train", "valid")
                     for lang in (args.src, args.tgt))
    if not all(explicit):
        raise ValueError("give --data DIR --src LANG --tgt LANG, or all of --train-src, --train-tgt, "
                         "--valid-src and --valid-tgt")
    return tuple(explicit)


def run(args):
    from ..training.distributed import is_main_process
    from ..translation.job import translate_train_job
    from ..translation.objective import TranslationSettings, report
    sizes = {"layers": args.layers, "d_model": args.d_model, "heads": args.heads, "ffn_dim": args.ffn_dim,
             "dropout": args.dropout}
    paths = dict(zip(("train_src", "train_tgt", "valid_src", "valid_tgt"), data_paths(args)))
    summary = translate_train_job(**flags_for(
        translate_train_job, args, TranslationSettings, **paths, model=sizes, source_lang=args.src,
        target_lang=args.tgt, max_steps=args.max_steps or (100_000 if args.max_minutes else 500)))
    if is_main_process():
        print(report(summary, args.out), file=sys.stderr)
