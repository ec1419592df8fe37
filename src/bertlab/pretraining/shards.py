"""Pretraining instances on disk: a folder of fixed-width numpy shards that training memory-maps.

    folder/meta.json                          max_seq_length, max_predictions_per_seq, vocab_size,
                                              dynamic_masking, nsp, settings, shards [{name, instances}]
    folder/vocab.txt                          the vocabulary the ids refer to
    folder/<shard>.<field>.npy                one array per field, one row per instance

Fields (google-research/bert's seven features, stored compactly; the padding, input_mask and
masked_lm_weights are rebuilt from the lengths and counts):

    input_ids            (N, L)  uint16 (int32 when the vocabulary has more than 65,535 pieces)
    segment_ids          (N, L)  uint8
    lengths              (N,)    int16   real tokens; input_mask = position < length
    next_sentence_labels (N,)    uint8   0 = B follows A, 1 = B is random
    masked_lm_positions  (N, P)  int16   static masking only
    masked_lm_ids        (N, P)  like input_ids
    masked_lm_counts     (N,)    uint8   masked_lm_weights = first `count` ones
    masked_lm_boundaries (N, P, 2) int16 span masking only (meta.json "span_boundaries": true): the
                                         positions just left and right of each prediction's span

With dynamic masking (RoBERTa) the masked_lm fields are absent: input_ids hold the original tokens
and a fresh mask is drawn every time a batch is read. Every file is written to a temporary name and
renamed into place, meta.json last: a folder with a meta.json is complete.
"""
import json
import os
from functools import cached_property

import numpy as np

from ..io import inside, open_input

STATIC_FIELDS = ("input_ids", "segment_ids", "lengths", "next_sentence_labels")
MASK_FIELDS = ("masked_lm_positions", "masked_lm_ids", "masked_lm_counts")
SPAN_FIELD = "masked_lm_boundaries"  # optional: folders written before span masking lack it


def id_dtype(vocab_size: int):
    return np.uint16 if vocab_size <= 65535 else np.int32


def _save(path, array):
    tmp = f"{path}.tmp.npy"
    np.save(tmp, array)
    os.replace(tmp, path)


class ShardWriter:
    """Collects instances and writes them as shards of at most `shard_size` rows named
    `{prefix}-{k:04d}`; `close()` returns [{name, instances}] for meta.json.

    An instance is a dict with tokens already as ids: input_ids, segment_ids (lists, unpadded),
    next_sentence_label (int) and, for static masking, masked_lm_positions / masked_lm_ids (lists).
    """

    def __init__(self, folder, prefix: str, max_seq_length: int, max_predictions_per_seq: int,
                 vocab_size: int, dynamic_masking: bool = False, shard_size: int = 50_000,
                 span_boundaries: bool = False, shards=()):
        if max_seq_length > 32767:
            raise ValueError(f"max_seq_length {max_seq_length} does not fit the int16 length field")
        self.folder, self.prefix, self.shard_size = folder, prefix, shard_size
        self.L, self.P, self.dynamic = max_seq_length, max_predictions_per_seq, dynamic_masking
        self.ids, self.spans = id_dtype(vocab_size), span_boundaries
        self.rows, self.shards = [], list(shards)  # shards: those an interrupted run finished

    def add(self, instance: dict) -> bool:
        """Keep `instance`; True when that filled a shard and it was written."""
        self.rows.append(instance)
        if len(self.rows) >= self.shard_size:
            self.flush()
            return True
        return False

    def flush(self):
        if not self.rows:
            return
        n, name = len(self.rows), f"{self.prefix}-{len(self.shards):04d}"
        arrays = {"input_ids": np.zeros((n, self.L), self.ids), "segment_ids": np.zeros((n, self.L), np.uint8),
                  "lengths": np.zeros(n, np.int16), "next_sentence_labels": np.zeros(n, np.uint8)}
        if not self.dynamic:
            arrays.update(masked_lm_positions=np.zeros((n, self.P), np.int16),
                          masked_lm_ids=np.zeros((n, self.P), self.ids), masked_lm_counts=np.zeros(n, np.uint8))
        if self.spans:
            arrays[SPAN_FIELD] = np.zeros((n, self.P, 2), np.int16)
        for i, row in enumerate(self.rows):
            k = len(row["input_ids"])
            if k > self.L or len(row["segment_ids"]) != k:
                raise ValueError(f"instance {i} has {k} tokens for max_seq_length {self.L}")
            arrays["input_ids"][i, :k] = row["input_ids"]
            arrays["segment_ids"][i, :k] = row["segment_ids"]
            arrays["lengths"][i] = k
            arrays["next_sentence_labels"][i] = row.get("next_sentence_label", 0)
            if not self.dynamic:
                m = len(row["masked_lm_positions"])
                if m > self.P:
                    raise ValueError(f"instance {i} has {m} predictions for max_predictions_per_seq {self.P}")
                arrays["masked_lm_positions"][i, :m] = row["masked_lm_positions"]
                arrays["masked_lm_ids"][i, :m] = row["masked_lm_ids"]
                arrays["masked_lm_counts"][i] = m
            if self.spans:
                arrays[SPAN_FIELD][i, :m] = row[SPAN_FIELD]
        for field, array in arrays.items():
            _save(os.path.join(self.folder, f"{name}.{field}.npy"), array)
        self.shards.append({"name": name, "instances": n})
        self.rows = []

    def close(self) -> list[dict]:
        self.flush()
        return self.shards


