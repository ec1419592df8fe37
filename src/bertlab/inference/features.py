"""google-research/bert's extract_features.py: every token's vectors from chosen layers.

Pipeline as in google's script: lines -> `InputExample` (a line "A ||| B" is a sentence pair)
-> `InputFeatures` ([CLS] A [SEP] (B [SEP]), truncated to max_seq_length) -> the model's hidden
states -> one (tokens, layers, hidden) array per line. Word-level vectors average the vectors
of each word's WordPiece pieces, words being the basic tokenizer's tokens (punctuation split off).

Layer numbers are google's: 0 is the first Transformer layer, -1 the last; our `hidden_states`
start with the embeddings output, so layer k sits at hidden_states[k + 1].
"""
import json
from dataclasses import dataclass, field

import numpy as np
import torch

from ..progress import progress_bar
from ..tokenization.encoding import truncate_seq_pair
from ..tokenization.vocab import UNK
from ..validate import positive_int
from .embed import check_finite, length_sorted_batches, padded_tensors

PAIR_SEPARATOR = " ||| "


@dataclass
class InputExample:
    unique_id: int
    text_a: str
    text_b: str | None = None


@dataclass
class InputFeatures:
    """One line as model input, plus the word each token belongs to (for --words)."""
    unique_id: int
    tokens: list[str]
    input_ids: list[int]
    input_type_ids: list[int]
    words: list[str] = field(default_factory=list)  # the word texts, [CLS]/[SEP] as words of their own
    word_index: list[int] = field(default_factory=list)  # per token: its word's index in `words`
    truncated: bool = False


def read_examples(lines) -> list[InputExample]:
    """One example per line; "A ||| B" (the last " ||| ", as google's greedy regex) is a pair."""
    examples = []
    for i, line in enumerate(lines):
        a, sep, b = line.rpartition(PAIR_SEPARATOR)
        examples.append(InputExample(i, a, b) if sep else InputExample(i, line))
    return examples


def hidden_state_indices(layers, num_layers: int) -> list[int]:
    """google layer numbers (0 = first layer, -1 = last) -> indices into BertOutput.hidden_states."""
    out = []
    for k in layers:
        if not -num_layers <= k < num_layers:
            raise ValueError(f"layer {k}: the model has {num_layers} layers, so a layer is a number from "
                             f"{-num_layers} to {num_layers - 1} (-1 is the last layer, 0 the first)")
        out.append(k + 1 if k >= 0 else k)
    return out


def text_words(tokenizer, text: str) -> list[tuple[int, int, int, int]]:
    """(token id, word number, start, end) for each WordPiece token of `text`: words numbered as
    the basic tokenizer splits them (pieces of one word share a number), text[start:end] the
    characters the token came from. A byte-level BPE (ModernBERT's tokenizer.json) numbers the
    words of its own pre-tokenizer (tokenization.tokenizer_json.TokenizerJson.tokenize_with_words)."""
    if hasattr(tokenizer, "tokenize_with_words"):
        return tokenizer.tokenize_with_words(text)
    basic, wordpiece = tokenizer.basic_tokenizer, tokenizer.wordpiece_tokenizer
    ids, offsets = tokenizer.tokenize_with_offsets(text)
    counts = [len(wordpiece.split_word(token) or [UNK])
              for word in basic.split_words(text) for token in basic.word_to_tokens(word)]
    numbers = [n for n, count in enumerate(counts) for _ in range(count)]
    if len(numbers) != len(ids):  # the two tokenizer paths disagree: a bug, not a user error
        raise RuntimeError(f"{text!r}: {len(ids)} tokens but {len(numbers)} word pieces")
    return [(i, n, start, end) for i, n, (start, end) in zip(ids, numbers, offsets)]


