"""Text files encoded once into a memory-mapped stream of token ids, and random contiguous blocks
drawn from it for causal language modelling.

    prepare_token_files([...txt], tokenizer, folder)   # train.bin, val.bin, meta.json
    stream = TokenStream(folder + "/train.bin", block_size=256, seed=0)
    x, y = stream.batch(16)                            # y is x shifted by one token

Held-out text is taken in chunks of lines spread over the whole corpus (every k-th chunk), so it
comes from the same mix of sources as the training text. Each DDP rank samples its own contiguous
part of the stream; the sampler's generator state is the data position a checkpoint saves.
"""
import json
import os
from collections import Counter

import numpy as np
import torch

from ..io import atomic_write, atomic_write_text, input_size, read_json, read_lines
from ..progress import progress_bar

CHUNK_LINES = 64  # lines per held-out/train unit


def _dtype(vocab_size: int):
    return np.uint16 if vocab_size <= 65536 else np.uint32


def read_corpus(paths) -> list[list[str]]:
    """The lines of each file; errors name the file (and the line, for bad UTF-8)."""
    if not paths:
        raise ValueError("no text files given")
    out = []
    for path in paths:
        if os.path.isdir(path):
            raise IsADirectoryError(f"{path}: is a directory; give text files")
        lines = [line for line in read_lines(path) if line.strip()]
        if not lines:
            raise ValueError(f"{path}: has no text (only blank lines)")
        out.append(lines)
    return out


def split_lines(files: list[list[str]], val_fraction: float) -> tuple[list[str], list[str]]:
    """(train lines, held-out lines): every k-th chunk of CHUNK_LINES lines is held out."""
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction {val_fraction}: must be more than 0 and less than 1")
    every = max(2, round(1 / val_fraction))
    train, val = [], []
    chunk = 0
    for lines in files:
        for start in range(0, len(lines), CHUNK_LINES):
            (val if chunk % every == every - 1 else train).extend(lines[start:start + CHUNK_LINES])
            chunk += 1
    if not val:  # a tiny corpus: hold out its last chunk
        cut = max(1, len(train) - CHUNK_LINES)
        train, val = train[:cut], train[cut:] or train[-1:]
    return train, val


def encode_lines(lines: list[str], tokenizer, desc="encoding") -> np.ndarray:
    """Token ids of the lines, each followed by its newline."""
    dtype = _dtype(tokenizer.vocab_size)
    pieces = [np.asarray(tokenizer.encode(line + "\n"), dtype=dtype)
              for line in progress_bar(lines, desc=desc, unit="lines", enabled=len(lines) >= 20000)]
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=dtype)


def unigram_perplexity(train: np.ndarray, val: np.ndarray, vocab_size: int) -> float:
    """Perplexity on held-out tokens of token frequencies counted on the training tokens (add-one
    smoothed): the baseline a language model must beat by using context."""
    counts = np.bincount(train, minlength=vocab_size).astype(np.float64) + 1.0
    logp = np.log(counts / counts.sum())
    return float(np.exp(-logp[val].mean()))


def prepare_token_files(paths, tokenizer, folder, val_fraction: float = 0.05, extra_meta=None) -> dict:
    """Write train.bin, val.bin and meta.json (token counts, dtype, unigram baseline) to `folder`."""
    train_lines, val_lines = split_lines(read_corpus(paths), val_fraction)
    train = encode_lines(train_lines, tokenizer, "encoding train")
    val = encode_lines(val_lines, tokenizer, "encoding held-out")
    os.makedirs(folder, exist_ok=True)
    for name, tokens in (("train.bin", train), ("val.bin", val)):
        atomic_write(os.path.join(folder, name), lambda f, t=tokens: f.write(t.tobytes()), mode="wb")
    meta = {"dtype": np.dtype(train.dtype).name, "vocab_size": tokenizer.vocab_size,
            "train_tokens": int(train.size), "val_tokens": int(val.size),
            "train_lines": len(train_lines), "val_lines": len(val_lines),
            "sources": [os.path.abspath(p) for p in paths], "val_fraction": val_fraction,
            "unigram_val_perplexity": unigram_perplexity(train, val, tokenizer.vocab_size),
            "top_tokens": Counter(train.tolist()).most_common(5), **(extra_meta or {})}
    atomic_write_text(os.path.join(folder, "meta.json"), json.dumps(meta, indent=2) + "\n")
    return meta


# The dtypes prepare_token_files writes (_dtype). meta.json's "dtype" went straight into np.memmap,
# and "O" made it read the file's bytes as object pointers (a segfault); any other is refused.
TOKEN_DTYPES = ("uint16", "uint32")
META_FIELDS = {"dtype": str, "vocab_size": int, "unigram_val_perplexity": float}


