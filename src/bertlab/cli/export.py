"""bertlab export: a model folder as ONNX graphs for onnxruntime, checked against bertlab."""
import argparse

EXAMPLE = """examples:
  bertlab export minilm --onnx minilm.onnx                   # a BERT encoder (sequence and pooled output)
  bertlab export ModernBERT-base --onnx mb.onnx              # an HF ModernBERT folder: its encoder (no
                                                             # token_type_ids input, no pooled output)
  bertlab export runs/cls/model --onnx cls.onnx              # a `bertlab finetune` folder: its head's logits
  bertlab export runs/tiny/model --onnx gpt.onnx             # GPT with past keys/values
  bertlab export runs/en-de/model --onnx en-de.onnx          # translation: encoder + one decoder step
  bertlab export minilm --onnx minilm.onnx --texts lines.txt # check on your own text
  bertlab export runs/bert --hf bert-step-40000               # a pretrain/gpt-train run's last checkpoint
                                                             # as an HF folder, while it trains on

OUT is a folder: model.onnx (translation: encoder.onnx and decoder_step.onnx) and onnx.json (kind,
source folder, config, input and output names). Batch and sequence lengths are dynamic. Before OUT
is written, onnxruntime runs the export on real text of varied length and every output is compared
with bertlab's (the max abs difference is printed); GPT greedy tokens and translation greedy and
beam-4 outputs must be identical. Beyond --tolerance it is an error and nothing is written.
Needs the optional packages: pip install 'bertlab[export]'."""


def add_parser(subparsers):
    from .args import nonnegative_float
    p = subparsers.add_parser(
        "export", help="export a model folder to ONNX (checked with onnxruntime)",
        description="Export DIR (a BERT, ModernBERT, fine-tuned, GPT or translation model folder) to ONNX graphs in OUT "
                    "and check them with onnxruntime against bertlab.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="DIR", help="a model folder any bertlab command reads, or 'minilm'; with --hf, "
                                                "a run folder (pretrain or gpt-train) holding a checkpoint")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--onnx", metavar="OUT", help="the folder to write")
    to.add_argument("--hf", metavar="OUT",
                    help="write the HF-format model folder a pretrain or gpt-train run writes at its end, now, from "
                         "its last checkpoint (one file or --checkpoint-format sharded, of any process count)")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it exists (refused otherwise)")
    p.add_argument("--texts", dest="texts_file", metavar="FILE",  # export_onnx's `texts` is a list of lines
                   help="UTF-8 lines to check on (default: eight man-page sentences)")
    p.add_argument("--tolerance", type=nonnegative_float, default=1e-4,
                   help="largest allowed |onnxruntime - bertlab| of any output (1e-4)")
    p.add_argument("--no-check", action="store_true", help="skip the onnxruntime check")
    p.add_argument("--int8", action="store_true",
                   help="after the fp32 check, quantise the graphs' weights to int8 (onnxruntime's dynamic "
                        "quantisation) and print how far they are from bertlab fp32")
    p.set_defaults(run=run)


def run(args):
    import sys

    from .args import flags_for
    if args.hf:
        from ..api import export_checkpoint
        # `run` (the run folder) is given: args.run is this function, set by set_defaults
        export_checkpoint(**flags_for(export_checkpoint, args, run=args.model, out=args.hf))
        print(f"wrote {args.hf}", file=sys.stderr)
        return 0
    from ..inference.onnx_export import export_onnx
    export_onnx(**flags_for(export_onnx, args, folder=args.model, out=args.onnx, check=not args.no_check,
                            log=lambda m: print(m, file=sys.stderr)))
    print(f"wrote {args.onnx}", file=sys.stderr)
    return 0
