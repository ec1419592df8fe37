"""Extractive question answering on SQuAD v1.1 / v2.0, as run_squad.py does it.

    SQuAD JSON -> SquadExample -> windows of [CLS] question [SEP] context [SEP] -> start/end logits
    -> best span per question (bertlab.inference.qa) -> exact match / F1 (squad_metrics)

A context longer than the model takes is read through overlapping windows (run_squad's doc_stride,
`windows.py`); each window is one feature. Its targets are the token positions of the answer's
first and last tokens, or 0 (the [CLS] token) when the question has no answer (SQuAD 2.0) or the
answer is not wholly inside that window.

The answer's tokens are those whose character offsets overlap the answer's characters. The
tokenizer's offsets make this exact, so run_squad's `_improve_answer_span` (a search for the
re-tokenised answer text inside the whitespace word span) is not needed.
"""
import json
import sys
from dataclasses import dataclass, field
from typing import ClassVar

import torch
import torch.nn.functional as F

from ..inference.qa import QaSettings, answer_questions
from ..validate import check_number, positive_int
from .squad_metrics import squad_evaluate
from .task import Task
from .windows import is_max_context, sliding_windows

NO_TARGET = -100  # an answer we could not locate: the loss ignores it (cross_entropy's ignore_index)

__all__ = ["NO_TARGET", "QuestionAnsweringTask", "SquadExample", "answer_token_span", "featurize_squad",
           "read_squad", "unfound_answer_ids"]


# --- reading ---------------------------------------------------------------------------------------
@dataclass
class SquadExample:
    qas_id: str
    question: str
    context: str
    answers: list[tuple[str, int]]  # (text, character start in context); empty when unanswerable
    is_impossible: bool = False

    def found_answers(self) -> list[tuple[str, int]]:
        """The answers whose text really is at their answer_start (the ones a model can point at)."""
        return [(t, s) for t, s in self.answers if s >= 0 and self.context[s:s + len(t)] == t]


def read_squad(path) -> list[SquadExample]:
    """Every question of a SQuAD v1.1 / v2.0 file. Malformed input raises ValueError naming the file
    and the place (data[i].paragraphs[j].qas[k]); answers not found at their answer_start are
    counted on stderr (evaluation still scores against their text; training skips those questions).
    A question without "answers" is read as unlabelled (for prediction)."""
    data = _require(_load_json(path), "data", list, f"{path}: top level")
    examples = []
    for i, article in enumerate(data):
        paragraphs = _require(article, "paragraphs", list, f"{path}: data[{i}]")
        for j, paragraph in enumerate(paragraphs):
            examples += _paragraph_examples(paragraph, f"{path}: data[{i}].paragraphs[{j}]")
    if not examples:
        raise ValueError(f"{path}: no questions in the file")
    _check_unique_ids(examples, path)
    _report_unfound(examples, path)
    return examples


def unfound_answer_ids(examples: list[SquadExample]) -> list[str]:
    """Ids of the questions with at least one answer not at its answer_start."""
    return [e.qas_id for e in examples if len(e.found_answers()) < len(e.answers)]


def _load_json(path):
    with open(path, "rb") as f:
        raw = f.read()
    if not raw.strip():
        raise ValueError(f"{path}: the file is empty (or blank)")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not valid UTF-8 (byte offset {e.start})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") from None


def _require(obj, key: str, kind: type, where: str):
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected a JSON object, found {type(obj).__name__}")  # noqa: TRY004 (bad file)
    if key not in obj:
        raise ValueError(f"{where}: missing {key!r}")
    if not isinstance(obj[key], kind) or (isinstance(obj[key], bool) and kind is not bool):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise ValueError(f"{where}: {key!r} should be {names}, found {type(obj[key]).__name__}")
    return obj[key]


def _paragraph_examples(paragraph, where: str) -> list[SquadExample]:
    context = _require(paragraph, "context", str, where)
    examples = []
    for k, qa in enumerate(_require(paragraph, "qas", list, where)):
        here = f"{where}.qas[{k}]"
        qas_id = str(_require(qa, "id", (str, int), here))
        here += f" (id {qas_id})"
        answers = [_answer(a, f"{here}.answers[{n}]") for n, a in enumerate(_optional_list(qa, "answers", here))]
        is_impossible = bool(qa.get("is_impossible", False))
        if is_impossible and answers:
            raise ValueError(f"{here}: is_impossible but has {len(answers)} answer(s)")
        examples.append(SquadExample(qas_id, _require(qa, "question", str, here), context, answers, is_impossible))
    return examples


