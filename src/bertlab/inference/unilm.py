"""Generation with a UniLM sequence-to-sequence model (models.unilm), through the shared greedy
decoding and beam search of inference.translate, and ROUGE (Lin 2004) to score it.

Sources are sorted by length into batches so that little is padded; a hypothesis never depends on
the rest of its batch (tested): each target starts right after its own source, and its length
limit is the model's fixed target budget, not the batch's longest source.
"""
import math
from dataclasses import dataclass

import torch

from .. import validate
from .translate import Hypothesis, beam_search, check_search_memory, greedy_decode, length_limits

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")


def source_batch(source_ids: list[list[int]], cls_id: int, sep_id: int, pad_id: int) -> torch.Tensor:
    """[CLS] source [SEP] per row, right-padded: (batch, longest + 2)."""
    src = torch.full((len(source_ids), max(map(len, source_ids)) + 2), pad_id, dtype=torch.long)
    for row, ids in enumerate(source_ids):
        src[row, :len(ids) + 2] = torch.tensor([cls_id, *ids, sep_id])
    return src


def generate_ids(model, source_ids: list[list[int]], beam_size: int = 1, nbest: int = 1, length_penalty: float = 1.0,
                 batch_size: int = 32, max_len: int | None = None) -> list[list[Hypothesis]]:
    """Hypotheses (target ids without [SEP]) for many sources (WordPiece ids without [CLS]/[SEP]),
    in input order. model: a UniLMSeq2Seq. Beam size 1 is greedy decoding (scores NaN). A source
    longer than the model's budget (max_source_tokens - 2) is an error; the caller cuts it. An
    empty source gets empty hypotheses without decoding. max_len: at most this many target tokens
    (default and ceiling: the positions BERT has left after the source budget)."""
    validate.beam_size("beam_size", beam_size)
    validate.check_number("nbest", nbest, integer=True, minimum=1, maximum=beam_size)
    validate.positive_int("batch_size", batch_size)
    validate.positive_int("max_len", max_len, optional=True)
    longest = model.max_source_tokens - 2
    too_long = next((i for i, ids in enumerate(source_ids) if len(ids) > longest), None)
    if too_long is not None:
        raise ValueError(f"source {too_long} has {len(source_ids[too_long])} tokens, more than the model's "
                         f"{longest} (max_source_tokens {model.max_source_tokens}, with [CLS] and [SEP])")
    device = next(model.parameters()).device
    limit = model.config.max_position_embeddings - 1 if max_len is None else max_len
    results = [[Hypothesis([], math.nan, math.nan)] * nbest for _ in source_ids]
    order = sorted((i for i in range(len(source_ids)) if source_ids[i]), key=lambda i: len(source_ids[i]))
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        src = source_batch([source_ids[i] for i in rows], model.cls_id, model.sep_id,
                           model.config.pad_token_id).to(device)
        bert = model.model.config
        check_search_memory(model, len(rows) * beam_size, len(rows), beam_size, src.size(1),
                            int(length_limits(model, src, limit, 0.0, limit).max()) + 1, width=bert.hidden_size,
                            layers=len(model.layers), vocab=bert.vocab_size)
        if beam_size == 1 and nbest == 1:
            out = [[Hypothesis(t, math.nan, math.nan)] for t in greedy_decode(model, src, limit, 0.0, limit)]
        else:
            out = beam_search(model, src, beam_size, length_penalty, limit, 0.0, limit, nbest)
        for i, hyps in zip(rows, out):
            results[i] = hyps
    return results


def detokenize(tokenizer, ids: list[int]) -> str:
    """WordPiece ids back to text: pieces joined, "##" continuations glued to the piece before."""
    return " ".join(tokenizer.convert_ids_to_tokens(ids)).replace(" ##", "").replace("##", "")


def generate_texts(model, tokenizer, texts: list[str], beam_size: int = 1, length_penalty: float = 1.0,
                   batch_size: int = 32, max_len: int | None = None) -> tuple[list[str], list[int]]:
    """(one generated text per input text, the indices of the inputs cut to the source budget)."""
    ids = [tokenizer.tokenize_ids(t) for t in texts]
    longest = model.max_source_tokens - 2
    cut = [i for i, x in enumerate(ids) if len(x) > longest]
    hyps = generate_ids(model, [x[:longest] for x in ids], beam_size, 1, length_penalty, batch_size, max_len)
    return [detokenize(tokenizer, h[0].tokens) for h in hyps], cut


@dataclass
class FileGeneration:
    """unilm-generate's output: one text per input line, the line numbers (from 1) cut to the
    model's `longest` source tokens, and ROUGE F1 against the references when given."""
    texts: list
    cut: list
    longest: int
    rouge: dict | None = None


def generate_file(model_dir: str, file: str = "-", beam: int = 1, length_penalty: float = 1.0, batch_size: int = 32,
                  max_len: int | None = None, ref: str | None = None, device: str = "auto") -> FileGeneration:
    """One generated line per line of `file` ('-': stdin) with a unilm-train model folder; max_len
    defaults to the model's max_target_tokens - 1. With `ref`, ROUGE-1/2/L against its lines."""
    from ..device import pick_device
    from ..interop.load import load_model_of
    from ..tokenization.files import text_lines
    loaded = load_model_of(model_dir, ("unilm",), "unilm-generate", pick_device(device))
    model, tokenizer, settings = loaded.model, loaded.tokenizer, loaded.extra["settings"]
    lines = text_lines(file, allow_empty_file=True)  # CRLF ends: the "\r" is no part of the text
    refs = text_lines(ref, allow_empty_file=True) if ref else None
    if refs is not None and len(refs) != len(lines):
        raise ValueError(f"{ref} has {len(refs)} lines, {'stdin' if file == '-' else file} {len(lines)}")
    max_len = max_len or max(1, settings.get("max_target_tokens", 32) - 1)
    with torch.inference_mode():
        texts, cut = generate_texts(model, tokenizer, lines, beam, length_penalty, batch_size, max_len)
    return FileGeneration(texts, [i + 1 for i in cut], model.max_source_tokens - 2,
                          rouge(texts, refs) if refs else None)


def rouge(hypotheses: list[str], references: list[str]) -> dict:
    """Mean ROUGE-1, ROUGE-2 and ROUGE-L F1 (x 100) with Porter stemming: Google's rouge-score
    package, the implementation summarisation papers report."""
    from rouge_score import rouge_scorer
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    if not references:
        raise ValueError("no references to score against")
    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)
    totals = dict.fromkeys(ROUGE_TYPES, 0.0)
    for hyp, ref in zip(hypotheses, references):
        for name, score in scorer.score(ref, hyp).items():
            totals[name] += score.fmeasure
    return {name: 100 * total / len(references) for name, total in totals.items()}
