"""`bertlab translate-train` as a function a notebook can call: the run folder claimed, subword
vocabularies learned from the training files (by the main process under torchrun, the others then
read them), the Transformer sized to them, and the run trained. The command line only turns its
flags into these arguments and prints the report (objective.report)."""
import os

from .. import progress, validate
from ..data.parallel import ParallelData
from ..interop.translation_folder import bleu_tokenize
from ..io import make_folder
from ..training import run_inputs
from ..training.distributed import is_main_process
from ..training.jobs import claim_run, main_process_first
from .objective import (
    TranslationSettings,
    train_translation,
    translation_config,
    translation_data_settings,
    translation_vocabularies,
)

# What a translation run writes into OUT besides the engine's files (checkpoint.RUN_OUTPUTS)
TRANSLATION_OUTPUTS = ("vocab", run_inputs.NAME, "bleu.png")


def translate_train_job(train_src, train_tgt, valid_src, valid_tgt, out, *, vocab=None, joint_vocab=False,
                        vocab_size=8000, min_frequency=2, max_sentence_tokens=256, preset="small", model=None,
                        max_positions=512, max_tokens=4096, source_lang=None, target_lang=None, device="auto",
                        resume=False, overwrite=False, **settings) -> dict:
    """Train a translation Transformer on line-aligned files into the run folder `out`: subword
    vocabularies learned from the training files (`joint_vocab`: one for both sides) or reused from
    the folder `vocab`, pairs longer than `max_sentence_tokens` skipped, the `preset`'s Transformer
    for them (`model`: translation_config's sizes to change, e.g. {"layers": 2, "d_model": 64}),
    trained with the other TranslationSettings fields given as keywords (max_steps, lr, ...).
    The languages (by default the files' suffixes) choose the BLEU tokenizer and are saved with the
    model. `overwrite` and `resume` as for gpt_train_job. Returns the summary (also
    OUT/summary.json); objective.report words it."""
    validate.check_number("--max-positions", max_positions, integer=True, minimum=3)  # BOS, EOS and a token
    paths = (train_src, train_tgt, valid_src, valid_tgt)
    vocabulary = {"vocab": vocab, "joint_vocab": joint_vocab, "vocab_size": vocab_size, "min_frequency": min_frequency}
    data_settings = translation_data_settings(**vocabulary, max_sentence_tokens=max_sentence_tokens)
    resume = claim_run(out, paths, resume, overwrite, data_settings, TRANSLATION_OUTPUTS, "translate-train")

    def vocabularies(reuse):
        if reuse:
            return translation_vocabularies(out, train_src, train_tgt, **vocabulary, resume=True)
        run_inputs.clear(make_folder(out))
        made = translation_vocabularies(out, train_src, train_tgt, **vocabulary)
        run_inputs.record(out, paths, data_settings)
        return made

    source, target = main_process_first(device, vocabularies, resume)
    longest = min(max_sentence_tokens, max_positions - 2)
    train = ParallelData.from_files(train_src, train_tgt, source, target, longest)
    valid = ParallelData.from_files(valid_src, valid_tgt, source, target, longest)
    need = max(int(data.lengths.max()) for data in (train, valid))
    if need > max_tokens:
        raise ValueError(f"--max-tokens {max_tokens}: the longest pair needs {need} tokens (a side and its EOS); "
                         "raise --max-tokens or lower --max-sentence-tokens")
    if is_main_process():
        progress.write(f"train {train.summary()}\nvalid {valid.summary()}")
    config = translation_config(source, target, preset, **(model or {}), max_positions=max_positions)
    target_lang = target_lang or os.path.splitext(train_tgt)[1].lstrip(".")
    s = TranslationSettings(out=out, model=config, max_tokens=max_tokens, device=device, resume=resume,
                            **{"bleu_tokenize": bleu_tokenize(target_lang), **settings})
    model_settings = {"source_lang": source_lang or os.path.splitext(train_src)[1].lstrip("."),
                      "target_lang": target_lang, "bleu_tokenize": s.bleu_tokenize}
    return train_translation(s, train, valid, source, target, model_settings)