def convert_example(example: InputExample, tokenizer, max_seq_length: int) -> InputFeatures:
    """[CLS] A [SEP] (B [SEP]), truncated as google does: A alone to max_seq_length - 2 tokens, a
    pair longest first to max_seq_length - 3."""
    a = text_words(tokenizer, example.text_a)
    b = None if example.text_b is None else text_words(tokenizer, example.text_b)
    n_before = len(a) + len(b or [])
    if b is None:
        del a[max_seq_length - 2:]
    else:
        truncate_seq_pair(a, b, max_seq_length - 3)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    ids = [cls, *(t[0] for t in a), sep]
    types = [0] * len(ids)
    if b is not None:
        ids += [*(t[0] for t in b), sep]
        types += [1] * (len(b) + 1)
    features = InputFeatures(example.unique_id, tokenizer.convert_ids_to_tokens(ids), ids, types,
                             truncated=len(a) + len(b or []) < n_before)
    add_words(features, [(example.text_a, a), (example.text_b, b)])
    return features


def add_words(features: InputFeatures, texts_and_pieces) -> None:
    """Fill features.words / word_index; [CLS] and each [SEP] are words of their own. A word cut
    by truncation keeps the pieces that are left."""
    words, index = ["[CLS]"], [0]
    for text, pieces in texts_and_pieces:
        if pieces is None:
            continue
        spans = {}  # word number -> (start of its first piece, end of its last)
        for _, n, start, end in pieces:
            spans[n] = (spans.get(n, (start, end))[0], end)
        number_to_index = {n: len(words) + k for k, n in enumerate(spans)}
        # strip: a byte-level word may start with a token of its space alone
        words += [text[start:end].strip() for start, end in spans.values()]
        index += [number_to_index[n] for _, n, _, _ in pieces]
        words.append("[SEP]")
        index.append(len(words) - 1)
    features.words, features.word_index = words, index


@torch.inference_mode()
def extract(model, features, layers, batch_size=32, progress=False, pad_id=0) -> list[np.ndarray]:
    """One float32 (tokens, len(layers), hidden) array per feature, in input order; NaN or infinity
    in them is an error."""
    positive_int("batch_size", batch_size)
    model.eval()
    device = next(model.parameters()).device
    indices = hidden_state_indices(layers, model.config.num_hidden_layers)
    lengths = [len(f.input_ids) for f in features]
    result = [None] * len(features)
    bar = progress_bar(total=len(features), unit="line", enabled=progress, desc="extract-features")
    # batch_size alone limits a batch: every sequence is at most max_seq_length tokens
    for batch in length_sorted_batches(lengths, batch_size, max_tokens=batch_size * max(lengths)):
        ids, mask = padded_tensors([features[i].input_ids for i in batch], pad_id)
        types, _ = padded_tensors([features[i].input_type_ids for i in batch])
        out = model(ids.to(device), token_type_ids=types.to(device), attention_mask=mask.to(device),
                    output_hidden_states=True)
        chosen = torch.stack([out.hidden_states[k] for k in indices], dim=2).float().cpu().numpy()
        for row, i in enumerate(batch):
            result[i] = chosen[row, : lengths[i]]
        bar.update(len(batch))
    bar.close()
    check_finite(result, "line")
    return result


def pool_words(values: np.ndarray, features: InputFeatures) -> np.ndarray:
    """(tokens, layers, hidden) -> (words, layers, hidden): the mean over each word's pieces."""
    index = np.asarray(features.word_index)
    sums = np.zeros((len(features.words),) + values.shape[1:], dtype=np.float64)
    np.add.at(sums, index, values)
    counts = np.bincount(index, minlength=len(features.words)).astype(np.float64)
    return (sums / counts[:, None, None]).astype(np.float32)


def units(features: InputFeatures, values: np.ndarray, words: bool):
    """(labels, vectors) of one line: its tokens, or (words=True) its words."""
    if words:
        return features.words, pool_words(values, features)
    return features.tokens, values


