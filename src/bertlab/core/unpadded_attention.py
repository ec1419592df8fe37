"""Unpadded attention: the batch's real tokens packed into one sequence, with the boundaries of
its members, so padding costs nothing. Every position-wise layer (projections, feed-forward,
LayerNorm) runs over the packed (tokens, hidden) matrix (fast_paths.unpadding.Packing says where
each token sits), and attention runs within each member's span of it alone, as FlashAttention's
variable-length kernel does with its cumulative sequence lengths. The outputs at real positions
are those of the padded computation.

Two layouts of one batch, with one interface, so a model is written once for both:
PaddedBatch (batch, length, ...) with a padding mask, and PackedBatch (tokens, ...) with boundaries.
`positions` are the tokens' positions in the padded layout (what rotary embeddings rotate by, and
what a sliding window measures), `attend` runs attention over (..., heads, len, d_head) tensors.
A batch makes each local-attention mask once, for all the layers that read it."""
import torch

from .attention import scaled_dot_product_attention
from .fast_paths import Packing
from .masks import padding_mask
from .sliding_window import band_mask, banded_pays, local_attention, sliding_window_mask


class PaddedBatch:
    """(batch, length, ...) as it comes; padding hidden from attention by the padding mask (None:
    no padding, and then local attention computes the pairs within its window alone)."""

    def __init__(self, attention_mask: torch.Tensor | None, length: int, device=None):
        self.mask = None if attention_mask is None else padding_mask(attention_mask)
        self.positions = torch.arange(length, device=device)
        self.local_masks = {}  # window -> the mask of a local layer, made by the first one

    def pack(self, x):
        return x

    def unpack(self, x):
        return x

    def attend(self, query, key, value, window: int | None = None, dropout_p=0.0, need_weights=False):
        """query, key, value (batch, heads, length, d_head) -> (output, probabilities or None);
        with `window`, each query sees only the keys within window // 2 of it."""
        if window is None:
            return scaled_dot_product_attention(query, key, value, self.mask, dropout_p, need_weights)
        banded = self.mask is None and not need_weights and banded_pays(len(self.positions), window)
        if (window, banded) not in self.local_masks:
            self.local_masks[window, banded] = band_mask(torch.zeros_like(self.positions), window) if banded else \
                self._and(sliding_window_mask(self.positions, self.positions, window))
        mask = self.local_masks[window, banded]
        if banded:
            return local_attention(query, key, value, window, dropout_p, mask), None
        return scaled_dot_product_attention(query, key, value, mask, dropout_p, need_weights)

    def _and(self, local):
        return local if self.mask is None else self.mask & local


class PackedBatch:
    """The real tokens of a padded batch as one (tokens, ...) sequence, member after member."""

    def __init__(self, attention_mask: torch.Tensor):
        self.packing = Packing(attention_mask)
        length = attention_mask.size(1)
        self.positions = self.packing.index % length  # (tokens,) each token's position in its row
        # the boundaries: the members' lengths (rows without tokens have none and are left out)
        lengths = attention_mask.bool().sum(1)
        self.lengths = lengths[lengths > 0].tolist()
        # which member each packed token belongs to, for the local layers' band
        self.segments = torch.arange(len(self.lengths), device=attention_mask.device).repeat_interleave(
            torch.tensor(self.lengths, device=attention_mask.device), output_size=len(self.packing))
        self.band_masks = {}  # window -> band_mask(segments, window), made by the first local layer

    def pack(self, x):
        """(batch, length, ...) -> (tokens, ...)."""
        return self.packing.pack(x)

    def unpack(self, x):
        """(tokens, ...) -> (batch, length, ...), zeros at the padding."""
        return self.packing.unpack(x)

    def attend(self, query, key, value, window: int | None = None, dropout_p=0.0, need_weights=False):
        """query, key, value (heads, tokens, d_head) -> (heads, tokens, d_head), each member
        attending within its own span only; no probabilities (a picture of attention needs the
        padded layout). A local layer takes the whole packed sequence at once, its band masked
        to each member (core.sliding_window.local_attention); a global one, member by member."""
        if need_weights:
            raise ValueError("attention probabilities need the padded layout (PaddedBatch)")
        if window is not None:
            if window not in self.band_masks:
                self.band_masks[window] = band_mask(self.segments, window)
            return local_attention(query, key, value, window, dropout_p, self.band_masks[window]), None
        outputs = [scaled_dot_product_attention(q[None], k[None], v[None], None, dropout_p)[0][0]
                   for q, k, v in zip(query.split(self.lengths, -2), key.split(self.lengths, -2),
                                      value.split(self.lengths, -2))]
        return torch.cat(outputs, dim=-2), None
