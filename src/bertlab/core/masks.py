"""The two masks of "Attention Is All You Need".

Convention everywhere in bertlab: a boolean mask is True where a query MAY attend to a key.
Masks broadcast against attention scores of shape (batch, heads, query_len, key_len).
"""
import torch


def padding_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """(batch, key_len) with 1 for real tokens, 0 for padding -> (batch, 1, 1, key_len) bool.

    Padding keys are hidden from every query, so a sentence's outputs do not depend on how
    much padding its batch needed.
    """
    return attention_mask.bool()[:, None, None, :]


def causal_mask(query_len: int, key_len: int | None = None, device=None) -> torch.Tensor:
    """(query_len, key_len) bool: position i sees keys 0..i (the "sequence mask").

    With a key/value cache the queries are the last `query_len` of `key_len` positions, so the
    diagonal is shifted to the bottom right.
    """
    key_len = query_len if key_len is None else key_len
    # compared positions rather than ones(...).tril(key_len - query_len): the same mask, and a graph
    # traced for export (inference.onnx_export) keeps both lengths variable, where tril's diagonal
    # would be fixed to the traced lengths
    return key_positions(key_len, device)[None, :] <= query_positions(query_len, key_len, device)[:, None]


def query_positions(query_len, key_len, device=None) -> torch.Tensor:
    """(query_len,) the positions of the last `query_len` of `key_len` positions."""
    return torch.arange(query_len, device=device) + (key_len - query_len)


def key_positions(key_len, device=None) -> torch.Tensor:
    return torch.arange(key_len, device=device)