def jsonl_record(unique_id: int, labels, vectors: np.ndarray, layers, words=False) -> str:
    """One line of google's output.jsonl; values rounded to 6 decimals as google does. Word mode
    names the entry "word" instead of "token"."""
    key = "word" if words else "token"
    feats = [{key: label,
              "layers": [{"index": layer, "values": [round(x, 6) for x in vec[j].tolist()]}
                         for j, layer in enumerate(layers)]}
             for label, vec in zip(labels, vectors)]
    return json.dumps({"linex_index": unique_id, "features": feats}, ensure_ascii=False)


def write_jsonl(f, all_units, layers, words=False):
    for unique_id, (labels, vectors) in enumerate(all_units):
        f.write(jsonl_record(unique_id, labels, vectors, layers, words) + "\n")


def write_npz(f, all_units, layers):
    """Ragged lines as one flat array plus offsets: line i is values[offsets[i]:offsets[i + 1]]."""
    lengths = [len(labels) for labels, _ in all_units]
    np.savez(f, values=np.concatenate([v for _, v in all_units]).astype(np.float32),
             offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
             tokens=np.array([label for labels, _ in all_units for label in labels], dtype=str),
             layers=np.asarray(layers, dtype=np.int64))


FORMATS = (".jsonl", ".npz")


def check_format(output: str):
    if not output.endswith(FORMATS):
        hint = " (a .npy file holds one array; ragged lines need .npz)" if output.endswith(".npy") else ""
        raise ValueError(f"--output {output}: must end in .jsonl or .npz{hint}")


def last_layers(num_layers: int) -> list[int]:
    """The default layers: -1, -2, -3, -4, or every layer of a model with fewer than four."""
    return list(range(-1, -min(4, num_layers) - 1, -1))


@dataclass
class FeaturesReport:
    """What extract_features_file wrote: `vectors` rows (tokens or words) x len(layers), for `lines`
    lines; `truncated` are the line numbers (from 1) cut to max_seq_length."""
    output: str
    vectors: int
    lines: int
    layers: list
    words: bool
    max_seq_length: int
    truncated: list


def extract_features_file(model_dir: str, file: str, output: str, layers: list[int] | None = None,
                          max_seq_length: int | None = None, batch_size: int = 32, words: bool = False,
                          device: str = "auto", overwrite: bool = False, progress: bool = False) -> FeaturesReport:
    """google's extract_features.py on a file ('-': stdin) of lines ('A ||| B' is a pair): the hidden
    states of `layers` (default the last four) for every token, or word with `words`, written to
    OUTPUT.jsonl (google's layout) or OUTPUT.npz. Longer lines are truncated to max_seq_length
    (default 128, or the model's positions when fewer) and listed in the report."""
    from ..device import pick_device
    from ..interop.load import load_model_of
    from ..io import atomic_write, check_output_file, read_lines
    from .embed import check_max_seq_length
    check_format(output)
    examples = read_examples(read_lines(file))
    check_output_file(output, overwrite)
    loaded = load_model_of(model_dir, ("bert", "finetuned", "modernbert"), "extract-features")
    model, tokenizer = loaded.encoder, loaded.tokenizer
    config = model.config
    layers = layers or last_layers(config.num_hidden_layers)
    hidden_state_indices(layers, config.num_hidden_layers)  # fail before any work
    max_seq_length = check_max_seq_length(max_seq_length or min(128, config.max_position_embeddings), config,
                                          pairs=any(e.text_b is not None for e in examples))
    model = model.to(pick_device(device))
    features = [convert_example(e, tokenizer, max_seq_length) for e in examples]
    values = extract(model, features, layers, batch_size, progress=progress, pad_id=tokenizer.pad_token_id)
    all_units = [units(f, v, words) for f, v in zip(features, values)]
    if output.endswith(".jsonl"):
        atomic_write(output, lambda f: write_jsonl(f, all_units, layers, words))
    else:
        atomic_write(output, lambda f: write_npz(f, all_units, layers), mode="wb")
    return FeaturesReport(output, sum(len(labels) for labels, _ in all_units), len(features), layers, words,
                          max_seq_length, [f.unique_id + 1 for f in features if f.truncated])
