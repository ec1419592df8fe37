"""The jobs of `bertlab embed` and `bertlab similar` as functions: a BERT folder loaded once for
embedding (device, autocast precision, optional int8, the tokens per text), a file's lines as an
.npy matrix, and semantic search of a corpus file."""
from dataclasses import dataclass

import numpy as np

from .embed import check_max_seq_length, embed_ids, encode_texts


@dataclass
class Embedded:
    """The vectors of some texts, in order; `blank` and `cut` are indices (from 0) of the texts that
    were blank (all-zero rows) and of those cut to max_length tokens."""
    vectors: np.ndarray
    blank: list
    cut: list


@dataclass
class Embedder:
    """A BERT model ready to embed: on its device, with its autocast dtype and tokens per text."""
    model: object
    tokenizer: object
    dtype: object
    max_length: int

    def embed(self, texts: list[str], pooling: str = "mean", normalize: bool = False, batch_size: int = 64,
              progress: bool = False) -> Embedded:
        sequences, cut = encode_texts(self.tokenizer, texts, self.max_length)
        vectors = embed_ids(self.model, sequences, pooling, normalize, batch_size, dtype=self.dtype,
                            progress=progress, pad_id=self.tokenizer.pad_token_id)
        return Embedded(vectors, [i for i, s in enumerate(sequences) if not s], cut)


def load_embedder(model_dir, device: str = "auto", precision: str = "fp32", int8: bool = False,
                  max_seq_length: int | None = None) -> Embedder:
    """A BERT folder (or 'minilm', or a LoadedModel) for embedding; a fine-tuned folder embeds with
    its encoder. max_seq_length defaults to the model's own limit (sentence_bert_config.json's
    max_seq_length, else max_position_embeddings)."""
    from ..device import autocast_dtype, pick_device
    from ..interop import max_seq_length as model_limit
    from ..interop.load import load_model_of
    from .int8 import check_int8_settings, quantize_int8
    device = pick_device(device)
    dtype = autocast_dtype(precision, device)
    if int8:
        check_int8_settings(device, dtype)
    loaded = load_model_of(model_dir, ("bert", "finetuned", "modernbert"), "embedding")
    model, tokenizer = loaded.encoder, loaded.tokenizer
    if int8:
        quantize_int8(model)
    if max_seq_length is None:
        length = model_limit(loaded.folder, model.config) if loaded.folder else model.config.max_position_embeddings
    else:
        length = check_max_seq_length(max_seq_length, model.config)
    return Embedder(model.to(device), tokenizer, dtype, length)


@dataclass
class Int8Cost:
    """How far int8 vectors are from fp32's on the first `rows` non-blank lines (cosine)."""
    rows: int
    mean: float = float("nan")
    min: float = float("nan")


@dataclass
class EmbedReport:
    output: str
    lines: int
    shape: tuple
    blank: list           # line numbers (from 1) that got all-zero rows
    truncated: list       # line numbers (from 1) cut to max_seq_length tokens
    max_seq_length: int
    int8: Int8Cost | None = None


def embed_file(model_dir: str, file: str, output: str, pooling: str = "mean", normalize: bool = False,
               max_seq_length: int | None = None, batch_size: int = 64, precision: str = "fp32",
               int8: bool = False, device: str = "auto", overwrite: bool = False,
               progress: bool = False) -> EmbedReport:
    """Embed each line of `file` ('-': stdin) and write the (lines, hidden) float32 matrix to
    OUTPUT.npy, rows in input order; blank lines get all-zero rows. With int8, the report says how
    close the first 64 lines' vectors are to fp32's."""
    from ..io import atomic_write, check_output_file, read_lines
    if not output.endswith(".npy"):
        raise ValueError(f"--output {output}: must end in .npy")
    lines = read_lines(file)
    check_output_file(output, overwrite)
    settings = dict(device=device, precision=precision, max_seq_length=max_seq_length)
    embedder = load_embedder(model_dir, int8=int8, **settings)
    done = embedder.embed(lines, pooling, normalize, batch_size, progress)
    atomic_write(output, lambda f: np.save(f, done.vectors), mode="wb")
    cost = _int8_cost(load_embedder(model_dir, **settings), lines, done, pooling, batch_size) if int8 else None
    return EmbedReport(output, len(lines), done.vectors.shape, [i + 1 for i in done.blank],
                       [i + 1 for i in done.cut], embedder.max_length, cost)


def _int8_cost(fp32: Embedder, lines, done: Embedded, pooling, batch_size, sample: int = 64) -> Int8Cost:
    blank = set(done.blank)
    rows = [i for i in range(len(lines)) if i not in blank][:sample]
    if not rows:
        return Int8Cost(0)
    reference = fp32.embed([lines[i] for i in rows], pooling, False, batch_size).vectors
    ours = done.vectors[rows]
    cosine = (ours * reference).sum(1) / np.maximum(np.linalg.norm(ours, axis=1) * np.linalg.norm(reference, axis=1),
                                                    1e-12)
    return Int8Cost(len(rows), float(cosine.mean()), float(cosine.min()))


@dataclass
class SearchReport:
    """For each query, its hits (score, corpus line) best first; the corpus's blank lines (numbers
    from 1, skipped) and the queries' and corpus lines' numbers cut to max_seq_length tokens."""
    hits: list
    skipped: list
    truncated_queries: list
    truncated_lines: list
    corpus_lines: int
    max_seq_length: int


def search_corpus(model_dir: str, queries: list[str], corpus: str, k: int = 5, pooling: str = "mean",
                  max_seq_length: int | None = None, batch_size: int = 64, precision: str = "fp32",
                  int8: bool = False, device: str = "auto", progress: bool = False) -> SearchReport:
    """The k corpus lines closest to each query by cosine similarity; blank corpus lines are skipped,
    a blank query or a corpus of blank lines is an error."""
    from ..io import read_lines
    from .embed import top_k
    lines = read_lines(corpus)
    embedder = load_embedder(model_dir, device, precision, int8, max_seq_length)
    asked = embedder.embed(queries, pooling, True, batch_size)
    if asked.blank:
        raise ValueError(f"QUERY {asked.blank[0] + 1} is blank; give text to search for")
    found = embedder.embed(lines, pooling, True, batch_size, progress)
    if len(found.blank) == len(lines):
        raise ValueError(f"{corpus}: every line is blank; there is nothing to search")
    skipped = set(found.blank)  # their all-zero rows must never come back as hits
    kept = [i for i in range(len(lines)) if i not in skipped]
    scores, indices = top_k(asked.vectors, found.vectors[kept], k)
    hits = [[(float(s), lines[kept[i]]) for s, i in zip(row_scores, row_indices)]
            for row_scores, row_indices in zip(scores, indices)]
    return SearchReport(hits, [i + 1 for i in found.blank], [i + 1 for i in asked.cut], [i + 1 for i in found.cut],
                        len(lines), embedder.max_length)
