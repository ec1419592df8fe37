"""bertlab unilm-train: fine-tune BERT as a UniLM sequence-to-sequence model on pair files."""
import argparse
import sys

from .args import flags_for

EXAMPLE = """examples:
  bertlab data debian-synopses -o corpus/synopses --max-train 20000 --max-test 500
  bertlab unilm-train --data corpus/synopses --src desc --tgt syn --init-from minilm --out runs/unilm
  bertlab unilm-train --data corpus/synopses --src desc --tgt syn --out runs/scratch \\
      --layers 6 --hidden 384 --heads 12 --intermediate 1536            # from scratch, MiniLM's vocabulary
  bertlab unilm-train --data corpus/synopses --src desc --tgt syn --init-from minilm --out runs/unilm --resume
  bertlab unilm-generate --model runs/unilm/model corpus/synopses/test.desc --beam 4 --ref corpus/synopses/test.syn

Each pair becomes [CLS] source [SEP] target [SEP] under UniLM's sequence-to-sequence mask (the source
sees itself, the target the source and its own past); --target-mask-prob of the target's tokens
(its [SEP] included) become [MASK] and are predicted. Pair files are line-aligned UTF-8: a blank
source or target line is an error naming the file and line.

OUT gets checkpoint.pt (for --resume), metrics.jsonl, curves.png (loss; validation ROUGE-L),
summary.json and model/: an HF BERT folder with its masked-LM head plus unilm.json, which
`bertlab unilm-generate` and load_model read."""


def add_parser(subparsers):
    from .args import add_run_arguments, fraction_below_one, nonnegative_int, positive_fraction, positive_int
    p = subparsers.add_parser(
        "unilm-train", help="fine-tune BERT for generation with UniLM's sequence-to-sequence mask",
        description="UniLM (Dong et al. 2019): fine-tune one BERT to generate a target from a source by "
                    "masking target tokens under the sequence-to-sequence self-attention mask.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(p.add_argument_group("run and optimisation"), defaults=dict(
        batch_size=32, grad_accum=1, lr=5e-5, grad_clip=1.0, max_steps=1000, max_minutes=None, eval_every=500,
        save_every=None, seed=0, device="auto", precision="auto", sharding="ddp", checkpoint_format="file", compile=False, resume=False),
        help={"batch_size": "pairs per micro-batch per process"})
    g = p.add_argument_group("data")
    g.add_argument("--data", metavar="DIR", help="folder with train.SRC/train.TGT (and valid.SRC/valid.TGT)")
    g.add_argument("--src", metavar="EXT", help="source file suffix with --data (e.g. desc)")
    g.add_argument("--tgt", metavar="EXT", help="target file suffix with --data (e.g. syn)")
    for name in ("train-src", "train-tgt", "valid-src", "valid-tgt"):
        g.add_argument(f"--{name}", metavar="FILE", help="line-aligned UTF-8 text (instead of --data)")
    g.add_argument("--max-source-tokens", type=positive_int, default=128,
                   help="[CLS] source [SEP] in WordPiece tokens; longer sources are cut (128)")
    g.add_argument("--max-target-tokens", type=positive_int, default=32,
                   help="target [SEP]; longer targets are cut, and generation stops there (32)")
    g = p.add_argument_group("model (--init-from, or from scratch with the sizes)")
    g.add_argument("--init-from", metavar="MODEL", help="a BERT folder or 'minilm' whose weights start the run")
    g.add_argument("--vocab", default="minilm", metavar="MODEL",
                   help="from scratch: the BERT folder whose tokenizer to use (default minilm's)")
    g.add_argument("--layers", type=positive_int, help="from scratch: num_hidden_layers (6)")
    g.add_argument("--hidden", type=positive_int, help="from scratch: hidden_size (384)")
    g.add_argument("--heads", type=positive_int, help="from scratch: num_attention_heads (12)")
    g.add_argument("--intermediate", type=positive_int, help="from scratch: intermediate_size (1536)")
    g.add_argument("--dropout", type=fraction_below_one, help="from scratch: hidden and attention dropout (0.1)")
    g = p.add_argument_group("optimisation")
    g.add_argument("--warmup", type=nonnegative_int, default=100, help="linear warmup steps (100)")
    g.add_argument("--target-mask-prob", type=positive_fraction, default=0.7,
                   help="share of target tokens masked per pair, at least one (0.7, the paper's)")
    g.add_argument("--rouge-sentences", type=nonnegative_int, default=100,
                   help="validation pairs decoded (greedily) for ROUGE at each evaluation (100; 0: none)")
    g.add_argument("--overwrite", action="store_true", help="start afresh in an OUT that holds a checkpoint")
    g.add_argument("--quiet", action="store_true", help="no progress bar or lines")
    p.set_defaults(run=run)


def data_paths(args) -> tuple:
    """(train_src, train_tgt, valid_src, valid_tgt); valid None when --data has none."""
    import os

    from .translate_train import data_paths as translation_paths
    if args.data and args.src and args.tgt and not os.path.exists(os.path.join(args.data, f"valid.{args.src}")):
        train = translation_paths(args)[:2]
        return (*train, None, None)
    if not args.data and args.train_src and args.train_tgt and not (args.valid_src or args.valid_tgt):
        return args.train_src, args.train_tgt, None, None
    return translation_paths(args)


def model_sizes(args) -> dict | None:
    sizes = {"num_hidden_layers": args.layers, "hidden_size": args.hidden, "num_attention_heads": args.heads,
             "intermediate_size": args.intermediate}
    if args.dropout is not None:
        sizes.update(hidden_dropout_prob=args.dropout, attention_probs_dropout_prob=args.dropout)
    given = {k: v for k, v in sizes.items() if v is not None}
    if args.init_from:
        if given:
            raise ValueError("--init-from takes the model's own sizes; --layers/--hidden/--heads/--intermediate/"
                             "--dropout are for a model from scratch")
        return None
    defaults = {"num_hidden_layers": 6, "hidden_size": 384, "num_attention_heads": 12, "intermediate_size": 1536}
    return {**defaults, **given}


def run(args):
    from ..training.distributed import is_main_process
    from ..unilm.job import report, unilm_train_job
    from ..unilm.objective import UniLMSettings
    paths = dict(zip(("train_src", "train_tgt", "valid_src", "valid_tgt"), data_paths(args)))
    summary = unilm_train_job(**flags_for(unilm_train_job, args, UniLMSettings, **paths, model=model_sizes(args)))
    if is_main_process():
        print(report(summary, args.out), file=sys.stderr)
