"""A GPT run's data (what `bertlab gpt-train` prepares before training): a tokenizer learned from
the text files (byte-level BPE or characters) or loaded from a folder, saved in OUT/tokenizer, and
the token files in OUT/data (lm/token_stream.py); OUT/inputs.json records what they were made
from, so that a resumed run can refuse other files or settings.

    tokenizer, data_dir = prepare_gpt_data(["notes.txt"], "runs/tiny", vocab_size=1000)
"""
import os

from .. import progress
from ..tokenization.bpe import ByteLevelBPETokenizer
from ..tokenization.char_level import CharTokenizer, load_gpt_tokenizer
from ..training import run_inputs
from .token_stream import prepare_token_files, read_corpus


def gpt_data_settings(tokenizer="bpe", vocab_size=8000, val_fraction=0.05) -> dict:
    """The settings that shape the tokenizer and token files, as inputs.json records them (by flag)."""
    named = tokenizer if tokenizer in ("bpe", "char") else os.path.abspath(tokenizer)
    return {"--tokenizer": named, "--vocab-size": vocab_size if tokenizer == "bpe" else None,
            "--val-fraction": val_fraction}


def prepare_gpt_data(files, out, tokenizer="bpe", vocab_size=8000, val_fraction=0.05, reuse=False):
    """(tokenizer, data folder) of the run in ``out``. ``tokenizer``: "bpe" (learn ``vocab_size``
    byte-level BPE tokens from ``files``), "char", or a folder with vocab.json + merges.txt. A new
    run makes both from ``files`` (replacing any an earlier run left); ``reuse`` reads back the ones
    already there (a resumed run, or the ranks other than 0 of a distributed one)."""
    tok_dir, data_dir = os.path.join(out, "tokenizer"), os.path.join(out, "data")
    if reuse:
        if not os.path.exists(os.path.join(data_dir, "meta.json")):
            raise FileNotFoundError(f"{data_dir}: no meta.json; the run's data was never finished "
                                    "(start again with --overwrite)")
        return load_gpt_tokenizer(tok_dir), data_dir
    run_inputs.clear(out)
    if tokenizer == "bpe":
        progress.write(f"learning a {vocab_size}-token byte-level BPE from {len(files)} file(s)")
        learned = ByteLevelBPETokenizer.train(_lines(files), vocab_size)
    elif tokenizer == "char":
        learned = CharTokenizer.train(_lines(files))
    else:
        learned = load_gpt_tokenizer(tokenizer)
    learned.save(tok_dir)
    meta = prepare_token_files(files, learned, data_dir, val_fraction, {"tokenizer": learned.kind})
    run_inputs.record(out, files, gpt_data_settings(tokenizer, vocab_size, val_fraction))
    progress.write(f"{meta['train_tokens']:,} training and {meta['val_tokens']:,} held-out tokens; unigram "
                   f"held-out perplexity {meta['unigram_val_perplexity']:.1f}")
    return learned, data_dir


def _lines(files):
    return (line for lines in read_corpus(files) for line in lines)
