"""Unpadding: the real tokens of a padded batch as one (tokens, features) matrix.

Every layer of a Transformer block except attention works position by position (projections,
feed-forward, LayerNorm, dropout, residual sums), so it can skip the padding outright; attention
unpacks its keys and values to the padded (batch, length) layout, where the padding mask hides
the padding, and packs its output again. Outputs at real positions are unchanged. On BERT's
pretraining data (google's short_seq_prob makes about 10% short instances, and documents end
early) 15-20% of the positions of a 128-token batch are padding.

Attention itself need not span the batch's longest member either: with `buckets`, the rows are
sorted by length and cut into a few buckets, and self-attention runs bucket by bucket, each padded
only to its own longest row. A shuffled fine-tuning batch of man-page sentences (mean 27 word
pieces, longest up to 128) then pays for attention about as a length-grouped batch would, while the
batch's members stay those of plain shuffling.
"""
import torch

from ..masks import padding_mask

# What one more bucket costs, in (rows x length^2) units of attention work: the few extra small
# operations of a bucket take about as long as attention over one row of 45 tokens (BERT sizes, CPU).
BUCKET_COST = 45 * 45


class Packing:
    """Where the real tokens of a padded (batch, length) batch sit in the packed matrix."""

    def __init__(self, attention_mask: torch.Tensor, buckets: bool = False):
        """attention_mask: (batch, length), 1 (or True) for real tokens, 0 for padding. With
        `buckets`, the packed matrix holds the rows shortest first, and `self.buckets` says which
        rows self-attention takes together (see Bucket)."""
        self.batch, self.length = attention_mask.shape
        real = attention_mask.bool()
        self.buckets = []
        if buckets:
            self.index, self.buckets = _bucketed(real)
        else:
            self.index = real.reshape(-1).nonzero().squeeze(1)  # (tokens,) flat positions of the real tokens
        flat = real.reshape(-1)
        self._row = torch.full((flat.numel(),), -1, dtype=torch.long, device=flat.device)
        self._row[self.index] = torch.arange(len(self.index), device=flat.device)

    def __len__(self):
        return len(self.index)

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, length, ...) -> (tokens, ...)."""
        return _Pack.apply(x.reshape(self.batch * self.length, *x.shape[2:]), self.index)

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """(tokens, ...) -> (batch, length, ...), zeros at the padding."""
        return _Unpack.apply(x, self.index, self.batch * self.length).view(self.batch, self.length, *x.shape[1:])

    def rows(self, positions: torch.Tensor) -> torch.Tensor:
        """(batch, n) positions -> their (batch, n) rows in the packed matrix; a position that
        is padding is an error."""
        batch = torch.arange(self.batch, device=positions.device)[:, None]
        return _real_rows(self._row[batch * self.length + positions])

    def rows_where(self, selected: torch.Tensor) -> torch.Tensor:
        """(batch, length) bool -> the packed rows of its True positions, (n,) in row-major order
        (the order of `tensor[selected]`); a selected position that is padding is an error."""
        return _real_rows(self._row[selected.reshape(-1).nonzero().squeeze(1)])


def _real_rows(rows):
    if bool((rows < 0).any()):
        raise ValueError("a position asked for is padding (its attention_mask is 0)")
    return rows


def select_rows(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """x[rows] for distinct `rows`, whose gradient is a plain copy back (see _Pack)."""
    return _Pack.apply(x, rows)


class Bucket:
    """Rows of similar length that self-attention takes together: the packed matrix's rows
    start:end hold their tokens, and `unpack`/`pack` move between those and the (rows, length)
    layout padded to the bucket's longest row, whose padding `mask` (rows, 1, 1, length) hides."""

    def __init__(self, start, end, rows, length, real):
        self.start, self.end, self.rows, self.length = start, end, rows, length
        self.mask = padding_mask(real)
        self.index = real.reshape(-1).nonzero().squeeze(1)  # where the tokens sit in the padded layout

    def unpack(self, packed):
        """The bucket's tokens of a packed (tokens, ...) matrix as (rows, length, ...), zeros at padding."""
        return self.unpack_own(packed[self.start:self.end])

    def unpack_own(self, x):
        """`unpack` of the bucket's own tokens (rows start:end of the packed matrix, e.g. one part of
        its split)."""
        return _Unpack.apply(x, self.index, self.rows * self.length).view(self.rows, self.length, *x.shape[1:])

    def pack(self, x):
        """(rows, length, ...) -> (the bucket's tokens, ...)."""
        return _Pack.apply(x.reshape(self.rows * self.length, *x.shape[2:]), self.index)


def _bucketed(real: torch.Tensor):
    """The flat positions of the real tokens, rows ordered by length, and the Buckets that cut
    those rows so that attention's padded work plus BUCKET_COST a bucket is least (an exact
    dynamic programme over the sorted lengths; rows without tokens are left out)."""
    extent = torch.where(real, torch.arange(1, real.size(1) + 1, device=real.device), 0).amax(1)
    order = torch.argsort(extent, stable=True)
    lengths = extent[order].tolist()
    first = next((i for i, n in enumerate(lengths) if n), len(lengths))
    # a bucket never splits rows of one length (that only adds a bucket), so cuts fall between runs
    cuts = [first] + [i for i in range(first + 1, len(lengths)) if lengths[i] != lengths[i - 1]] + [len(lengths)]
    best, back = {first: 0}, {}  # best[j]: least cost of rows first..j-1
    for b, j in enumerate(cuts[1:], 1):
        best[j], back[j] = min((best[i] + (j - i) * lengths[j - 1] ** 2 + BUCKET_COST, i) for i in cuts[:b])
    bounds, j = [], cuts[-1]
    while j > first:
        bounds.append((back[j], j))
        j = back[j]
    rows = order[first:]
    index = (rows[:, None] * real.size(1) + torch.arange(real.size(1), device=real.device))[real[rows]]
    buckets, start = [], 0
    for i, j in reversed(bounds):
        length = lengths[j - 1]
        bucket_real = real[order[i:j], :length]
        tokens = int(bucket_real.sum())
        buckets.append(Bucket(start, start + tokens, j - i, length, bucket_real))
        buckets[-1].batch_rows = order[i:j]  # the batch's rows it holds, in its order
        start += tokens
    return index, buckets


# Each is the other's gradient. Autograd's own gradient of index_select is a scatter-add (it must
# allow repeated indices), 4x slower on a CPU than the plain copy that distinct indices allow.

def _scatter(x, index, rows):
    return x.new_zeros(rows, *x.shape[1:]).index_copy_(0, index, x)


class _Pack(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, index):
        ctx.save_for_backward(index)
        ctx.rows = x.size(0)
        return x.index_select(0, index)

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        return _scatter(grad, index, ctx.rows), None


class _Unpack(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, index, rows):
        ctx.save_for_backward(index)
        return _scatter(x, index, rows)

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        return grad.index_select(0, index), None, None
