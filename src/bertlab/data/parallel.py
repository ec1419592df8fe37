"""Parallel text for translation: aligned files -> encoded pairs -> batches cut by a token budget.

* ``read_parallel``: two line-aligned files (line i of one translates line i of the other), or one
  TSV file of two columns. Misaligned files, ragged TSV rows and non-UTF-8 bytes are errors naming
  the file (and line); pairs with an empty side are skipped and counted.
* ``token_batches``: example indices grouped into batches of similar length whose padded size stays
  within ``max_tokens`` (fairseq's recipe: shuffle, sort by length within large buckets, cut, shuffle
  the batches), the same for the same (seed, epoch) so a run resumes exactly.
* ``collate``: pairs of id lists -> a ``TranslationBatch`` of padded tensors.
* ``ParallelData``: the three together, encoding each sentence once; pairs longer than
  ``max_tokens_per_sentence`` subword tokens on either side are skipped and counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import torch

from ..io import read_lines

BUCKET_SIZE = 16384  # examples sorted together: large enough to pad little, small enough to mix


@dataclass
class ParallelText:
    sources: list[str]
    targets: list[str]
    name: str  # the file(s), for messages
    skipped_empty: int = 0


def read_parallel(source_path, target_path=None, strict: bool = False) -> ParallelText:
    """Two line-aligned files, or (no ``target_path``) one TSV file: source TAB target per line.

    A pair with an empty (or all-whitespace) side is skipped and counted in ``skipped_empty``; with
    ``strict`` it is an error naming the file and line (a summary needs its text and its label).
    """
    if target_path is None:
        sources, targets = [], []
        for number, line in enumerate(read_lines(source_path), 1):
            columns = line.rstrip("\r").split("\t")
            if len(columns) != 2:
                raise ValueError(f"{source_path}:{number}: expected 2 tab-separated columns "
                                 f"(source, target), found {len(columns)}")
            sources.append(columns[0])
            targets.append(columns[1])
        name = str(source_path)
    else:
        sources, targets = read_lines(source_path), read_lines(target_path)
        if strict and len(sources) != len(targets):
            short, long_, n = (target_path, source_path, len(targets)) if len(targets) < len(sources) else \
                (source_path, target_path, len(sources))
            raise ValueError(f"{short}:{n + 1}: missing (the file ends after {n:,} lines), so {long_}:{n + 1} "
                             f"has no {'target' if short == target_path else 'source'}")
        if len(sources) != len(targets):
            raise ValueError(f"misaligned parallel files: {source_path} has {len(sources):,} lines, "
                             f"{target_path} has {len(targets):,}")
        name = f"{source_path} + {target_path}"
    if strict:
        _refuse_blank(sources, targets, source_path, target_path)
    kept = [(s, t) for s, t in zip(sources, targets) if s.strip() and t.strip()]
    return ParallelText([s for s, _ in kept], [t for _, t in kept], name, len(sources) - len(kept))


def _refuse_blank(sources, targets, source_path, target_path):
    for number, (s, t) in enumerate(zip(sources, targets), 1):
        for side, text, path in (("source", s, source_path), ("target", t, target_path or source_path)):
            if not text.strip():
                raise ValueError(f"{path}:{number}: blank {side} (every pair needs both sides)")


def token_batches(lengths, max_tokens: int, shuffle: bool = True, seed: int = 0, epoch: int = 0,
                  bucket_size: int = BUCKET_SIZE) -> list[list[int]]:
    """Example indices in batches whose padded size, len(batch) * max(lengths in it), is at most
    ``max_tokens``. ``lengths`` is one number per example: for translation, the longer of its
    source and target tensors (``ParallelData.lengths``), so each padded tensor fits the budget.

    Without shuffle: sorted by length (ties by index), batches in that order -- for evaluation.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    too_long = np.flatnonzero(lengths > max_tokens)
    if too_long.size:
        i = int(too_long[0])
        raise ValueError(f"example {i} is {lengths[i]} tokens long, more than max_tokens={max_tokens}"
                         + (f" ({too_long.size - 1} more are too)" if too_long.size > 1 else ""))
    if shuffle:
        rng = np.random.default_rng([seed, epoch])
        order = rng.permutation(len(lengths))
        buckets = np.split(order, list(range(bucket_size, len(order), bucket_size)))
        order = np.concatenate([b[np.argsort(lengths[b], kind="stable")] for b in buckets])
    else:
        order = np.argsort(lengths, kind="stable")
    batches, batch, longest = [], [], 0
    for i, n in zip(order.tolist(), lengths[order].tolist()):
        if batch and (len(batch) + 1) * max(longest, n) > max_tokens:
            batches.append(batch)
            batch, longest = [], 0
        batch.append(i)
        longest = max(longest, n)
    if batch:
        batches.append(batch)
    if shuffle:
        batches = [batches[k] for k in rng.permutation(len(batches))]
    return batches


@dataclass
class TranslationBatch:
    src: torch.Tensor      # (B, S) long: source tokens + eos, padded with pad_id
    tgt_in: torch.Tensor   # (B, T) long: bos + target tokens, padded (the decoder's input)
    tgt_out: torch.Tensor  # (B, T) long: target tokens + eos, padded (what it must predict)
    num_tokens: int        # non-pad positions of tgt_out: real target tokens, eos included


