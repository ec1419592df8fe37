"""One vector per word against one vector per occurrence: the notes' reason for BERT (file 004,
"词义随上下文变化的问题", and the lineage Word2Vec -> BERT). word2vec gives "bank" one vector whatever
the sentence, so two occurrences are always similarity 1; BERT's last layer gives each occurrence
its own vector, and "bank" by a river ends nearer another river bank than a bank that lends money.

A word's contextual vector is the mean of its word pieces' last-layer vectors (the first whole-word
match of the word in the sentence, any case).
"""
import re
from dataclasses import dataclass, field

import numpy as np

# The notes' pair (file 004) and a word with two senses.
EXAMPLES = {
    "it": (["The animal didn't cross the street because it was too tired",
            "The animal didn't cross the street because it was too wide"], ["animal", "street"]),
    "bank": (["He sat on the bank of the river and watched the water.",
              "The river bank was covered in mud after the flood.",
              "She deposited the money at the bank this morning.",
              "The bank raised the interest rate on its loans."], []),
}


@dataclass
class Contrast:
    word: str
    sentences: list[str]
    partners: list[str]
    static: np.ndarray      # (n, n) word2vec similarity between the occurrences: all 1
    contextual: np.ndarray  # (n, n) the model's
    static_partners: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))      # (n, p)
    contextual_partners: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # (n, p)


def word_span(sentence: str, word: str, where: str) -> tuple[int, int]:
    match = re.search(rf"(?<!\w){re.escape(word)}(?!\w)", sentence, flags=re.IGNORECASE)
    if match is None:
        raise ValueError(f"{where}: the word {word!r} is not in {sentence!r}")
    return match.span()


def contextual_vectors(model, tokenizer, sentence: str, words: list[str], where: str = "sentence") -> np.ndarray:
    """(len(words), hidden): each word's mean last-layer vector over its pieces in `sentence`."""
    import torch
    ids, offsets = tokenizer.tokenize_with_offsets(sentence)
    input_ids = torch.tensor([[tokenizer.cls_token_id, *ids, tokenizer.sep_token_id]])
    with torch.no_grad():
        hidden = model(input_ids, torch.zeros_like(input_ids), torch.ones_like(input_ids)).sequence_output[0, 1:-1]
    rows = []
    for word in words:
        start, end = word_span(sentence, word, where)
        pieces = [i for i, (s, e) in enumerate(offsets) if s >= start and e <= end]
        rows.append(hidden[pieces].mean(0).float().numpy())
    return np.stack(rows)


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=-1, keepdims=True)
    b = b / np.linalg.norm(b, axis=-1, keepdims=True)
    return a @ b.T


def contrast(word_vectors, model, tokenizer, word: str, sentences: list[str], partners=()) -> Contrast:
    """word2vec's and the model's similarities for `word` across `sentences`: between its
    occurrences, and (each sentence) to the `partners`, words of the same sentences."""
    partners = list(partners)
    key = lambda w: w if w in word_vectors else w.lower()  # noqa: E731  a lowercased vocabulary
    static = word_vectors.vector(key(word))
    found = [contextual_vectors(model, tokenizer, s, [word, *partners], f"sentence {i}")
             for i, s in enumerate(sentences, 1)]
    occurrences = np.stack([f[0] for f in found])
    result = Contrast(word, list(sentences), partners, cosine_matrix(np.stack([static] * len(sentences)),
                                                                     np.stack([static] * len(sentences))),
                      cosine_matrix(occurrences, occurrences))
    if partners:
        static_row = [word_vectors.similarity(key(word), key(p)) for p in partners]
        result.static_partners = np.array([static_row] * len(sentences))
        result.contextual_partners = np.array([cosine_matrix(f[:1], f[1:])[0] for f in found])
    return result


def report(c: Contrast, model_name: str) -> str:
    """The side-by-side table `bertlab word2vec contrast` prints."""
    lines = [f'"{c.word}": word2vec has one vector for it; {model_name} one per sentence (last layer, '
             "mean of its word pieces)"]
    lines += [f"  {i}. {s}" for i, s in enumerate(c.sentences, 1)]
    lines.append(f"  similarity between occurrences   word2vec   {model_name}")
    n = len(c.sentences)
    for i in range(n):
        for j in range(i + 1, n):
            lines.append(f"    {i + 1} vs {j + 1}{'':24}{c.static[i, j]:8.3f}   {c.contextual[i, j]:8.3f}")
    if c.partners:
        head = " ".join(f"{p:>8}" for p in c.partners)
        lines.append(f"  similarity of '{c.word}' to   word2vec: {head}   |  {model_name}: {head}")
        for i in range(n):
            static = " ".join(f"{v:8.3f}" for v in c.static_partners[i])
            contextual = " ".join(f"{v:8.3f}" for v in c.contextual_partners[i])
            lines.append(f"    in sentence {i + 1}{'':6}{static}   |  {' ' * len(model_name)}  {contextual}")
    return "\n".join(lines)


def contrast_vectors(vectors: str, model_dir: str = "minilm", word: str | None = None, sentences=(),
                     partners=()):
    """`bertlab word2vec contrast`: the word2vec file (or run folder) `vectors` beside the BERT folder
    `model_dir`, for `word` in two or more `sentences` (measured against `partners`), or without a
    word for the notes' EXAMPLES: the Contrasts, one word at a time (an iterator; the checks and the
    loading are done before it is returned). Each prints with report(c, model_dir)."""
    from ..interop.load import load_model
    from .word_vectors import load_word2vec
    if word is None and (sentences or partners):
        raise ValueError("--sentence and --partner go with --word")
    if word is not None and len(sentences) < 2:
        raise ValueError("--word needs two or more --sentence to compare its occurrences")
    examples = {word: (list(sentences), list(partners))} if word else EXAMPLES
    word_vectors = load_word2vec(vectors)
    loaded = load_model(model_dir)
    return (contrast(word_vectors, loaded.model, loaded.tokenizer, w, s, p) for w, (s, p) in examples.items())
