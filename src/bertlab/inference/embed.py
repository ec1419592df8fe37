"""Text -> one vector per text: length-sorted batches with (almost) no padding, then pooling.

Sorting by *token* count and cutting batches by a token budget means a batch holds sequences of
nearly equal length, so almost every position computed is a real token. Batches whose sequences
all have the same length run the fused attention kernel with no mask at all.
"""
import numpy as np
import torch

POOLINGS = ("mean", "cls", "pooled")


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


def pool(out, attention_mask, pooling: str):
    if pooling == "cls":
        return out.sequence_output[:, 0]
    if pooling == "pooled":
        return out.pooled_output
    if pooling == "mean":
        m = attention_mask.unsqueeze(-1).to(out.sequence_output.dtype)
        return (out.sequence_output * m).sum(1) / m.sum(1).clamp(min=1e-9)
    raise ValueError(f"unknown pooling {pooling!r}; choose one of {POOLINGS}")


@torch.inference_mode()
def embed_ids(model, sequences, pooling="mean", normalize=False, batch_size=64, max_tokens=2048,
              dtype=None, progress=False, pad_id=0):
    """Embed token-id sequences (with [CLS]/[SEP] already added); rows come back in input order.

    dtype=torch.bfloat16 runs the model under bf16 autocast (fast on CPUs with AVX-512 BF16);
    pooling and normalisation stay in fp32.
    """
    from tqdm.auto import tqdm
    model.eval()
    device = next(model.parameters()).device
    lengths = [len(s) for s in sequences]
    result = np.zeros((len(sequences), model.config.hidden_size), dtype=np.float32)
    bar = tqdm(total=len(sequences), unit="text", disable=not progress, desc="embed")
    for batch in length_sorted_batches(lengths, batch_size, max_tokens):
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
    return result


def embed_texts(model, tokenizer, texts, pooling="mean", normalize=False, batch_size=64, max_length=None,
                dtype=None, progress=False):
    """Embed raw texts: our WordPiece tokenizer, then `embed_ids`. Texts longer than `max_length`
    tokens (default: the model's max_position_embeddings) keep their first tokens and [SEP]."""
    max_length = max_length or model.config.max_position_embeddings
    sequences = tokenizer.tokenize_ids_batch(texts)
    sep = tokenizer.sep_token_id
    sequences = [s if len(s) <= max_length else s[: max_length - 1] + [sep] for s in sequences]
    return embed_ids(model, sequences, pooling, normalize, batch_size, dtype=dtype, progress=progress,
                     pad_id=tokenizer.pad_token_id)


def top_k(query_vectors: np.ndarray, corpus_vectors: np.ndarray, k: int):
    """(scores, indices), each (queries, k), best first: dot products, i.e. cosine similarity for
    normalised vectors."""
    scores = query_vectors @ corpus_vectors.T
    k = min(k, corpus_vectors.shape[0])
    idx = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    part = np.take_along_axis(scores, idx, axis=1)
    order = np.argsort(-part, axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1), np.take_along_axis(idx, order, axis=1)
