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


class WholeSequenceCausal:
    """The causal mask of a whole sequence (queries and keys the same positions 0..len-1), left for
    attention to apply rather than built: PyTorch's fused kernel takes it as is_causal=True, which
    runs its flash kernel and skips the masked half of the scores (a GPU's training step of a GPT);
    the plain formula builds causal_mask(len)."""

    def __repr__(self):
        return "CAUSAL"


CAUSAL = WholeSequenceCausal()


def query_positions(query_len, key_len, device=None) -> torch.Tensor:
    """(query_len,) the positions of the last `query_len` of `key_len` positions."""
    return torch.arange(query_len, device=device) + (key_len - query_len)


def key_positions(key_len, device=None) -> torch.Tensor:
    return torch.arange(key_len, device=device)


def seq2seq_mask(token_type_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """UniLM's sequence-to-sequence mask (Dong et al. 2019, figure 1; the notes' improvement list,
    001 "BERT 的不足"): (batch, len) segment ids, 0 for the source ([CLS] S1 [SEP]) and 1 for the
    target (S2 [SEP]) -> (batch, 1, len, len) bool.

    A source position sees the whole source (bidirectional); a target position sees the whole
    source and the target up to itself (causal). So the mask is the padding mask on the source
    block, the causal mask on the target block, and hides the target from the source. Padding keys
    (attention_mask 0) are hidden from every query."""
    target = token_type_ids.bool()
    length = target.size(1)
    causal = causal_mask(length, device=target.device)
    mask = ~target[:, None, :] | (target[:, :, None] & causal)  # (batch, query, key)
    if attention_mask is not None:
        mask = mask & attention_mask.bool()[:, None, :]
    return mask[:, None]


def left_to_right_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """UniLM's unidirectional LM mask: the causal mask with padding keys hidden too,
    (batch, len) -> (batch, 1, len, len) bool."""
    return causal_mask(attention_mask.size(1), device=attention_mask.device) & padding_mask(attention_mask)