def write_meta(folder, shards: list[dict], *, max_seq_length: int, max_predictions_per_seq: int,
               vocab_size: int, dynamic_masking: bool, nsp: bool, settings: dict | None = None,
               span_boundaries: bool = False):
    meta = {"format": "bertlab-pretraining-shards/1", "max_seq_length": max_seq_length,
            "max_predictions_per_seq": max_predictions_per_seq, "vocab_size": vocab_size,
            "dynamic_masking": dynamic_masking, "nsp": nsp, "instances": sum(s["instances"] for s in shards),
            "shards": shards, "settings": settings or {}}
    if span_boundaries:  # only then: readers of the older format see the folder they know
        meta["span_boundaries"] = True
    tmp = os.path.join(folder, "meta.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
    os.replace(tmp, os.path.join(folder, "meta.json"))


class PretrainingData:
    """All shards of a folder as one indexable set of instances (memory-mapped: only the rows a
    batch reads are paged in). `batch(indices)` returns the model's tensors.

    Opening checks what a run would otherwise trip over later, each error naming the file: a
    missing or garbled meta.json, a shard that is missing, truncated or of other dimensions than
    meta.json says; `vocab` checks vocab.txt against meta.json's vocab_size."""

    def __init__(self, folder):
        path = os.path.join(folder, "meta.json")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{folder}: no meta.json; not a (finished) create-pretraining-data output")
        from ..io import read_json
        self.meta = _checked_meta(read_json(path), path)
        self.folder = folder
        self.dynamic = self.meta["dynamic_masking"]
        self.span_boundaries = bool(self.meta.get("span_boundaries")) and not self.dynamic
        fields = STATIC_FIELDS + (() if self.dynamic else MASK_FIELDS) + ((SPAN_FIELD,) if self.span_boundaries else ())
        self.shards = [{f: self._open(s, f) for f in fields} for s in self.meta["shards"]]
        for shard, arrays in zip(self.meta["shards"], self.shards):
            self._check_values(shard, arrays)
        self.offsets = np.cumsum([0] + [s["instances"] for s in self.meta["shards"]])

    def _open(self, shard: dict, field: str) -> np.ndarray:
        # a name from meta.json: "../x" or "/x" would read outside the folder
        path = inside(self.folder, f"{shard['name']}.{field}.npy", "shard")
        with open_input(path) as f:  # a missing shard: FileNotFoundError names it
            magic = f.read(6)
        if magic != b"\x93NUMPY":
            raise ValueError(f"{path}: not a .npy file (corrupt or empty)")
        try:
            array = np.load(path, mmap_mode="r")
        except (ValueError, EOFError) as e:
            raise ValueError(f"{path}: not a readable .npy shard, truncated or corrupt ({e})") from None
        width = {"input_ids": self.meta["max_seq_length"], "segment_ids": self.meta["max_seq_length"],
                 "masked_lm_positions": self.meta["max_predictions_per_seq"],
                 "masked_lm_ids": self.meta["max_predictions_per_seq"]}.get(field)
        expected = (shard["instances"],) + ((width,) if width else ())
        if field == SPAN_FIELD:
            expected = (shard["instances"], self.meta["max_predictions_per_seq"], 2)
        if array.shape != expected:
            raise ValueError(f"{path}: holds an array of shape {array.shape}, but meta.json says {expected}")
        dtype = np.dtype(id_dtype(self.meta["vocab_size"]) if field in ID_FIELDS else FIELD_DTYPES[field])
        if array.dtype != dtype:  # float ids were truncated by the batch's cast and trained on
            raise ValueError(f"{path}: holds {array.dtype} values, but create-pretraining-data writes {field} as "
                             f"{dtype}; the shard is corrupt or was written by something else")
        return array

    def _check_values(self, shard: dict, arrays: dict):
        """Every value of a shard in range, checked once when the folder is opened (vectorised, each
        shard read through once): ids within the vocabulary (past it the embedding lookup fails far
        from the cause, or reads out of bounds on a GPU), lengths within the sequence length, segments
        and labels 0 or 1, predictions within their instance. Errors name the file and the first bad
        instance."""
        L, P, V = self.meta["max_seq_length"], self.meta["max_predictions_per_seq"], self.meta["vocab_size"]

        def path(field):
            return os.path.join(self.folder, f"{shard['name']}.{field}.npy")

        lengths = np.asarray(arrays["lengths"])
        _in_range(lengths, 1, L, path("lengths"), f"a length outside 1 to {L}")
        _in_range(arrays["input_ids"], 0, V - 1, path("input_ids"), f"token ids beyond its {V}-token vocabulary")
        _in_range(arrays["segment_ids"], 0, 1, path("segment_ids"), "a segment id other than 0 or 1")
        _in_range(arrays["next_sentence_labels"], 0, 1, path("next_sentence_labels"), "a label other than 0 or 1")
        if self.dynamic:
            return
        counts = np.asarray(arrays["masked_lm_counts"])
        _in_range(counts, 0, P, path("masked_lm_counts"), f"a prediction count above {P}")
        _in_range(arrays["masked_lm_ids"], 0, V - 1, path("masked_lm_ids"),
                  f"token ids beyond its {V}-token vocabulary")
        unused = np.arange(P)[None, :] >= counts[:, None]  # the padding slots of each instance

        def within(positions):  # a batch is cut to its longest instance: a position past it fails mid-run
            return (positions >= 0) & (positions < lengths[:, None])

        _refuse_first(within(np.asarray(arrays["masked_lm_positions"])) | unused, path("masked_lm_positions"),
                      "a prediction position outside its instance")
        if SPAN_FIELD in arrays:
            spans = np.asarray(arrays[SPAN_FIELD])
            _refuse_first((within(spans[..., 0]) & within(spans[..., 1])) | unused, path(SPAN_FIELD),
                          "a span boundary outside its instance")

    @cached_property
    def vocab(self):
        """The folder's vocab.txt, which must have meta.json's vocab_size tokens."""
        from ..tokenization import Vocab
        path = os.path.join(self.folder, "vocab.txt")
        vocab = Vocab.load(path)
        if len(vocab) != self.meta["vocab_size"]:
            raise ValueError(f"{path}: has {len(vocab)} tokens, but meta.json says the instances use a "
                             f"{self.meta['vocab_size']}-token vocabulary")
        return vocab

    def __len__(self):
        return int(self.offsets[-1])

    def rows(self, indices) -> dict[str, np.ndarray]:
        """The stored fields of these instances (global indices), stacked in the order given."""
        indices = np.asarray(indices, dtype=np.int64)
        shard = np.searchsorted(self.offsets, indices, side="right") - 1
        out = {}
        for s in np.unique(shard):  # one fancy-indexed read per shard and field
            here = np.nonzero(shard == s)[0]
            local = indices[here] - self.offsets[s]
            for f, array in self.shards[s].items():
                if f not in out:
                    out[f] = np.empty((len(indices),) + array.shape[1:], array.dtype)
                out[f][here] = array[local]
        return out

    def batch(self, indices, mask_fn=None) -> dict:
        """input_ids, token_type_ids, attention_mask, masked_lm_positions, masked_lm_ids,
        masked_lm_weights, next_sentence_labels, cut to the batch's longest instance; and
        masked_lm_boundaries (batch, P, 2) where the folder has spans.

        With dynamic masking `mask_fn(input_ids, lengths) -> (input_ids, positions, ids, counts)`
        (numpy, one fresh draw) masks the original tokens first."""
        import torch
        r = self.rows(indices)
        if r["input_ids"].max(initial=0) >= self.meta["vocab_size"]:  # else an opaque index error in the model
            raise ValueError(f"{self.folder}: instances hold token ids beyond its {self.meta['vocab_size']}-token "
                             "vocabulary; the shards are corrupt")
        if self.dynamic:
            if mask_fn is None:
                raise ValueError(f"{self.folder} holds unmasked instances (dynamic masking): pass mask_fn")
            r["input_ids"], r["masked_lm_positions"], r["masked_lm_ids"], r["masked_lm_counts"] = \
                mask_fn(r["input_ids"].astype(np.int64), r["lengths"])
        width = int(r["lengths"].max())
        P = r["masked_lm_positions"].shape[1]
        spans = {SPAN_FIELD: torch.from_numpy(r[SPAN_FIELD].astype(np.int64))} if SPAN_FIELD in r else {}
        return {**spans, "input_ids": torch.from_numpy(r["input_ids"][:, :width].astype(np.int64)),
                "token_type_ids": torch.from_numpy(r["segment_ids"][:, :width].astype(np.int64)),
                "attention_mask": torch.from_numpy(np.arange(width)[None, :] < r["lengths"][:, None]).long(),
                "masked_lm_positions": torch.from_numpy(r["masked_lm_positions"].astype(np.int64)),
                "masked_lm_ids": torch.from_numpy(r["masked_lm_ids"].astype(np.int64)),
                "masked_lm_weights": torch.from_numpy(
                    (np.arange(P)[None, :] < r["masked_lm_counts"][:, None]).astype(np.float32)),
                "next_sentence_labels": torch.from_numpy(r["next_sentence_labels"].astype(np.int64))}


# The dtypes ShardWriter writes (the id fields: id_dtype of the vocabulary size)
ID_FIELDS = ("input_ids", "masked_lm_ids")
FIELD_DTYPES = {"segment_ids": np.uint8, "lengths": np.int16, "next_sentence_labels": np.uint8,
                "masked_lm_positions": np.int16, "masked_lm_counts": np.uint8, SPAN_FIELD: np.int16}


def _in_range(values, low: int, high: int, path, what: str):
    """Every value from low to high, or a ValueError naming the file and the first instance holding another."""
    values = np.asarray(values)
    if values.size and (values.min() < low or values.max() > high):
        _refuse_first((values >= low) & (values <= high), path, what)


def _refuse_first(ok: np.ndarray, path, what: str):
    """A ValueError naming the file and the first instance (row) where `ok` is not all True, if any."""
    if not ok.all():
        row = int(np.argmin(ok.reshape(len(ok), -1).all(axis=1)))
        raise ValueError(f"{path}: {what} in instance {row}; the shard is corrupt")


META_FIELDS = {"max_seq_length": int, "max_predictions_per_seq": int, "vocab_size": int, "dynamic_masking": bool,
               "nsp": bool, "shards": list}


def _checked_meta(meta: dict, path) -> dict:
    """meta.json as written by write_meta, or a ValueError naming the file and what is wrong."""
    wrong = [k for k, kind in META_FIELDS.items()
             if not isinstance(meta.get(k), kind) or kind is int and isinstance(meta.get(k), bool)]
    if not wrong:
        wrong = [f"shards[{i}]" for i, s in enumerate(meta["shards"])
                 if not (isinstance(s, dict) and isinstance(s.get("name"), str) and type(s.get("instances")) is int
                         and s["instances"] >= 0)]
    if not wrong and not (meta["max_seq_length"] > 0 and meta["vocab_size"] > 0 and meta["shards"]):
        wrong = ["max_seq_length, vocab_size or shards (empty or zero)"]
    if not wrong and not isinstance(meta.get("settings", {}), dict):
        wrong = ["settings"]
    if not wrong and not (meta["max_seq_length"] <= 32767 and 0 <= meta["max_predictions_per_seq"] <= 255):
        wrong = ["max_seq_length or max_predictions_per_seq (beyond what the shards' int16 and uint8 fields hold)"]
    if wrong:
        raise ValueError(f"{path}: not a create-pretraining-data meta.json (missing or wrong: {', '.join(wrong)})")
    return meta