def collate(pairs: list[tuple[list[int], list[int]]], pad_id: int, bos_id: int, eos_id: int) -> TranslationBatch:
    """Pad a list of (source ids, target ids) -- neither with bos/eos -- into a batch."""
    S = max(len(s) for s, _ in pairs) + 1
    T = max(len(t) for _, t in pairs) + 1
    src = np.full((len(pairs), S), pad_id, dtype=np.int64)
    tgt_in = np.full((len(pairs), T), pad_id, dtype=np.int64)
    tgt_out = np.full((len(pairs), T), pad_id, dtype=np.int64)
    for row, (s, t) in enumerate(pairs):
        src[row, :len(s)], src[row, len(s)] = s, eos_id
        tgt_in[row, 0], tgt_in[row, 1:len(t) + 1] = bos_id, t
        tgt_out[row, :len(t)], tgt_out[row, len(t)] = t, eos_id
    return TranslationBatch(torch.from_numpy(src), torch.from_numpy(tgt_in), torch.from_numpy(tgt_out),
                            sum(len(t) + 1 for _, t in pairs))


class _Ragged:
    """Many int sequences in one flat int32 array plus offsets (no per-sentence Python lists)."""

    def __init__(self, sequences: list[list[int]]):
        self.sizes = np.array([len(s) for s in sequences], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)])
        self.flat = np.fromiter((i for s in sequences for i in s), dtype=np.int32, count=int(self.offsets[-1]))

    def __getitem__(self, i: int) -> list[int]:
        return self.flat[self.offsets[i]:self.offsets[i + 1]].tolist()


@dataclass
class ParallelData:
    """Encoded pairs of one data set and its batches; ``report`` says what was skipped and why."""

    sources: list[str]
    targets: list[str]
    source_ids: _Ragged
    target_ids: _Ragged
    pad_id: int
    bos_id: int
    eos_id: int
    report: dict = field(default_factory=dict)

    @classmethod
    def from_text(cls, text: ParallelText, source_tokenizer, target_tokenizer,
                  max_tokens_per_sentence: int = 256) -> "ParallelData":
        specials = [(t.pad_id, t.bos_id, t.eos_id) for t in (source_tokenizer, target_tokenizer)]
        if specials[0] != specials[1]:  # collate pads and ends both sides with the same ids
            raise ValueError(f"the source and target vocabularies disagree on <pad>, <s>, </s>: {specials}")
        kept = []
        for s, t in zip(text.sources, text.targets):
            s_ids, t_ids = source_tokenizer.encode(s), target_tokenizer.encode(t)
            if max(len(s_ids), len(t_ids)) <= max_tokens_per_sentence:
                kept.append((s, t, s_ids, t_ids))
        report = {"data": text.name, "pairs": len(kept), "skipped_empty": text.skipped_empty,
                  "skipped_too_long": len(text.sources) - len(kept),
                  "max_tokens_per_sentence": max_tokens_per_sentence}
        if not kept:
            raise ValueError(f"{text.name}: no pairs left: {report['skipped_empty']:,} with an empty side, "
                             f"{report['skipped_too_long']:,} over {max_tokens_per_sentence} tokens")
        return cls([k[0] for k in kept], [k[1] for k in kept], _Ragged([k[2] for k in kept]),
                   _Ragged([k[3] for k in kept]), target_tokenizer.pad_id, target_tokenizer.bos_id,
                   target_tokenizer.eos_id, report)

    @classmethod
    def from_files(cls, source_path, target_path, source_tokenizer, target_tokenizer,
                   max_tokens_per_sentence: int = 256) -> "ParallelData":
        """``read_parallel(source_path, target_path)`` (target_path None: a TSV file), encoded."""
        return cls.from_text(read_parallel(source_path, target_path), source_tokenizer, target_tokenizer,
                             max_tokens_per_sentence)

    def __len__(self) -> int:
        return len(self.sources)

    def summary(self) -> str:
        r = self.report
        return (f"{r['data']}: {r['pairs']:,} pairs; skipped {r['skipped_empty']:,} with an empty side and "
                f"{r['skipped_too_long']:,} over {r['max_tokens_per_sentence']} tokens")

    @property
    def lengths(self) -> np.ndarray:
        """Per pair, the longer padded row it needs: source + eos or bos + target."""
        return np.maximum(self.source_ids.sizes, self.target_ids.sizes) + 1

    def pair(self, i: int) -> tuple[list[int], list[int]]:
        return self.source_ids[i], self.target_ids[i]

    def batches(self, epoch: int, max_tokens: int, shuffle: bool = True, seed: int = 0) -> list[list[int]]:
        return token_batches(self.lengths, max_tokens, shuffle, seed, epoch)

    def iterate(self, epoch: int, max_tokens: int, start: int = 0, shuffle: bool = True,
                seed: int = 0) -> Iterator[tuple[int, TranslationBatch]]:
        """(batch index, batch) of one epoch from batch ``start`` on: the position (epoch, index of
        the next batch) is all a checkpoint needs to resume exactly where a run stopped."""
        batches = self.batches(epoch, max_tokens, shuffle, seed)
        for index in range(start, len(batches)):
            pairs = [self.pair(i) for i in batches[index]]
            yield index, collate(pairs, self.pad_id, self.bos_id, self.eos_id)
