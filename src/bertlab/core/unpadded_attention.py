"""Unpadded attention: the batch's real tokens packed into one sequence, with the boundaries of
its members, so padding costs nothing. Every position-wise layer (projections, feed-forward,
LayerNorm) runs over the packed (tokens, hidden) matrix (fast_paths.unpadding.Packing says where
each token sits), and attention runs within each member's span of it alone, as FlashAttention's
variable-length kernel does with its cumulative sequence lengths. The outputs at real positions
are those of the padded computation.

Two layouts of one batch, with one interface, so a model is written once for both:
PaddedBatch (batch, length, ...) with a padding mask, and PackedBatch (tokens, ...) with boundaries.
`positions` are the tokens' positions in the padded layout (what rotary embeddings rotate by, and
what a sliding window measures), `attend` runs attention over (..., heads, len, d_head) tensors."""
import torch

from .attention import scaled_dot_product_attention
from .fast_paths import Packing
from .masks import padding_mask
from .sliding_window import sliding_window_mask


class PaddedBatch:
    """(batch, length, ...) as it comes; padding hidden from attention by the padding mask."""

    def __init__(self, attention_mask: torch.Tensor | None, length: int, device=None):
        self.mask = None if attention_mask is None else padding_mask(attention_mask)
        self.positions = torch.arange(length, device=device)

    def pack(self, x):
        return x

    def unpack(self, x):
        return x

    def attend(self, query, key, value, window: int | None = None, dropout_p=0.0, need_weights=False):
        """query, key, value (batch, heads, length, d_head) -> (output, probabilities or None);
        with `window`, each query sees only the keys within window // 2 of it."""
        mask = self.mask
        if window is not None:
            local = sliding_window_mask(self.positions, self.positions, window)
            mask = local if mask is None else mask & local
        return scaled_dot_product_attention(query, key, value, mask, dropout_p, need_weights)


class PackedBatch:
    """The real tokens of a padded batch as one (tokens, ...) sequence, member after member."""

    def __init__(self, attention_mask: torch.Tensor):
        self.packing = Packing(attention_mask)
        length = attention_mask.size(1)
        self.positions = self.packing.index % length  # (tokens,) each token's position in its row
        # the boundaries: the members' lengths (rows without tokens have none and are left out)
        lengths = attention_mask.bool().sum(1)
        self.lengths = lengths[lengths > 0].tolist()

    def pack(self, x):
        """(batch, length, ...) -> (tokens, ...)."""
        return self.packing.pack(x)

    def unpack(self, x):
        """(tokens, ...) -> (batch, length, ...), zeros at the padding."""
        return self.packing.unpack(x)

    def attend(self, query, key, value, window: int | None = None, dropout_p=0.0, need_weights=False):
        """query, key, value (heads, tokens, d_head) -> (heads, tokens, d_head), each member
        attending within its own span only; no probabilities (a picture of attention needs the
        padded layout)."""
        if need_weights:
            raise ValueError("attention probabilities need the padded layout (PaddedBatch)")
        outputs = []
        spans = zip(query.split(self.lengths, -2), key.split(self.lengths, -2), value.split(self.lengths, -2),
                    self.positions.split(self.lengths))
        for q, k, v, positions in spans:
            mask = None if window is None else sliding_window_mask(positions, positions, window)
            outputs.append(scaled_dot_product_attention(q[None], k[None], v[None], mask, dropout_p)[0][0])
        return torch.cat(outputs, dim=-2), None
