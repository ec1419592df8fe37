"""Sliding-window ("local") attention: a query sees only the keys within half a window of it, so
a layer's cost grows with length x window rather than length^2, and ModernBERT makes every N-th
layer global (full attention) and the others local, so a token still reaches the whole sequence
through the global layers."""
import torch


def sliding_window_mask(query_positions: torch.Tensor, key_positions: torch.Tensor, window: int) -> torch.Tensor:
    """(..., query_len, key_len) bool, True where |i - j| <= window // 2: a window of `window`
    tokens centred on the query (ModernBERT's local_attention), from the tokens' positions."""
    return (query_positions[..., :, None] - key_positions[..., None, :]).abs() <= window // 2


def layer_is_global(layer: int, every: int) -> bool:
    """Layers 0, N, 2N, ... attend globally; the others locally."""
    return layer % every == 0
