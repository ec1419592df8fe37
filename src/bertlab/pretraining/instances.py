"""Pretraining instances from raw text, as google-research/bert's create_pretraining_data.py.

The input: one sentence per line, a blank line between documents. Each document is cut into
instances ``[CLS] A [SEP] B [SEP]`` of up to ``max_seq_length`` pieces: sentences are gathered up
to a target length (10% of the time, ``short_seq_prob``, a random shorter one, so the model also
sees the short inputs of fine-tuning), split at a random sentence into A and B, and half of the
time B is replaced by sentences from a random other document (next-sentence prediction); a pair
that is too long loses pieces from its longer side, at the front or the back at random. Every
document is used ``dupe_factor`` times, each time with a different mask.

Given the same documents and ``random.Random(seed)``, ``create_training_instances`` calls the
generator exactly as google's does, so the instances are google's, piece for piece. The one
deliberate difference is scale: google reads the whole corpus into memory and draws random Bs from
all of it; create-pretraining-data works on chunks of documents (bounded memory, parallel
workers), so a random B comes from another document of the same chunk.

``--mode sop`` is ALBERT's sentence-order prediction instead of the next sentence: A and B are
always consecutive text of one document, and half of the pairs are swapped (label 1 = swapped).

``--mode full-sentences`` is RoBERTa's FULL-SENTENCES input instead: no B and no next-sentence
label; whole sentences are packed contiguously up to ``max_seq_length``, across document ends,
with a [SEP] where one document ends and the next begins.

Sentences are arrays of piece ids; with whole-word masking each carries parallel bytes of flags
(piece continues the word before it) that travels with the pieces through cutting and trimming.
"""
import os
import random
from array import array
from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..io import open_input, parse_json
from ..validate import check_fields, check_number, fraction, positive_int
from .masking import create_masked_lm_predictions, jieba_continues, ref_continues
from .shards import id_dtype
from .span_masking import MASKINGS, create_span_masked_lm_predictions
from ..tokenization import CLS, MASK, SEP

MODES = ("nsp", "sop", "full-sentences")
PAIR_MODES = ("nsp", "sop")  # instances [CLS] A [SEP] B [SEP] with a sentence-pair label


@dataclass(frozen=True)
class InstanceOptions:
    """google's flags (names as in create_pretraining_data.py), plus how to mask and pack."""
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 10
    do_whole_word_mask: bool = False
    mode: str = "nsp"
    dynamic_masking: bool = False
    masking: str = "token"  # "span" (SpanBERT) or "ernie" (a segmenter's words) mask whole-word spans

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {self.mode!r}")
        if self.masking not in MASKINGS:
            raise ValueError(f"masking must be one of {MASKINGS}, not {self.masking!r}")
        if self.masking != "token" and self.dynamic_masking:
            raise ValueError(f"masking {self.masking!r} needs static masking: the spans and their boundaries "
                             "are drawn at data-creation time")
        check_fields(self, {"max_seq_length": positive_int, "max_predictions_per_seq": positive_int,
                            "masked_lm_prob": probability, "short_seq_prob": fraction, "dupe_factor": positive_int})
        smallest = 5 if self.mode in PAIR_MODES else 3  # room for [CLS] A [SEP] B [SEP] with A, B >= 1
        if not smallest <= self.max_seq_length <= 32767:
            raise ValueError(f"max_seq_length {self.max_seq_length}: must be between {smallest} and 32767")
        if not self.max_predictions_per_seq <= 255:  # the shards store the count as uint8
            raise ValueError(f"max_predictions_per_seq {self.max_predictions_per_seq}: must be between 1 and 255")

    @property
    def words(self) -> bool:
        """Whether word boundaries are needed: whole-word masking, or spans of whole words."""
        return self.do_whole_word_mask or self.masking != "token"


def probability(name, value):
    """A share that must leave something to do: more than 0, at most 1."""
    return check_number(name, value, minimum=0, exclusive_minimum=True, maximum=1)


class TrainingInstance(NamedTuple):
    """google's TrainingInstance, in piece ids; ``len_a`` = pieces of segment 0 ([CLS] A [SEP])."""
    tokens: array
    len_a: int
    is_random_next: bool
    masked_lm_positions: list
    masked_lm_labels: list
    masked_lm_boundaries: list | None = None  # span masking: (left, right) of each prediction's span


# -- reading the corpus ---------------------------------------------------------------------------

class RawSentence(NamedTuple):
    text: str
    ref: list | None = None  # Chinese whole-word reference: positions in [CLS] + the line's pieces
    where: str = ""  # "ref-file:line" of ``ref``, for errors


