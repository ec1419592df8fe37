"""bertlab pretrain: masked-LM + next-sentence pretraining of BERT (or ELECTRA's replaced-token
detection, --objective electra) on create-pretraining-data shards."""
import argparse
import sys

from ..models.albert_config import ALBERT_PRESETS
from ..models.modernbert_config import MODERNBERT_PRESETS
from ..pretraining.recipes import RECIPES
from .args import (
    add_run_arguments,
    flags_for,
    fraction_below_one,
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_fraction,
    positive_int,
)

EXAMPLE = """examples:
  bertlab pretrain --data shards128 --eval-data heldout128 --out runs/small --preset small --max-minutes 60
  bertlab pretrain --data shards128 --data-512 shards512 --phase2-fraction 0.1 --out runs/two-phase
  torchrun --nproc_per_node 2 -m bertlab pretrain --data shards128 --out runs/ddp   # data parallel
  bertlab pretrain --data shards128 --out runs/small --resume      # continue exactly where it stopped
  bertlab pretrain --data albert_shards --out runs/albert --recipe albert   # ALBERT-base, SOP, LAMB
  bertlab pretrain --data albert_shards --out runs/albert --config albert_config.json   # any ALBERT size
  bertlab pretrain --recipe modernbert --data mb128 --data-512 mb512 --out runs/modernbert   # ModernBERT-small
  bertlab pretrain --objective electra --data shards128 --eval-data heldout128 --out runs/electra --preset small
  bertlab pretrain --data shards64 --out runs/nezha --preset tiny --position-embedding-type nezha

OUT gets checkpoint.pt (for --resume), metrics.jsonl, curves.png, summary.json and model/ (HF
format: config.json with architectures BertForPreTraining (AlbertForPreTraining), model.safetensors, vocab.txt,
tokenizer_config.json), which `bertlab finetune --model OUT/model` starts from. With --objective
electra, OUT/model is the ELECTRA discriminator (ElectraForPreTraining; fine-tune it the same way)
and OUT/generator the generator (ElectraForMaskedLM); see docs/models/electra.md."""


