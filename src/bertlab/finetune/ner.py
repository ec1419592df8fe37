"""Token classification (NER, chunking, POS) from CoNLL-style files.

Examples: one sentence per run of non-blank lines, one `word ... tag` line per word (the first and the
last whitespace-separated columns; the middle ones, CoNLL-2003's POS and chunk tags, are ignored).

Features: every word is cut into WordPiece pieces; its label sits on its first piece and the other
pieces get -100, which the loss and the evaluation ignore, so each word is scored once whatever
its length in pieces. A word with no pieces (a lone control character) becomes [UNK] so that it too
gets a prediction.

Long sentences: a sentence of more than max_seq_length - 2 pieces is cut into run_squad's sliding
windows (windows.py, `doc_stride` pieces apart, by default half a window), each fed as
`[CLS] window [SEP]`. Training uses every window's labels. At prediction time a word seen by several
windows takes its tag from the one window where its first piece has max context (the most pieces
on its nearer side), so every word gets exactly one prediction. A feature records this in
`token_to_word`: at each position, the word whose prediction that position gives, else -1.
"""
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from ..io import decode_lines
from .entities import SCHEMES, entity_scores, tag_problem, token_accuracy
from .task import Task
from .windows import is_max_context, sliding_windows

DOCSTART = "-DOCSTART-"
IGNORE = -100  # label of positions without a target (cross_entropy's ignore_index)


class InputExample(NamedTuple):
    guid: str
    words: list[str]
    tags: list[str]
    lines: list[int] | None = None  # each word's line in its file, for error messages


# --- reading ----------------------------------------------------------------------------------------
def _numbered_lines(path):
    lines = decode_lines(Path(path).read_bytes(), path)  # empty or non-UTF-8 files: ValueError
    lines[0] = lines[0].removeprefix("\ufeff")  # a BOM would hide a first -DOCSTART- line
    return enumerate(lines, 1)


def _word_and_tag(path, n: int, columns: list[str], scheme: str) -> tuple[str, str]:
    if len(columns) < 2:
        raise ValueError(f"{path}:{n}: one column {columns[0]!r}; expected 'word ... tag' "
                         f"(or a blank line between sentences)")
    problem = tag_problem(columns[-1], scheme)
    if problem:
        raise ValueError(f"{path}:{n}: {problem}")
    return columns[0], columns[-1]


def _sentences(path, scheme: str):
    """Each sentence as a list of (line number, word, tag)."""
    sentence = []
    for n, line in _numbered_lines(path):
        columns = line.split()
        if columns and columns[0] != DOCSTART:
            sentence.append((n, *_word_and_tag(path, n, columns, scheme)))
        elif sentence:  # a blank line or a document start closes the sentence
            yield sentence
            sentence = []
    if sentence:
        yield sentence


def read_conll(path, scheme: str = "BIO") -> list[InputExample]:
    """The sentences of a CoNLL file; bad input is a ValueError naming the file, line and problem."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {sorted(SCHEMES)}, not {scheme!r}")
    name = os.path.basename(path)
    examples = [InputExample(f"{name}-{i}", [w for _, w, _ in s], [t for _, _, t in s], [n for n, _, _ in s])
                for i, s in enumerate(_sentences(path, scheme))]
    if not examples:
        raise ValueError(f"{path}: no sentences, only blank and {DOCSTART} lines")
    return examples


def _where(example: InputExample, word: int) -> str:
    line = f"line {example.lines[word]}, " if example.lines else ""
    return f"{line}sentence {example.guid}"


# --- features ---------------------------------------------------------------------------------------
def word_pieces(words: list[str], tokenizer) -> list[list[int]]:
    """The piece ids of each word; [UNK] for a word that has none."""
    pieces = tokenizer.tokenize_ids_batch(words, add_special_tokens=False)
    return [ids or [tokenizer.unk_token_id] for ids in pieces]


def _window_feature(pieces, labels, word_starts, windows, current: int, tokenizer) -> dict:
    w = windows[current]
    token_to_word = [-1] * (w.length + 2)
    for word, start in enumerate(word_starts):
        if w.start <= start < w.start + w.length and is_max_context(windows, current, start):
            token_to_word[start - w.start + 1] = word
    return {"input_ids": [tokenizer.cls_token_id, *pieces[w.start:w.start + w.length], tokenizer.sep_token_id],
            "token_type_ids": [0] * (w.length + 2),
            "label_ids": [IGNORE, *labels[w.start:w.start + w.length], IGNORE],
            "token_to_word": token_to_word}


def featurize_example(example: InputExample, label_map: dict[str, int], tokenizer,
                      max_seq_length: int, doc_stride: int | None = None) -> list[dict]:
    """The features (one per window) of one sentence, without `example_index`."""
    pieces, labels, word_starts = [], [], []
    for word, (tag, ids) in enumerate(zip(example.tags, word_pieces(example.words, tokenizer))):
        if tag not in label_map:
            raise ValueError(f"{_where(example, word)}: tag {tag!r} is not among the task's labels "
                             f"{list(label_map)} (check_labels reports all such tags)")
        word_starts.append(len(pieces))
        pieces += ids
        labels += [label_map[tag]] + [IGNORE] * (len(ids) - 1)
    size = max_seq_length - 2
    windows = sliding_windows(len(pieces), size, max(size // 2, 1) if doc_stride is None else doc_stride)
    return [_window_feature(pieces, labels, word_starts, windows, i, tokenizer) for i in range(len(windows))]


def word_predictions(examples: list[InputExample], features: list[dict], outputs: list) -> list[list[int]]:
    """Each word's label index, argmax of the logits at its first piece in its max-context window."""
    if len(features) != len(outputs):
        raise ValueError(f"{len(features)} features but {len(outputs)} outputs")
    chosen = [[None] * len(e.words) for e in examples]
    for feature, logits in zip(features, outputs):
        words = chosen[feature["example_index"]]
        for position, word in enumerate(feature["token_to_word"]):
            if word >= 0:
                words[word] = int(np.argmax(logits[position]))
    for example, words in zip(examples, chosen):
        if None in words:
            raise ValueError(f"{_where(example, words.index(None))}: no prediction for word "
                             f"{words.index(None)}; the features or outputs miss part of the sentence")
    return chosen