def check_text_files(paths):
    """Every path an existing file (not a folder): all are named before any work starts."""
    for path in paths:
        if os.path.isdir(path):
            raise IsADirectoryError(f"{path}: is a folder; give text files")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such file")


def corpus_lines(path, encoding_errors: str = "strict", counts: Counter | None = None):
    """(line number, text) of each line of a UTF-8 file, read in bounded memory.

    Lines end at "\\n", "\\r\\n" or a lone "\\r", as google's reader (universal newlines) sees
    them. Bytes that are not UTF-8 are an error naming the file, line and byte offset, or with
    ``encoding_errors="replace"`` become U+FFFD (which the tokenizer drops), counted in
    ``counts["encoding_replacements"]``. ``counts["bytes_read"]`` follows the reading."""
    counts = Counter() if counts is None else counts
    check_text_files([path])
    offset = 0
    with open_input(path) as f:  # a regular file: a named pipe would block, a device never end
        for number, raw in enumerate(f, 1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                if encoding_errors != "replace":
                    raise ValueError(f"{path}:{number}: not valid UTF-8 (byte {raw[e.start]:#04x} at offset "
                                     f"{offset + e.start}); --encoding-errors replace turns such bytes "
                                     "into U+FFFD and counts them") from None
                text = raw.decode("utf-8", "replace")
                counts["encoding_replacements"] += text.count("\ufffd") - raw.count("\ufffd".encode())
            offset += len(raw)
            counts["bytes_read"] += len(raw)
            text = text[:-1] if text.endswith("\n") else text
            text = text[:-1] if text.endswith("\r") else text
            for piece in text.split("\r"):
                yield number, piece


def _ref_lines(path):
    """(line number, positions) of a Chinese reference file: one JSON list of ints a line."""
    for number, text in corpus_lines(path):
        try:  # parse_json: depth-limited (a deeply nested line would exhaust Python's recursion), no NaN
            positions = parse_json(text, "", expect=None)
        except ValueError as e:
            reason = str(e).lstrip(":0123456789 ")  # parse_json's message without its (empty) place
            raise ValueError(f"{path}:{number}: not a JSON list ({reason})") from None
        if not isinstance(positions, list) or not all(isinstance(p, int) and p >= 1 for p in positions):
            raise ValueError(f"{path}:{number}: expected a JSON list of piece positions >= 1 "
                             f"(position 0 is [CLS]), got {text[:60]!r}")
        yield number, positions


def read_documents(paths, encoding_errors: str = "strict", ref_paths=None, counts: Counter | None = None,
                   warn=print):
    """Documents (lists of RawSentence) of the files, in order; a file's end also ends a document
    (google would run its last document on into the next file's first).

    ``ref_paths``: one reference file per input, aligned with its non-blank lines as HF's
    run_chinese_ref.py writes them. Runs of blank lines delimit empty documents, skipped and
    counted in ``counts["empty_documents"]``; a file of several lines and no blank line is one
    document, which is worth a warning (``warn``)."""
    counts = Counter() if counts is None else counts
    if ref_paths is not None and len(ref_paths) != len(paths):
        raise ValueError(f"{len(ref_paths)} Chinese reference files for {len(paths)} input files: give one per input")
    for k, path in enumerate(paths):
        refs = _ref_lines(ref_paths[k]) if ref_paths is not None else None
        document, lines, blank_lines, after_blank = [], 0, 0, True
        for number, text in corpus_lines(path, encoding_errors, counts):
            line = text.strip()
            if not line:
                blank_lines += 1
                counts["empty_documents"] += after_blank and lines > 0  # a blank line after a blank line
                after_blank = True
                if document:
                    yield document
                    document = []
                continue
            lines, after_blank = lines + 1, False
            if refs is None:
                document.append(RawSentence(line))
                continue
            ref_number, positions = next(refs, (None, None))
            if ref_number is None:
                raise ValueError(f"{ref_paths[k]}: ends before {path}:{number}; it needs one line "
                                 "per non-blank input line")
            document.append(RawSentence(line, positions, f"{ref_paths[k]}:{ref_number}"))
        if document:
            yield document
        if refs is not None and next(refs, None) is not None:
            raise ValueError(f"{ref_paths[k]}: has more lines than {path} has non-blank lines ({lines})")
        if lines > 1 and not blank_lines:
            warn(f"warning: {path} has no blank line, so its {lines} lines are one document "
                 "(documents are separated by blank lines; the whole document is held in memory)")
        counts["lines"] += lines


# -- pieces ---------------------------------------------------------------------------------------

class Vocabulary(NamedTuple):
    """What instance creation needs to know of the vocabulary."""
    size: int
    cls_id: int
    sep_id: int
    mask_id: int
    is_subword: bytes  # 1 for "##" pieces

    @classmethod
    def of(cls, vocab) -> "Vocabulary":
        return cls(len(vocab), vocab.special_id(CLS, "create-pretraining-data"),
                   vocab.special_id(SEP, "create-pretraining-data"), vocab.special_id(MASK, "masking"),
                   bytes(t.startswith("##") for t in vocab.id_to_token))


def tokenize_documents(raw_documents, tokenizer, options: InstanceOptions, vocabulary: Vocabulary,
                       chinese_words: str | None = None, counts: Counter | None = None) -> list:
    """Documents of sentences ``(ids, continues)``: ``continues`` (whole-word masking only) flags
    the pieces that continue a word -- "##" pieces, and characters inside a Chinese word of the
    sentence's reference positions or, with ``chinese_words="jieba"``, of jieba's segmentation.
    Lines without pieces are dropped, and documents left empty are skipped, as google does."""
    counts = Counter() if counts is None else counts
    limit = options.max_seq_length - (3 if options.mode in PAIR_MODES else 2)
    documents = []
    for raw in raw_documents:
        document = []
        for sentence, ids in zip(raw, tokenizer.tokenize_ids_batch([s.text for s in raw], add_special_tokens=False)):
            if not ids:
                continue
            continues = None
            if options.words:
                continues = bytearray(vocabulary.is_subword[t] for t in ids)
                if sentence.ref is not None:
                    words = ref_continues(sentence.ref, len(ids), sentence.where)
                elif chinese_words == "jieba":
                    words = jieba_continues(sentence.text, tokenizer)
                else:
                    words = ()
                for i, flag in enumerate(words):
                    continues[i] |= flag
            if len(ids) > limit:
                counts["long_sentences"] += 1  # nsp: trimmed in its pair; full-sentences: cut here
                if options.mode == "full-sentences":
                    ids, continues = ids[:limit], continues and continues[:limit]
            document.append((array("i", ids), continues))
        counts["sentences"] += len(document)
        if document:
            documents.append(document)
        else:
            counts["empty_documents"] += 1
    counts["documents"] += len(documents)
    return documents


# -- google's instances ---------------------------------------------------------------------------

def chunk_rng(seed: int, chunk_index: int) -> random.Random:
    """The generator of one chunk of documents. Chunk 0 draws from ``random.Random(seed)`` itself,
    so a corpus that fits one chunk gets google's instances; the others from a seed derived from
    (seed, chunk index) alone, so the output does not depend on how many workers made it."""
    return random.Random(seed if chunk_index == 0 else f"{seed}/{chunk_index}")


def create_training_instances(documents: list, options: InstanceOptions, vocabulary: Vocabulary,
                              rng: random.Random, counts: Counter | None = None) -> list[TrainingInstance]:
    """All instances of one chunk of tokenized documents, shuffled (google's function of the same
    name, after reading the files). ``documents`` is shuffled in place."""
    counts = Counter() if counts is None else counts
    make = _Maker(options, vocabulary, rng, counts)
    instances = []
    if options.mode == "full-sentences":
        for _ in range(options.dupe_factor):
            rng.shuffle(documents)  # a different packing each time round
            instances.extend(make.full_sentences(documents))
    else:
        rng.shuffle(documents)
        for _ in range(options.dupe_factor):
            for document_index in range(len(documents)):
                instances.extend(make.from_document(documents, document_index))
    rng.shuffle(instances)
    counts["instances"] += len(instances)
    return instances


def trim_seq_pair(len_a: int, len_b: int, max_num_tokens: int, rng) -> tuple[slice, slice]:
    """create_pretraining_data.py's truncate_seq_pair: one piece at a time off the longer side (B
    on a tie), from the front or the back at random -- unlike fine-tuning's deterministic
    tokenization.truncate_seq_pair. Returns the slices to keep of A and B; only lengths move, so a
    sentence of a million pieces costs a million draws but no list shifting."""
    cut = [0, 0, 0, 0]  # A front, A back, B front, B back
    while len_a + len_b > max_num_tokens:
        side = 0 if len_a > len_b else 2
        cut[side + (rng.random() >= 0.5)] += 1
        if side == 0:
            len_a -= 1
        else:
            len_b -= 1
    return slice(cut[0], cut[0] + len_a), slice(cut[2], cut[2] + len_b)


class _Maker:
    """Builds the instances of one chunk; holds what every instance needs."""

    def __init__(self, options: InstanceOptions, vocabulary: Vocabulary, rng, counts: Counter):
        self.o, self.v, self.rng, self.counts = options, vocabulary, rng, counts
        self.never_mask = frozenset((vocabulary.cls_id, vocabulary.sep_id))

    def from_document(self, documents: list, document_index: int) -> list[TrainingInstance]:
        """google's create_instances_from_document, draw for draw."""
        rng, document = self.rng, documents[document_index]
        max_num_tokens = self.o.max_seq_length - 3
        target_seq_length = max_num_tokens
        if rng.random() < self.o.short_seq_prob:
            target_seq_length = rng.randint(2, max_num_tokens)
        instances, current_chunk, current_length, i = [], [], 0, 0
        while i < len(document):
            current_chunk.append(document[i])
            current_length += len(document[i][0])
            if i == len(document) - 1 or current_length >= target_seq_length:
                a_end = rng.randint(1, len(current_chunk) - 1) if len(current_chunk) >= 2 else 1
                if self.o.mode == "sop":
                    instances.extend(self._sentence_order(current_chunk, a_end, max_num_tokens))
                    current_chunk, current_length = [], 0
                    i += 1
                    continue
                a = _concat(current_chunk[:a_end])
                if len(current_chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    b = self._random_next(documents, document_index, target_seq_length - len(a[0]))
                    i -= len(current_chunk) - a_end  # the unused sentences go back for the next A
                else:
                    is_random_next = False
                    b = _concat(current_chunk[a_end:])
                instances.append(self._pair(a, b, is_random_next, max_num_tokens))
                current_chunk, current_length = [], 0
            i += 1
        return instances

    def _sentence_order(self, chunk: list, a_end: int, max_num_tokens: int) -> list[TrainingInstance]:
        """ALBERT's SOP pair of a chunk: A = its sentences before a_end, B = the rest, swapped half
        of the time (is_random_next then means "swapped": label 1). A one-sentence chunk is cut at
        a random piece, so B is still the text that follows A (ALBERT's code would draw a random
        document's B here, labelled 1, unbalancing the labels); a one-piece chunk makes no pair."""
        if len(chunk) == 1:
            ids, continues = chunk[0]
            if len(ids) < 2:
                self.counts["sop_unpaired"] += 1
                return []
            cut = self.rng.randint(1, len(ids) - 1)
            a = (ids[:cut], continues and bytes(continues[:cut]))
            b = (ids[cut:], continues and bytes(continues[cut:]))
        else:
            a, b = _concat(chunk[:a_end]), _concat(chunk[a_end:])
        swapped = self.rng.random() < 0.5
        return [self._pair(b, a, True, max_num_tokens) if swapped else self._pair(a, b, False, max_num_tokens)]

    def _random_next(self, documents: list, document_index: int, target_b_length: int):
        rng = self.rng
        for _ in range(10):  # google tries ten times for another document, then takes what it got
            random_document_index = rng.randint(0, len(documents) - 1)
            if random_document_index != document_index:
                break
        random_document = documents[random_document_index]
        random_start = rng.randint(0, len(random_document) - 1)
        length = 0
        for end in range(random_start, len(random_document)):
            length += len(random_document[end][0])
            if length >= target_b_length:
                break
        return _concat(random_document[random_start:end + 1])

    def _pair(self, a, b, is_random_next: bool, max_num_tokens: int) -> TrainingInstance:
        keep_a, keep_b = trim_seq_pair(len(a[0]), len(b[0]), max_num_tokens, self.rng)
        self.counts["truncated_instances"] += len(a[0]) + len(b[0]) > max_num_tokens
        self.counts["random_next"] += is_random_next
        cls, sep = array("i", [self.v.cls_id]), array("i", [self.v.sep_id])
        tokens = cls + a[0][keep_a] + sep + b[0][keep_b] + sep
        continues = None
        if a[1] is not None:
            continues = b"\0" + a[1][keep_a] + b"\0" + b[1][keep_b] + b"\0"
        return self._masked(tokens, (keep_a.stop - keep_a.start) + 2, is_random_next, continues)

    def full_sentences(self, documents: list) -> list[TrainingInstance]:
        """RoBERTa's FULL-SENTENCES: whole sentences packed up to max_seq_length - 2 pieces, a
        [SEP] between documents; a sentence that does not fit starts the next instance."""
        budget, sep = self.o.max_seq_length - 2, array("i", [self.v.sep_id])
        instances, ids, continues = [], array("i"), bytearray()
        for document in documents:
            for j, (s_ids, s_continues) in enumerate(document):
                boundary = j == 0 and len(ids) > 0
                if len(ids) + boundary + len(s_ids) > budget:
                    instances.append(self._packed(ids, continues))
                    ids, continues, boundary = array("i"), bytearray(), False
                if boundary:
                    ids += sep
                    continues.append(0)
                ids += s_ids
                continues += s_continues or bytes(len(s_ids))
        if ids:
            instances.append(self._packed(ids, continues))
        return instances

    def _packed(self, ids: array, continues: bytearray) -> TrainingInstance:
        tokens = array("i", [self.v.cls_id]) + ids + array("i", [self.v.sep_id])
        wwm = self.o.words
        return self._masked(tokens, len(tokens), False, b"\0" + continues + b"\0" if wwm else None)

    def _masked(self, tokens: array, len_a: int, is_random_next: bool, continues) -> TrainingInstance:
        self.counts["tokens"] += len(tokens)
        if self.o.dynamic_masking:
            return TrainingInstance(tokens, len_a, is_random_next, [], [])
        if self.o.masking != "token":
            output, positions, labels, boundaries = create_span_masked_lm_predictions(
                tokens, self.o.masked_lm_prob, self.o.max_predictions_per_seq, self.v.size, self.rng,
                never_mask=self.never_mask, mask_id=self.v.mask_id, continues=continues, masking=self.o.masking)
            self.counts["masked_lm_predictions"] += len(positions)
            self.counts["masked_spans"] += len(set(boundaries))
            return TrainingInstance(array("i", output), len_a, is_random_next, positions, labels, boundaries)
        output, positions, labels = create_masked_lm_predictions(
            tokens, self.o.masked_lm_prob, self.o.max_predictions_per_seq, self.v.size, self.rng,
            never_mask=self.never_mask, mask_id=self.v.mask_id, continues=continues)
        self.counts["masked_lm_predictions"] += len(positions)
        return TrainingInstance(array("i", output), len_a, is_random_next, positions, labels)


def _concat(sentences: list) -> tuple[array, bytes | None]:
    ids = array("i")
    for s_ids, _ in sentences:
        ids += s_ids
    if sentences[0][1] is None:
        return ids, None
    return ids, b"".join(bytes(c) for _, c in sentences)


# -- instances as arrays --------------------------------------------------------------------------

def instances_to_arrays(instances: list[TrainingInstance], options: InstanceOptions, vocab_size: int) -> dict:
    """The instances of a chunk in the shard layout (padded rows, lengths, counts): compact to send
    from a worker process and to hand row by row to ShardWriter."""
    n, L, P = len(instances), options.max_seq_length, options.max_predictions_per_seq
    ids = id_dtype(vocab_size)
    out = {"input_ids": np.zeros((n, L), ids), "lengths": np.zeros(n, np.int16),
           "len_a": np.zeros(n, np.int16), "next_sentence_labels": np.zeros(n, np.uint8),
           "masked_lm_positions": np.zeros((n, P), np.int16), "masked_lm_ids": np.zeros((n, P), ids),
           "masked_lm_counts": np.zeros(n, np.uint8)}
    if options.masking != "token":
        out["masked_lm_boundaries"] = np.zeros((n, P, 2), np.int16)
    for i, inst in enumerate(instances):
        k, m = len(inst.tokens), len(inst.masked_lm_positions)
        out["input_ids"][i, :k] = inst.tokens
        out["lengths"][i], out["len_a"][i], out["next_sentence_labels"][i] = k, inst.len_a, inst.is_random_next
        out["masked_lm_positions"][i, :m] = inst.masked_lm_positions
        out["masked_lm_ids"][i, :m] = inst.masked_lm_labels
        out["masked_lm_counts"][i] = m
        if inst.masked_lm_boundaries:
            out["masked_lm_boundaries"][i, :m] = inst.masked_lm_boundaries
    return out


def array_rows(arrays: dict):
    """ShardWriter rows (dicts of unpadded sequences) of ``instances_to_arrays``'s output."""
    for i in range(len(arrays["lengths"])):
        k, a, m = int(arrays["lengths"][i]), int(arrays["len_a"][i]), int(arrays["masked_lm_counts"][i])
        segment_ids = np.zeros(k, np.uint8)
        segment_ids[a:] = 1
        row = {"input_ids": arrays["input_ids"][i, :k], "segment_ids": segment_ids,
               "next_sentence_label": int(arrays["next_sentence_labels"][i]),
               "masked_lm_positions": arrays["masked_lm_positions"][i, :m],
               "masked_lm_ids": arrays["masked_lm_ids"][i, :m]}
        if "masked_lm_boundaries" in arrays:
            row["masked_lm_boundaries"] = arrays["masked_lm_boundaries"][i, :m]
        yield row