def add_parser(subparsers):
    p = subparsers.add_parser(
        "pretrain", help="pretrain BERT (masked LM + next sentence) on create-pretraining-data shards",
        description="Pretrain BertForPreTraining as run_pretraining.py does: masked-LM loss at the masked "
                    "positions plus next-sentence loss (masked LM only for data made without NSP), "
                    "linear warmup then linear decay. With --data-512 the last --phase2-fraction of the "
                    "steps read the 512-token instances (the BERT paper's two phases).",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(p.add_argument_group("run and optimisation"), defaults=dict(
        batch_size=32, grad_accum=1, lr=1e-4, grad_clip=1.0, max_steps=1000, max_minutes=None, eval_every=500,
        save_every=500, seed=0, device="auto", precision="auto", sharding="ddp", checkpoint_format="file", compile=False,
        resume=False),
        help={"batch_size": "instances per micro-batch per process"})
    g = p.add_argument_group("data")
    g.add_argument("--data", required=True, metavar="DIR", help="shard folder of the main phase (e.g. 128 tokens)")
    g.add_argument("--data-512", metavar="DIR", help="shard folder of the last phase (512 tokens)")
    g.add_argument("--phase2-fraction", metavar="F", type=fraction_below_one, default=0.1,
                   help="share of --max-steps read from --data-512, in [0, 1) (default 0.1)")
    g.add_argument("--eval-data", metavar="DIR", help="shard folder built from held-out documents")
    g = p.add_argument_group("model (one of)")
    m = g.add_mutually_exclusive_group()
    m.add_argument("--preset", choices=["tiny", "small", "base", *ALBERT_PRESETS, *MODERNBERT_PRESETS],
                   help="tiny (L2 H128), small (L4 H256 A4 I1024; the default) or base (L12 H768); ALBERT: "
                        "albert-base / -large / -xlarge / -xxlarge (E128, one shared layer; 12M/18M/59M/223M "
                        "parameters at vocabulary 30000); ModernBERT: modernbert-tiny (L3 H128) or "
                        "modernbert-small (L6 H256 A4, GeGLU 384: BERT-small's parameter count); the "
                        "vocabulary size comes from the data")
    m.add_argument("--config", metavar="FILE", help="a BERT config.json / bert_config.json, or an ALBERT or "
                   "ModernBERT config.json (model_type \"albert\", \"modernbert\")")
    m.add_argument("--init-from", metavar="MODEL_DIR",
                   help="continue pretraining an HF-format BERT, ALBERT or ModernBERT folder")
    g.add_argument("--recipe", choices=RECIPES,
                   help="check the data was made with `create-pretraining-data --recipe` of the same name and "
                        "set the recipe's training flags: albert = --preset albert-base (unless a model is given) "
                        "--optimizer lamb; modernbert = --preset modernbert-small (unless a model is given) "
                        "--phase2-rope-theta 160000; roberta and bert set none (docs/models/albert.md, "
                        "docs/models/modernbert.md)")
    g.add_argument("--phase2-rope-theta", metavar="BASE", type=positive_float,
                   help="ModernBERT: the rotary base of the global layers from the --data-512 phase on (its "
                        "long-context phase; ModernBERT's 160000, from 10000 before); the model folder says it")
    g.add_argument("--position-embedding-type", choices=["absolute", "relative_key", "relative_key_query", "nezha"],
                   help="positions: absolute (BERT's learned table), relative_key / relative_key_query (learned "
                        "distances in attention, HF's), nezha (fixed sinusoids of clipped distances, any length); "
                        "default: the preset's absolute or the --config's")
    g.add_argument("--span-boundary", action="store_true",
                   help="add SpanBERT's span-boundary objective: each masked piece predicted again from its span's "
                        "two boundary outputs and its position in the span (data made with --masking span)")
    g = p.add_argument_group("objective")
    g.add_argument("--objective", choices=["bert", "electra", "unilm"], default="bert",
                   help="bert: masked LM (+ next sentence; the default); electra: a small generator fills the masked "
                        "positions and the model (the discriminator) learns which tokens were replaced, at every "
                        "position (Clark et al. 2020); unilm: masked LM under the bidirectional, left-to-right and "
                        "seq2seq attention masks, a third of the micro-batches each, no next-sentence loss "
                        "(Dong et al. 2019)")
    g.add_argument("--embedding-size", metavar="E", type=positive_int,
                   help="electra: width of the shared embedding tables, projected up to the hidden size "
                        "(default half the --preset's width, as ELECTRA-Small's 128 of 256)")
    g.add_argument("--generator-size", metavar="F", type=positive_fraction,
                   help="electra: the generator's width (hidden, heads, feed-forward) as a share of the "
                        "discriminator's (default 0.25, ELECTRA-Small's; the paper finds 1/4 to 1/2 best)")
    g.add_argument("--disc-weight", metavar="W", type=nonnegative_float,
                   help="electra: the weight of the discriminator's loss against the generator's MLM loss (default 50)")
    g = p.add_argument_group("optimisation")
    g.add_argument("--optimizer", choices=["adamw", "lamb"], default=None,
                   help="adamw (BERT's: weight decay 0.01 except LayerNorm/bias, eps 1e-6; default) or lamb")
    g.add_argument("--warmup", metavar="N", type=nonnegative_int,
                   help="linear warmup steps (default 1%% of --max-steps, as BERT's 10k of 1M)")
    g.add_argument("--weight-decay", metavar="W", type=nonnegative_float, default=0.01,
                   help="(0.01; never LayerNorm or biases)")
    g.add_argument("--phase2-batch-size", metavar="N", type=positive_int,
                   help="the same for --data-512 (default --batch-size)")
    g = p.add_argument_group("run")
    g.add_argument("--eval-instances", metavar="N", type=positive_int, help="held-out instances per evaluation (default all)")
    g.add_argument("--overwrite", action="store_true",
                   help="start afresh in an OUT that holds a checkpoint (its checkpoint and log are replaced)")
    g.add_argument("--quiet", action="store_true", help="no progress bar or evaluation lines (the summary still)")
    p.set_defaults(run=run)


def run(args):
    from ..pretraining.electra import ElectraSettings
    from ..pretraining.electra import report as electra_report
    from ..pretraining.job import pretrain_job, recipe_settings
    from ..pretraining.objective import report
    from ..training.distributed import is_main_process
    chosen = recipe_settings(**flags_for(recipe_settings, args, model_given=bool(args.config or args.init_from)))
    warmup = args.warmup if args.warmup is not None else max(1, round(0.01 * args.max_steps))
    summary = pretrain_job(**flags_for(pretrain_job, args, ElectraSettings, preset=chosen["preset"],
                                       optimizer=chosen["optimizer"], warmup=warmup,
                                       phase2_rope_theta=chosen["phase2_rope_theta"]))
    if is_main_process():
        print((electra_report if args.objective == "electra" else report)(summary, args.out), file=sys.stderr)
