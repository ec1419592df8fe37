"""Sliding-window ("local") attention: a query sees only the keys within half a window of it, so
a layer's cost grows with length x window rather than length^2, and ModernBERT makes every N-th
layer global (full attention) and the others local, so a token still reaches the whole sequence
through the global layers.

The mask alone (`sliding_window_mask`) gives the right outputs but still pays for every pair;
`local_attention` computes only the pairs near the diagonal, which is what makes the cost linear."""
import torch
import torch.nn.functional as F

from .attention import scaled_dot_product_attention


def sliding_window_mask(query_positions: torch.Tensor, key_positions: torch.Tensor, window: int) -> torch.Tensor:
    """(..., query_len, key_len) bool, True where |i - j| <= window // 2: a window of `window`
    tokens centred on the query (ModernBERT's local_attention), from the tokens' positions."""
    return (query_positions[..., :, None] - key_positions[..., None, :]).abs() <= window // 2


def layer_is_global(layer: int, every: int) -> bool:
    """Layers 0, N, 2N, ... attend globally; the others locally."""
    return layer % every == 0


def banded_pays(length: int, window: int) -> bool:
    """Whether `local_attention` over a whole `length`-token sequence is cheaper than attention
    under sliding_window_mask: past two windows the 3 blocks a query block reads are fewer keys
    than the whole sequence."""
    return length > 2 * window


def band_mask(segments: torch.Tensor, window: int) -> torch.Tensor:
    """The additive mask `local_attention` applies to a sequence whose tokens belong to the
    members `segments` (length,) says (one sequence: all zeros; a packed batch: each member's
    number), (1, blocks, window // 2, 3 (window // 2)): which of its 3 blocks' keys each query of
    a block may read, those within half a window of it in its own member. Additive and 4-d because
    PyTorch's CPU kernel takes a (batch, heads, q, k) float mask fast, but falls back to its slow
    formula for a 3-d one and spends twice as long on a boolean one (measured)."""
    half = window // 2
    blocks = -(-len(segments) // half)
    tail = blocks * half - len(segments)
    # the padding around the sequence is a member of its own (-1): the padded queries at the end
    # read the padded keys, so no row is left without a key
    key_segments = F.pad(segments, (half, half + tail), value=-1).unfold(0, 3 * half, half)  # (blocks, 3 half)
    query_segments = F.pad(segments, (0, tail), value=-1).view(blocks, half)
    positions = torch.arange(-half, (blocks + 1) * half, device=segments.device)
    allowed = sliding_window_mask(positions[half:-half].view(blocks, half), positions.unfold(0, 3 * half, half), window)
    allowed = allowed & (query_segments[:, :, None] == key_segments[:, None, :])
    return torch.zeros(allowed.shape, device=segments.device).masked_fill_(~allowed, torch.finfo(torch.float32).min)[None]


def local_attention(query, key, value, window: int, dropout_p: float = 0.0, mask=None) -> torch.Tensor:
    """Attention under sliding_window_mask, (..., len, d_head) -> (..., len, d_head), computing
    only the pairs the window allows, in blocks. `mask` is band_mask(segments, window): with
    members packed one after the other, each attends within itself alone; None: one sequence
    (a caller running many layers makes the mask once).

    The queries are cut into blocks of half a window; every key within half a window of a query
    of block b lies in block b - 1, b or b + 1, so each block attends to those 3 blocks' keys
    (the mask says which of them are within reach of which query): len x 1.5 windows pairs
    instead of len^2."""
    half = window // 2
    *lead, length, d = query.shape
    blocks = -(-length // half)
    tail = blocks * half - length  # the queries' padding to whole blocks
    q = F.pad(query, (0, 0, 0, tail)).reshape(-1, blocks, half, d)  # (n, blocks, half, d): blocks as "heads"

    def key_blocks(x):  # (n, blocks, 3 half, d): block b's keys are positions (b - 1) half ... (b + 2) half - 1
        x = F.pad(x, (0, 0, half, half + tail)).reshape(q.size(0), -1, d)
        return x.unfold(1, 3 * half, half).transpose(-1, -2)

    if mask is None:
        mask = band_mask(torch.zeros(length, dtype=torch.long, device=query.device), window)
    out, _ = scaled_dot_product_attention(q, key_blocks(key), key_blocks(value), mask.to(query.dtype), dropout_p)
    return out.reshape(*lead, blocks * half, d)[..., :length, :]
