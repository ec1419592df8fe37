"""Model inputs: [CLS] A [SEP] (B [SEP]), segment ids, attention mask, truncation, padding.

Offsets: every token of a text carries ``(start, end)``, the characters ``text[start:end]`` it
came from in *its own* text (A or B). ``[CLS]``, ``[SEP]`` and ``[PAD]`` carry ``None``, and so
do their ``sequence_ids`` entries; tokens of A have sequence id 0, tokens of B 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

Offset = Optional[tuple[int, int]]
PADDING = ("none", "longest", "max_length")


def truncate_seq_pair(tokens_a: list, tokens_b: list, max_length: int) -> None:
    """Shorten two lists in place until together they hold at most ``max_length`` items.

    Longest first, one item at a time from the end of the longer list (of B on a tie), as
    google-research/bert's run_classifier does: a long text loses more than a short one.
    """
    len_a, len_b = len(tokens_a), len(tokens_b)
    while len_a + len_b > max_length:
        if len_a > len_b:
            len_a -= 1
        else:
            len_b -= 1
    del tokens_a[len_a:]
    del tokens_b[len_b:]


@dataclass
class Encoding:
    """One example. ``offsets``/``sequence_ids`` are None unless offsets were asked for."""
    input_ids: list[int]
    token_type_ids: list[int]
    attention_mask: list[int]
    offsets: Optional[list[Offset]] = None
    sequence_ids: Optional[list[Optional[int]]] = None

    def __len__(self) -> int:
        return len(self.input_ids)


@dataclass
class BatchEncoding:
    """A batch as plain Python lists (one inner list per example); ``to_tensors``/``to_numpy``
    turn ``input_ids``, ``token_type_ids`` and ``attention_mask`` into int64 arrays."""
    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    attention_mask: list[list[int]]
    offsets: Optional[list[list[Offset]]] = None
    sequence_ids: Optional[list[list[Optional[int]]]] = None

    def __len__(self) -> int:
        return len(self.input_ids)

    def __getitem__(self, i: int) -> Encoding:
        return Encoding(self.input_ids[i], self.token_type_ids[i], self.attention_mask[i],
                        None if self.offsets is None else self.offsets[i],
                        None if self.sequence_ids is None else self.sequence_ids[i])

    def _arrays(self) -> dict[str, list[list[int]]]:
        if len({len(ids) for ids in self.input_ids}) > 1:
            raise ValueError("examples have different lengths; encode with padding='longest' "
                             "or padding='max_length' to get arrays")
        return {"input_ids": self.input_ids, "token_type_ids": self.token_type_ids,
                "attention_mask": self.attention_mask}

    def to_tensors(self) -> dict:
        """``{"input_ids", "token_type_ids", "attention_mask"}`` as torch.long tensors."""
        import torch
        return {k: torch.tensor(v, dtype=torch.long) for k, v in self._arrays().items()}

    def to_numpy(self) -> dict:
        """The same as ``to_tensors``, as numpy int64 arrays."""
        import numpy as np
        return {k: np.array(v, dtype=np.int64) for k, v in self._arrays().items()}


def pad_batch(batch: BatchEncoding, length: int, pad_id: int) -> None:
    """Right-pad every example of ``batch`` in place to ``length`` tokens."""
    for i, ids in enumerate(batch.input_ids):
        missing = length - len(ids)
        if missing <= 0:
            continue
        ids += [pad_id] * missing
        batch.token_type_ids[i] += [0] * missing
        batch.attention_mask[i] += [0] * missing
        if batch.offsets is not None:
            batch.offsets[i] += [None] * missing
            batch.sequence_ids[i] += [None] * missing
