"""`bertlab gpt-train` and `bertlab translate-train` as functions a notebook can call: the run
folder claimed, the tokenizer and data made from the files (by the main process under torchrun,
the others then read them), the model sized to the tokenizer, and the run trained. The command
line only turns its flags into these arguments and prints the report."""
import os

from .. import progress, validate
from ..data.gpt_data import gpt_data_settings, prepare_gpt_data
from ..data.parallel import ParallelData
from ..device import pick_device
from ..interop.translation_folder import bleu_tokenize
from ..io import make_folder
from ..models.gpt_config import GPTConfig
from . import run_inputs
from .checkpoint import check_resume
from .distributed import barrier, is_main_process, setup_distributed
from .lm_trainer import GPTSettings, train_gpt
from .translation_trainer import (TranslationSettings, train_translation, translation_config,
                                  translation_data_settings, translation_vocabularies)


def gpt_train_job(files, out, *, tokenizer="bpe", vocab_size=8000, val_fraction=0.05, preset="tiny", model=None,
                  block_size=256, device="auto", resume=False, overwrite=False, **settings) -> dict:
    """Train a GPT on the text `files` into the run folder `out`: a `tokenizer` ("bpe": learn
    `vocab_size` byte-level BPE tokens; "char"; or a folder with vocab.json + merges.txt) and token
    files (`val_fraction` of the lines held out) made in OUT, the `preset`'s GPTConfig sized to that
    vocabulary and `block_size` positions (`model`: fields to change, e.g. {"n_layer": 2}), trained
    with the other GPTSettings fields given as keywords (max_steps, lr, ...). A run already in OUT
    is replaced only with `overwrite`, continued only with `resume` (with the same files and
    tokenizer settings). Returns the summary (also OUT/summary.json); lm_trainer.report words it."""
    data = (tokenizer, vocab_size, val_fraction)
    _claim(out, files, resume, overwrite, gpt_data_settings(*data), GPT_OUTPUTS, "gpt-train")
    make_folder(out)
    tokenizer, data_dir = _main_first(device, lambda reuse: prepare_gpt_data(files, out, *data, reuse=reuse), resume)
    eos = getattr(tokenizer, "eos_token_id", None)
    eos = 0 if eos is None else eos  # a character tokenizer has no end-of-text token
    config = GPTConfig.preset(preset, vocab_size=tokenizer.vocab_size, n_positions=block_size, bos_token_id=eos,
                              eos_token_id=eos, **(model or {}))
    s = GPTSettings(data=data_dir, out=out, model=config, block_size=block_size, device=device, resume=resume,
                    **settings)
    return train_gpt(s, tokenizer)


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
    OUT/summary.json); translation_trainer.report words it."""
    validate.check_number("--max-positions", max_positions, integer=True, minimum=3)  # BOS, EOS and a token
    paths = (train_src, train_tgt, valid_src, valid_tgt)
    vocabulary = {"vocab": vocab, "joint_vocab": joint_vocab, "vocab_size": vocab_size, "min_frequency": min_frequency}
    data_settings = translation_data_settings(**vocabulary, max_sentence_tokens=max_sentence_tokens)
    _claim(out, paths, resume, overwrite, data_settings, TRANSLATION_OUTPUTS, "translate-train")

    def vocabularies(reuse):
        if reuse:
            return translation_vocabularies(out, train_src, train_tgt, **vocabulary, resume=True)
        run_inputs.clear(make_folder(out))
        made = translation_vocabularies(out, train_src, train_tgt, **vocabulary)
        run_inputs.record(out, paths, data_settings)
        return made

    source, target = _main_first(device, vocabularies, resume)
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


# What these runs write into OUT besides the engine's files (checkpoint.RUN_OUTPUTS)
GPT_OUTPUTS = ("tokenizer", "data", run_inputs.NAME, "samples.txt")
TRANSLATION_OUTPUTS = ("vocab", run_inputs.NAME, "bleu.png")


def _claim(out, files, resume: bool, overwrite: bool, data_settings: dict, outputs=(), command: str = ""):
    """Check before any work: the files exist, OUT holds no run unless asked to resume or
    overwrite it (and then only in a folder bertlab made), and a resumed run's files and data
    settings are those it started with."""
    for path in files:
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no such file")
    check_resume(out, resume, overwrite, outputs, command)
    if resume:
        run_inputs.check(out, files, data_settings)


def _main_first(device, prepare, resume: bool):
    """prepare(reuse) on the main process (reuse=resume), then, once it has written its files, on
    the others with reuse=True: under torchrun one process makes the tokenizer and data, and the
    rest read them."""
    info = setup_distributed(pick_device(device))
    if info.is_main:
        made = prepare(resume)
    barrier(info)
    return made if info.is_main else prepare(True)