def _answer(answer, where: str) -> tuple[str, int]:
    return _require(answer, "text", str, where), _require(answer, "answer_start", int, where)


def _optional_list(obj, key: str, where: str) -> list:
    return _require(obj, key, list, where) if key in obj else []


def _check_unique_ids(examples, path):
    seen = set()
    for e in examples:
        if e.qas_id in seen:
            raise ValueError(f"{path}: question id {e.qas_id!r} appears twice (answers are matched by id)")
        seen.add(e.qas_id)


def _report_unfound(examples, path):
    ids = unfound_answer_ids(examples)
    if ids:
        n_answers = sum(len(e.answers) for e in examples)
        print(f"{path}: {len(ids)} question(s) of {len(examples)} have an answer whose text is not at its "
              f"answer_start ({n_answers} answers in all; ids: {', '.join(ids[:5])}{', ...' if len(ids) > 5 else ''}); "
              f"evaluation scores them by text, training skips those with no answer found", file=sys.stderr)


# --- features --------------------------------------------------------------------------------------


def answer_token_span(offsets: list[tuple[int, int]], char_start: int, char_end: int) -> tuple[int, int] | None:
    """First and last token whose characters overlap context[char_start:char_end]; None if none do."""
    inside = [i for i, (s, e) in enumerate(offsets) if s < char_end and e > char_start]
    return (inside[0], inside[-1]) if inside else None


@dataclass
class _Question:
    """One example tokenised: what every window of it shares."""
    ids: list[int]
    context_ids: list[int]
    offsets: list[tuple[int, int]]
    answer: tuple[int, int] | None  # context token span; None: no answer (SQuAD 2.0)
    windows: list = field(default_factory=list)


def featurize_squad(examples: list[SquadExample], tokenizer, max_seq_length: int = 384, doc_stride: int = 128,
                    max_query_length: int = 64) -> list[dict]:
    """One feature per window of each example, in example order (see the module docstring)."""
    features, untrainable = [], []
    for index, example in enumerate(examples):
        question = _tokenize(example, tokenizer, max_query_length)
        if question.answer == (NO_TARGET, NO_TARGET):
            untrainable.append(example.qas_id)
        size = max_seq_length - len(question.ids) - 3
        if size < 1:
            raise ValueError(f"question {example.qas_id}: max_seq_length {max_seq_length} leaves no room for the "
                             f"context after its {len(question.ids)} tokens (max_query_length {max_query_length}) "
                             f"and 3 special tokens")
        question.windows = sliding_windows(len(question.context_ids), size, doc_stride)
        features += [_window_feature(index, question, j, tokenizer) for j in range(len(question.windows))]
    if untrainable:
        print(f"squad: {len(untrainable)} answerable question(s) have no answer span in their context "
              f"(ids: {', '.join(untrainable[:5])}{', ...' if len(untrainable) > 5 else ''}); "
              f"their features carry no target and the loss skips them", file=sys.stderr)
    return features


def _tokenize(example: SquadExample, tokenizer, max_query_length: int) -> _Question:
    ids = tokenizer.tokenize_ids(example.question)[:max_query_length]
    context_ids, offsets = tokenizer.tokenize_with_offsets(example.context)
    return _Question(ids, context_ids, offsets, _target_span(example, offsets))


def _target_span(example: SquadExample, offsets) -> tuple[int, int] | None:
    """The first locatable answer's token span (run_squad trains on the first answer)."""
    if example.is_impossible:
        return None
    for text, start in example.found_answers():
        span = answer_token_span(offsets, start, start + len(text))
        if span is not None:
            return span
    return NO_TARGET, NO_TARGET


def _window_feature(example_index: int, question: _Question, j: int, tokenizer) -> dict:
    window = question.windows[j]
    stop = window.start + window.length
    head = len(question.ids) + 2  # [CLS] question [SEP]
    return {
        "input_ids": [tokenizer.cls_token_id, *question.ids, tokenizer.sep_token_id,
                      *question.context_ids[window.start:stop], tokenizer.sep_token_id],
        "token_type_ids": [0] * head + [1] * (window.length + 1),
        "example_index": example_index,
        "window_index": j,
        **_positions(question.answer, window, head),
        "token_offsets": [None] * head + question.offsets[window.start:stop] + [None],
        "token_is_max_context": [False] * head + [is_max_context(question.windows, j, p)
                                                  for p in range(window.start, stop)] + [False],
    }


