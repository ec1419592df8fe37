"""Pre-LayerNorm without biases: x + Sublayer(LayerNorm(x)), the LayerNorm a scale alone.

Normalising the sublayer's input instead of the residual sum (post-LN, BERT) keeps an identity
path from the embeddings to the last layer, so deep stacks train without a learning-rate warm-up
that has to be just right; the residual stream then needs one LayerNorm at the very end. Dropping
the LayerNorm's bias (and the linear layers' biases) saves parameters the model does not miss and
spends the compute on the weights (ModernBERT, following Cramming BERT and Llama)."""
from torch import nn


def bias_free_layer_norm(d_model: int, eps: float = 1e-5, bias: bool = False) -> nn.LayerNorm:
    return nn.LayerNorm(d_model, eps=eps, bias=bias)


class PreNormResidual(nn.Module):
    """`before(x)` is what the sublayer reads, `after(x, out)` the residual sum. Without a norm
    (`norm=False`: ModernBERT's first layer, whose input the embeddings' LayerNorm has just
    normalised) the sublayer reads x itself."""

    def __init__(self, d_model: int, eps: float = 1e-5, bias: bool = False, norm: bool = True):
        super().__init__()
        self.norm = bias_free_layer_norm(d_model, eps, bias) if norm else nn.Identity()

    def before(self, x):
        return self.norm(x)

    def after(self, x, sublayer_out):
        return x + sublayer_out
