"""bertlab convert: a google-research/bert TensorFlow checkpoint folder as an HF-format folder."""
from ..finetune.glue import GLUE
from .args import add_out_argument, flags_for


def add_parser(subparsers):
    p = subparsers.add_parser(
        "convert", help="write a google-research/bert TensorFlow checkpoint as an HF-format folder",
        description="Read a google-research/bert folder (bert_config.json, vocab.txt, bert_model.ckpt.index and "
                    ".data-* files; no TensorFlow needed) and write OUT_DIR with config.json, model.safetensors, "
                    "vocab.txt and tokenizer_config.json, which HF transformers and every bertlab --model load. "
                    "The checkpoint's heads decide the model: run_pretraining's give BertForPreTraining, "
                    "run_classifier's output layer BertForSequenceClassification, none the bare BertModel. "
                    "Optimizer state (adam_m, adam_v, global_step) is left out. Casing, which google's folders "
                    "do not record, follows google's naming unless --cased/--uncased says: a folder name "
                    "with 'cased' and not 'uncased' is cased, any other uncased.")
    p.add_argument("source", metavar="GOOGLE_DIR",
                   help="the folder, or one checkpoint in it by its prefix (DIR/model.ckpt-1000; the folder's "
                        "bert_model.ckpt, else the one its `checkpoint` file names, by default)")
    add_out_argument(p, "the HF-format folder to write", metavar="OUT_DIR")
    casing = p.add_mutually_exclusive_group()
    casing.add_argument("--uncased", dest="do_lower_case", action="store_true", default=None,
                        help="the model was trained on lower-cased, accent-stripped text")
    casing.add_argument("--cased", dest="do_lower_case", action="store_false", help="the model was trained cased")
    labels = p.add_mutually_exclusive_group()
    labels.add_argument("--task", choices=sorted(GLUE), metavar="NAME",
                        help="a run_classifier checkpoint fine-tuned on this GLUE task (labels in the order of "
                             "google's processors: mnli contradiction, entailment, neutral; mrpc, cola 0, 1): "
                             "also writes task.json, so that `bertlab predict` reads the task's files; one of "
                             + ", ".join(sorted(GLUE)))
    labels.add_argument("--labels", metavar="A,B,...",
                        help="a run_classifier checkpoint's label names, in the order of its output rows")
    p.add_argument("--overwrite", action="store_true", help="replace a model already in OUT_DIR")
    p.set_defaults(run=run)


def run(args):
    from ..interop.convert import convert_folder
    labels = [label.strip() for label in args.labels.split(",")] if args.labels else None
    task_state = None
    if args.task:
        from ..finetune.tasks import make_task
        task_state = make_task(args.task).state()
    model = convert_folder(**flags_for(convert_folder, args, task_state=task_state, labels=labels))
    print(f"wrote {type(model).__name__} ({sum(p.numel() for p in model.parameters()):,} parameters) to {args.out}")
