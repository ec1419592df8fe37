"""Text -> one vector per text: length-sorted batches with (almost) no padding, then pooling.

Sorting by *token* count and cutting batches by a token budget means a batch holds sequences of
nearly equal length, so almost every position computed is a real token. Batches whose sequences
all have the same length run the fused attention kernel with no mask at all.
"""
import numpy as np
import torch

from ..progress import progress_bar
from ..validate import check_number, positive_int
from .pooling import check_pooling, pool


def length_sorted_batches(lengths, batch_size: int, max_tokens: int):
    """Index lists, longest first, each at most `batch_size` sequences and `max_tokens` padded tokens."""
    order = np.argsort(-np.asarray(lengths), kind="stable")
    batch = []
    for i in order:
        # sorted longest first, so the first member sets the padded length of the batch
        if batch and (len(batch) >= batch_size or (len(batch) + 1) * lengths[batch[0]] > max_tokens):
            yield batch
            batch = []
        batch.append(int(i))
    if batch:
        yield batch


def padded_tensors(sequences, pad_id: int = 0):
    """List of id lists -> (input_ids, attention_mask) LongTensors padded on the right."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, s in enumerate(sequences):
        ids[row, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[row, : len(s)] = 1
    return ids, mask


def check_finite(rows, unit: str, numbers=None):
    """Outputs holding NaN or infinity (an fp16 overflow, weights too large for the arithmetic)
    are an error naming the first bad row, never a result: every score computed from them would
    be meaningless. `rows`: an array or a list of arrays; `unit` names a row ("text", "line");
    `numbers` are the rows' numbers (default 1, 2, ...)."""
    bad = [i for i, row in enumerate(rows) if not np.isfinite(row).all()]
    if bad:
        first = numbers[bad[0]] if numbers is not None else bad[0] + 1
        more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
        raise ValueError(f"the model's output for {unit} {first}{more} holds NaN or infinity: an overflow; with "
                         f"fp16 precision try bf16 or fp32, or else the weights are broken")


@torch.inference_mode()
def embed_ids(model, sequences, pooling="mean", normalize=False, batch_size=64, max_tokens=2048,
              dtype=None, progress=False, pad_id=0):
    """Embed token-id sequences (with [CLS]/[SEP] already added); rows come back in input order.
    An empty sequence (a blank text: nothing to embed) gets an all-zero row, also when normalised.

    dtype=torch.bfloat16 runs the model under bf16 autocast (fast on CPUs with AVX-512 BF16);
    pooling and normalisation stay in fp32. Outputs with NaN or infinity are an error.
    """
    check_pooling(pooling)
    positive_int("batch_size", batch_size)
    positive_int("max_tokens", max_tokens)
    model.eval()
    device = next(model.parameters()).device
    lengths = [len(s) for s in sequences]
    result = np.zeros((len(sequences), model.config.hidden_size), dtype=np.float32)
    texts = [i for i, n in enumerate(lengths) if n]
    bar = progress_bar(total=len(texts), unit="text", enabled=progress, desc="embed")
    for part in length_sorted_batches([lengths[i] for i in texts], batch_size, max_tokens):
        batch = [texts[i] for i in part]
        ids, mask = padded_tensors([sequences[i] for i in batch], pad_id)
        ids, mask = ids.to(device), mask.to(device)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            out = model(ids, attention_mask=mask)
        vectors = pool(out, mask, pooling).float()
        if normalize:
            vectors = torch.nn.functional.normalize(vectors, dim=-1)
        result[batch] = vectors.cpu().numpy()
        bar.update(len(batch))
    bar.close()
    check_finite(result, "text")
    return result


def encode_texts(tokenizer, texts, max_length: int) -> tuple[list[list[int]], list[int]]:
    """([CLS] ids [SEP] of each text, the indices of the texts that were cut). A text longer than
    `max_length` tokens keeps its first tokens and [SEP], as HF and sentence-transformers cut it;
    a blank text (no tokens: empty, spaces or control characters) gets [], which `embed_ids`
    turns into an all-zero row."""
    check_number("max_length", max_length, integer=True, minimum=2)
    sep = tokenizer.sep_token_id
    sequences, cut = [], []
    for i, s in enumerate(tokenizer.tokenize_ids_batch(texts)):
        if len(s) > max_length:
            s = s[: max_length - 1] + [sep]
            cut.append(i)
        sequences.append(s if len(s) > 2 else [])
    return sequences, cut


def check_max_seq_length(n: int, config, pairs: bool = False) -> int:
    """n, if it holds [CLS]/[SEP] (and a pair's middle [SEP]) and fits the model's positions."""
    least = 3 if pairs else 2
    if not least <= n <= config.max_position_embeddings:
        raise ValueError(f"--max-seq-length {n}: must be from {least} (room for [CLS]/[SEP]) to the "
                         f"model's max_position_embeddings {config.max_position_embeddings}")
    return n


def embed_texts(model, tokenizer, texts, pooling="mean", normalize=False, batch_size=64, max_length=None,
                dtype=None, progress=False):
    """Embed raw texts: our WordPiece tokenizer, then `embed_ids`. Texts longer than `max_length`
    tokens keep their first tokens and [SEP]; blank texts get all-zero rows. The default length is
    what the checkpoint is meant to read (tokenizer.model_max_length from load_pretrained: a
    sentence-transformers model's max_seq_length, 256 for all-MiniLM-L6-v2, as sentence-transformers
    cuts it), else the model's max_position_embeddings."""
    limit = model.config.max_position_embeddings
    default = min(getattr(tokenizer, "model_max_length", None) or limit, limit)
    max_length = check_number("max_length", max_length or default, integer=True, minimum=2, maximum=limit)
    sequences, _ = encode_texts(tokenizer, texts, max_length)
    return embed_ids(model, sequences, pooling, normalize, batch_size, dtype=dtype, progress=progress,
                     pad_id=tokenizer.pad_token_id)


def top_k(query_vectors: np.ndarray, corpus_vectors: np.ndarray, k: int):
    """(scores, indices), each (queries, k), best first: dot products, i.e. cosine similarity for
    normalised vectors."""
    positive_int("k", k)
    scores = query_vectors @ corpus_vectors.T
    k = min(k, corpus_vectors.shape[0])
    idx = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    part = np.take_along_axis(scores, idx, axis=1)
    order = np.argsort(-part, axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1), np.take_along_axis(idx, order, axis=1)