def read_meta(folder) -> dict:
    """A token folder's meta.json (io.read_json): the token dtype one we write, a vocabulary size
    above 0 and the unigram baseline, each of its type; else a ValueError naming the file."""
    path = os.path.join(folder, "meta.json")
    meta = read_json(path, fields=META_FIELDS)
    missing = [name for name in META_FIELDS if name not in meta]
    if missing:
        raise ValueError(f"{path}: has no {missing[0]}; not the meta.json of a token folder")
    if meta["dtype"] not in TOKEN_DTYPES:
        raise ValueError(f"{path}: dtype {meta['dtype']!r}: token files hold {' or '.join(TOKEN_DTYPES)} ids")
    if meta["vocab_size"] <= 0:
        raise ValueError(f"{path}: vocab_size {meta['vocab_size']}: must be at least 1")
    return meta


def load_tokens(path, vocab_size: int | None = None) -> np.memmap:
    """The token ids of a token file (train.bin, val.bin), memory-mapped and checked once, here: of
    meta.json's dtype, a whole number of ids, every id below `vocab_size` (the model's; by default
    meta.json's, which must then agree). An id past the vocabulary would fail far from its cause (or,
    on a GPU, read beyond the embedding table)."""
    meta = read_meta(os.path.dirname(path))
    if vocab_size is not None and vocab_size != meta["vocab_size"]:
        raise ValueError(f"{os.path.join(os.path.dirname(path), 'meta.json')}: the token ids are of a "
                         f"{meta['vocab_size']:,}-token vocabulary, but the model has {vocab_size:,}")
    dtype = np.dtype(meta["dtype"])
    size = input_size(path)  # a regular file
    if size % dtype.itemsize:
        raise ValueError(f"{path}: {size:,} bytes, not a whole number of {dtype.name} token ids; truncated or corrupt")
    if size == 0:  # np.memmap refuses an empty file
        return np.zeros(0, dtype)
    tokens = np.memmap(path, dtype=dtype, mode="r")
    check_token_ids(tokens, meta["vocab_size"], path)
    return tokens


def check_token_ids(tokens: np.ndarray, vocab_size: int, path, chunk: int = 1 << 24):
    """Every id below `vocab_size`, or a ValueError naming the file and the first id past it; read a
    chunk at a time (a token file may be larger than memory)."""
    for start in range(0, len(tokens), chunk):
        part = tokens[start:start + chunk]
        if part.max() >= vocab_size:
            first = start + int(np.argmax(part >= vocab_size))
            raise ValueError(f"{path}: token id {int(tokens[first])} at position {first:,} is past the "
                             f"{vocab_size:,}-token vocabulary; the file is corrupt or of another tokenizer")


class TokenStream:
    """Random contiguous (block_size + 1)-token windows of a token file; rank r of w samples only
    from the r-th of w equal parts, so data-parallel ranks see different text."""

    def __init__(self, path, block_size: int, seed: int = 0, rank: int = 0, world_size: int = 1,
                 vocab_size: int | None = None):
        tokens = load_tokens(path, vocab_size)
        part = len(tokens) // world_size
        self.tokens = tokens[rank * part:(rank + 1) * part]
        if len(self.tokens) <= block_size + 1:
            raise ValueError(f"{path}: {len(self.tokens)} tokens per rank, fewer than a block of {block_size + 1}; "
                             "use more text or a smaller --block-size")
        self.block_size = block_size
        self.generator = torch.Generator().manual_seed(seed * 1000 + rank)

    def batch(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(len(self.tokens) - self.block_size - 1, (batch_size,), generator=self.generator)
        window = np.stack([self.tokens[s:s + self.block_size + 1] for s in starts.tolist()]).astype(np.int64)
        window = torch.from_numpy(window)
        return window[:, :-1], window[:, 1:]

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict):
        from ..training.checkpoint import expect_fields, set_generator_state
        expect_fields(state, {"generator": torch.Tensor}, "the token stream's position")
        set_generator_state(self.generator, state["generator"], "the token stream's generator")


def eval_blocks(path, block_size: int, max_tokens: int | None = None, vocab_size: int | None = None):
    """Consecutive non-overlapping (x, y) blocks covering the held-out file (or its first max_tokens)."""
    tokens = load_tokens(path, vocab_size)
    if max_tokens:
        tokens = tokens[:max_tokens + 1]
    n = (len(tokens) - 1) // block_size
    if n == 0:
        raise ValueError(f"{path}: {len(tokens)} held-out tokens, fewer than one block of {block_size + 1}")
    data = torch.from_numpy(np.asarray(tokens[:n * block_size + 1], dtype=np.int64))
    return data[:-1].view(n, block_size), data[1:].view(n, block_size)