# --- the task ---------------------------------------------------------------------------------------
class TokenClassificationTask(Task):
    """One tag per word (CoNLL NER); options: `scheme` ("BIO" or "BIOES") and `doc_stride`."""

    name = "ner"
    metric = "f1"
    padded_fields = {"label_ids": IGNORE}
    per_token_outputs = True

    def __init__(self, labels: list[str] | None = None, max_seq_length: int = 128, *,
                 scheme: str = "BIO", doc_stride: int | None = None):
        if scheme not in SCHEMES:
            raise ValueError(f"ner: scheme must be one of {sorted(SCHEMES)}, not {scheme!r}")
        super().__init__(labels, max_seq_length, scheme=scheme, doc_stride=doc_stride)

    def read(self, path) -> list[InputExample]:
        return read_conll(path, self.options["scheme"])

    def fit_labels(self, train_examples: list[InputExample]) -> None:
        # "O" first, then sorted: the same label ids whatever the order of the training file.
        tags = {t for e in train_examples for t in e.tags}
        self.labels = ["O", *sorted(tags - {"O"})]

    def num_outputs(self) -> int:
        return len(self._known_labels())

    def _known_labels(self) -> list[str]:
        if not self.labels:
            raise ValueError("ner: no labels yet; call fit_labels on the training examples first")
        return self.labels

    def is_labelled(self, examples: list[InputExample]) -> bool:
        return all(e.tags is not None for e in examples)

    def check_labels(self, examples: list[InputExample], path) -> None:
        known, first_seen = set(self._known_labels()), {}
        for example in examples:
            for word, tag in enumerate(example.tags):
                if tag not in known and tag not in first_seen:
                    first_seen[tag] = _where(example, word)
        if first_seen:
            listing = "; ".join(f"{tag} ({where})" for tag, where in first_seen.items())
            raise ValueError(f"{path}: tags never seen in training: {listing}")

    def featurize(self, examples: list[InputExample], tokenizer) -> list[dict]:
        label_map = {label: i for i, label in enumerate(self._known_labels())}
        return [{**feature, "example_index": index}
                for index, example in enumerate(examples)
                for feature in featurize_example(example, label_map, tokenizer, self.max_seq_length,
                                                 self.options["doc_stride"])]

    def loss(self, outputs, batch: dict) -> torch.Tensor:
        labels = batch["label_ids"]
        if not (labels != IGNORE).any():  # a batch of continuation pieces only: no signal, not NaN
            return outputs.sum() * 0.0
        return F.cross_entropy(outputs.reshape(-1, outputs.size(-1)), labels.reshape(-1), ignore_index=IGNORE)

    def training_loss(self, model, batch: dict) -> torch.Tensor:
        """`loss` with the model computing logits at the labelled pieces alone (the last layer's
        projections and feed-forward network there only): the same value for less work."""
        labels = batch["label_ids"]
        scored = labels != IGNORE
        if not bool(scored.any()):
            return self.loss(self.forward(model, batch), batch)
        logits = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], selected=scored)
        return F.cross_entropy(logits, labels[scored])

    def _predicted_tags(self, examples, features, outputs) -> list[list[str]]:
        labels = self._known_labels()
        return [[labels[i] for i in words] for words in word_predictions(examples, features, outputs)]

    def evaluate(self, examples: list[InputExample], features: list[dict], outputs: list) -> dict[str, float]:
        gold, pred = [e.tags for e in examples], self._predicted_tags(examples, features, outputs)
        scores = entity_scores(gold, pred)
        return {"f1": scores["f1"], "precision": scores["precision"], "recall": scores["recall"],
                "accuracy": token_accuracy(gold, pred)}

    def predictions(self, examples: list[InputExample], features: list[dict], outputs: list) -> list[dict]:
        pred = self._predicted_tags(examples, features, outputs)
        return [{"words": e.words, "tags": tags} for e, tags in zip(examples, pred)]
