"""`bertlab unilm-train` as a function a notebook can call: the pair files checked, the run folder
claimed, the model started from a BERT folder (or from scratch at the sizes given) and fine-tuned
with objective.UniLMFineTuning; report words the summary."""
import os

from .. import progress
from ..models import BertConfig
from .objective import PairIds, UniLMSettings, train_unilm


def unilm_train_job(train_src, train_tgt, valid_src, valid_tgt, out, *, init_from=None, vocab="minilm",
                    model=None, resume=False, overwrite=False, **settings) -> dict:
    """Fine-tune UniLM on line-aligned pair files (valid_* may be None) into the run folder `out`.

    The model: `init_from`'s weights and config (a BERT folder or a packaged name such as "minilm"),
    or from scratch with `vocab`'s tokenizer (a BERT folder or name) and `model`, BertConfig fields
    (hidden_size, num_hidden_layers, ...). The other UniLMSettings fields come as keywords
    (max_steps, batch_size, max_source_tokens, ...). A run already in OUT is replaced only with
    `overwrite`, continued only with `resume`. Returns the summary (also OUT/summary.json)."""
    from ..interop.pretrained import load_tokenizer, read_config, resolve
    from ..training.checkpoint import check_resume
    for path in (train_src, train_tgt, valid_src, valid_tgt):
        if path is not None and not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no such file")
    resume = check_resume(out, resume, overwrite, command="unilm-train")
    folder = resolve(init_from or vocab)
    tokenizer = load_tokenizer(folder)
    if init_from:
        config = read_config(folder)
        if model:
            raise ValueError("give either init_from (its config) or model sizes (from scratch), not both")
    else:
        config = BertConfig(**{"vocab_size": len(tokenizer), **(model or {})})
    s = UniLMSettings(out=out, model=config, init_from=folder if init_from else None, resume=resume, **settings)
    train = PairIds(train_src, train_tgt, tokenizer, s.max_source_tokens, s.max_target_tokens)
    valid = PairIds(valid_src, valid_tgt, tokenizer, s.max_source_tokens, s.max_target_tokens) if valid_src else None
    progress.write(f"train {train.summary()}" + (f"\nvalid {valid.summary()}" if valid else ""))
    return train_unilm(s, train, valid, tokenizer)


def report(summary: dict, out) -> str:
    """What a finished run says: its steps and time, the validation ROUGE, where the model is."""
    held = summary.get("held_out") or {}
    scores = ", ".join(f"{k} {v:.2f}" for k, v in held.items())
    return (f"{summary['steps']} steps in {summary['seconds']:.0f} s" + (f"; valid {scores}" if scores else "")
            + f"\nmodel: {os.path.join(out, 'model')}")