def _positions(answer, window, head: int) -> dict:
    if answer is None:
        start = end = 0
    elif answer[0] == NO_TARGET:
        start = end = NO_TARGET
    elif window.start <= answer[0] and answer[1] < window.start + window.length:
        start, end = answer[0] - window.start + head, answer[1] - window.start + head
    else:
        start = end = 0  # the answer is cut by or outside this window: train it to point at [CLS]
    return {"start_position": start, "end_position": end}


class QuestionAnsweringTask(Task):
    """SQuAD v1.1 (every question answered from its context) or v2.0 (`version_2_with_negative`:
    some questions have no answer, predicted as "")."""

    name, metric, per_token_outputs = "squad", "f1", True
    min_seq_length = 5  # [CLS] a question piece [SEP] a context piece [SEP]
    defaults: ClassVar[dict] = {"version_2_with_negative": False, "doc_stride": None, "max_query_length": 64,
                                 "n_best_size": 20, "max_answer_length": 30, "null_score_diff_threshold": 0.0}

    def __init__(self, labels: list[str] | None = None, max_seq_length: int = 384, **options):
        unknown = sorted(set(options) - set(self.defaults))
        if unknown:
            raise ValueError(f"QuestionAnsweringTask: unknown option(s) {unknown}; known: {sorted(self.defaults)}")
        options = {**self.defaults, **options}
        for name in ("max_query_length", "n_best_size", "max_answer_length"):
            positive_int(name, options[name])
        check_number("null_score_diff_threshold", options["null_score_diff_threshold"])
        super().__init__(labels, max_seq_length, **options)
        if self.options["doc_stride"] is None:  # run_squad's 128, or half a window for shorter inputs
            self.options["doc_stride"] = min(128, max_seq_length // 2)

    def read(self, path) -> list[SquadExample]:
        examples = read_squad(path)
        impossible = sum(e.is_impossible for e in examples)
        if impossible and not self.options["version_2_with_negative"]:
            raise ValueError(f"{path}: {impossible} question(s) are marked is_impossible (SQuAD 2.0); "
                             f"set version_2_with_negative=True to train or evaluate on them")
        return examples

    def is_labelled(self, examples: list[SquadExample]) -> bool:
        """Gold answers (or, in SQuAD 2.0, a question marked unanswerable) on every question: the base
        check looks for a `label`, which SQuAD examples do not have, so a labelled test file was
        predicted and never scored ("test": {})."""
        return bool(examples) and all(e.answers or e.is_impossible for e in examples)

    def featurize(self, examples: list[SquadExample], tokenizer) -> list[dict]:
        o = self.options
        return featurize_squad(examples, tokenizer, self.max_seq_length, o["doc_stride"], o["max_query_length"])

    def target_fields(self) -> list[str]:
        return ["start_position", "end_position"]

    def loss(self, outputs, batch: dict) -> torch.Tensor:
        """run_squad's loss: the mean of the start and end cross-entropies over the batch's windows."""
        start_logits, end_logits = outputs
        return (_mean_cross_entropy(start_logits, batch["start_position"])
                + _mean_cross_entropy(end_logits, batch["end_position"])) / 2

    def evaluate(self, examples: list[SquadExample], features: list[dict], outputs: list) -> dict[str, float]:
        answers = self._answers(examples, features, outputs)
        gold = {e.qas_id: [text for text, _ in e.answers] for e in examples}
        predicted = {e.qas_id: a.answer for e, a in zip(examples, answers)}
        return squad_evaluate(gold, predicted, breakdown=self.options["version_2_with_negative"])

    def predictions(self, examples: list[SquadExample], features: list[dict], outputs: list) -> list[dict]:
        v2 = self.options["version_2_with_negative"]
        return [{"id": e.qas_id, "answer": a.answer, "nbest": a.nbest, **({"null_score": a.null_score} if v2 else {})}
                for e, a in zip(examples, self._answers(examples, features, outputs))]

    def _answers(self, examples, features, outputs):
        settings = QaSettings(**{k: self.options[k] for k in ("n_best_size", "max_answer_length",
                                                              "version_2_with_negative", "null_score_diff_threshold")})
        return answer_questions([e.context for e in examples], features, outputs, settings)


def _mean_cross_entropy(logits: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Mean over the windows that have a target; 0 (not NaN) for a batch where none has."""
    total = F.cross_entropy(logits.float(), positions, ignore_index=NO_TARGET, reduction="sum")
    return total / (positions != NO_TARGET).sum().clamp(min=1)
