"""Unpadding: the real tokens of a padded batch as one (tokens, features) matrix.

Every layer of a Transformer block except attention works position by position (projections,
feed-forward, LayerNorm, dropout, residual sums), so it can skip the padding outright; attention
unpacks its keys and values to the padded (batch, length) layout, where the padding mask hides
the padding, and packs its output again. Outputs at real positions are unchanged. On BERT's
pretraining data (google's short_seq_prob makes about 10% short instances, and documents end
early) 15-20% of the positions of a 128-token batch are padding.
"""
import torch


class Packing:
    """Where the real tokens of a padded (batch, length) batch sit in the packed matrix."""

    def __init__(self, attention_mask: torch.Tensor):
        """attention_mask: (batch, length), 1 (or True) for real tokens, 0 for padding."""
        self.batch, self.length = attention_mask.shape
        flat = attention_mask.reshape(-1).bool()
        self.index = flat.nonzero().squeeze(1)  # (tokens,) flat positions of the real tokens
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
        rows = self._row[batch * self.length + positions]
        if bool((rows < 0).any()):
            raise ValueError("a position asked for is padding (its attention_mask is 0)")
        return rows


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
