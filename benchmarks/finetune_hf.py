"""HF Trainer's side of bench_finetune.py for token classification and extractive QA: the inputs as
HF's run_ner.py / run_qa.py examples build them, and the words' tags and the answers' text back
from the logits, scored with the same metrics as bertlab's side (conlleval entity F1; SQuAD EM/F1).

    features_ner(tokenizer, words, tags, labels, max_length)   # first piece labelled, others -100
    features_qa(tokenizer, examples, max_length, doc_stride)   # windows, answer token positions
    tags_from_logits(...), answers_from_logits(...)            # outputs -> words' tags, answers
    in_dataset_order(predictions, inputs, features)            # evaluation rows back in feature order
"""
import numpy as np

IGNORE = -100


def features_ner(tokenizer, sentences, labels: list[str], max_length: int) -> list[dict]:
    """One feature per (words, tags) sentence: each word's label on its first piece (run_ner.py's
    label_all_tokens=False), -100 elsewhere; `word_ids` kept apart for decoding."""
    features = []
    for words, tags in sentences:
        encoded = tokenizer(words, is_split_into_words=True, truncation=True, max_length=max_length)
        word_ids, previous, label_ids = encoded.word_ids(), None, []
        for word in word_ids:
            label_ids.append(IGNORE if word is None or word == previous else labels.index(tags[word]))
            previous = word
        features.append({**encoded, "labels": label_ids})
    return features


def tags_from_logits(logits, features, sentences, labels: list[str]) -> list[list[str]]:
    """Each word's tag, argmax at its first piece; a word cut off by truncation gets O."""
    predicted = []
    for row, feature, (words, _) in zip(logits, features, sentences):
        first_pieces = [p for p, label in enumerate(feature["labels"]) if label != IGNORE]  # one per word kept
        tags = [labels[int(row[p].argmax())] for p in first_pieces]
        predicted.append(tags + ["O"] * (len(words) - len(tags)))
    return predicted


def features_qa(tokenizer, examples, max_length: int, doc_stride: int | None,
                overlap: int | None = None) -> tuple[list[dict], list[dict]]:
    """(model inputs, decoding info) per window of `[CLS] question [SEP] context [SEP]`, as run_qa.py's
    prepare_train_features: the answer's first and last token, or [CLS] when the window misses it.
    doc_stride is bertlab's (the step between windows); HF's `stride` is the overlap, so each
    question gets overlap = its window's context pieces - doc_stride. `overlap` instead passes
    one overlap for every question, as run_qa.py's --doc_stride does."""
    inputs, info = [], []
    for index, example in enumerate(examples):
        question_length = len(tokenizer(example.question, add_special_tokens=False)["input_ids"])
        window = max_length - question_length - 3
        stride = overlap if overlap is not None else max(window - doc_stride, 0)
        encoded = tokenizer(example.question, example.context, truncation="only_second", max_length=max_length,
                            stride=stride, return_overflowing_tokens=True,
                            return_offsets_mapping=True)
        text, start_char = example.answers[0]
        end_char = start_char + len(text)
        for j in range(len(encoded["input_ids"])):
            offsets, sequence = encoded["offset_mapping"][j], encoded.sequence_ids(j)
            context = [i for i, s in enumerate(sequence) if s == 1]
            inside = [i for i in context if offsets[i][0] < end_char and offsets[i][1] > start_char]
            whole = inside and offsets[context[0]][0] <= start_char and offsets[context[-1]][1] >= end_char
            start, end = (inside[0], inside[-1]) if whole else (0, 0)
            inputs.append({"input_ids": encoded["input_ids"][j], "token_type_ids": encoded["token_type_ids"][j],
                           "attention_mask": encoded["attention_mask"][j], "start_positions": start,
                           "end_positions": end})
            info.append({"example_index": index, "context": context, "offsets": offsets})
    return inputs, info


def answers_from_logits(start_logits, end_logits, info, examples, max_answer_length=30,
                        n_best_size=20) -> dict[str, str]:
    """{question id: answer text}, as run_qa.py's postprocess_qa_predictions: in each window the
    `n_best_size` highest starts and ends (over the whole row), kept when both are context tokens,
    start <= end and the span is at most max_answer_length tokens; over all of a question's windows
    (no max-context rule), the span of highest start + end logit."""
    best = {}
    for start_row, end_row, window in zip(start_logits, end_logits, info):
        start_row, end_row = np.asarray(start_row), np.asarray(end_row)
        context, offsets = set(window["context"]), window["offsets"]
        example = examples[window["example_index"]]
        for i in np.argsort(start_row)[::-1][:n_best_size]:
            for j in np.argsort(end_row)[::-1][:n_best_size]:
                if i not in context or j not in context or j < i or j - i + 1 > max_answer_length:
                    continue
                score = start_row[i] + end_row[j]
                if example.qas_id not in best or score > best[example.qas_id][0]:
                    best[example.qas_id] = (score, example.context[offsets[i][0]:offsets[j][1]])
    return {qid: text for qid, (_, text) in best.items()}


def in_dataset_order(predictions, inputs, features):
    """HF's evaluation outputs in the order of `features`. With group_by_length, transformers 5
    length-groups the evaluation batches too, so its rows come in the sampler's order; each row is
    matched to its feature by its input ids (padded with 0, and with -100 across batches; identical
    inputs are interchangeable). Needs TrainingArguments(include_for_metrics=["inputs"])."""
    rows = {}
    for k, ids in enumerate(inputs):
        rows.setdefault(tuple(int(x) for x in ids if x > 0), []).append(k)
    order = [rows[tuple(f["input_ids"])].pop() for f in features]
    return tuple(p[order] for p in predictions) if isinstance(predictions, tuple) else predictions[order]
