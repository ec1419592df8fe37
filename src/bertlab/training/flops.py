"""Training FLOPs of a Transformer, the usual estimate, for the achieved TFLOP/s and model FLOPs
utilisation (MFU) the engine reports.

Per token, forward and backward: 6 FLOPs for each non-embedding parameter (a multiply-add is 2, the
backward pass twice the forward: Kaplan et al. 2020, C = 6N), plus attention's two matrix products
with the context, 2 x 2 x T x d_model forward in each attention layer, 12 x T x d_model with the
backward (PaLM, Chowdhery et al. 2022, appendix B). Embedding lookups cost no multiplications. It
counts the work the model asks for, not what a kernel does (a causal mask's skipped half, a recomputed
activation), so that MFU compares runs and hardware on the same footing."""
from torch import nn

from ..core.attention import MultiHeadAttention


def non_embedding_parameters(model: nn.Module) -> int:
    """Parameters outside nn.Embedding tables (a weight tied to a table counts as the table)."""
    tables = {id(p) for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters()}
    return sum(p.numel() for p in model.parameters() if id(p) not in tables)


def attention_flops_per_token(model: nn.Module, context: int) -> int:
    """12 x context x d_model for each attention layer (self- and encoder-decoder attention alike)."""
    return sum(12 * context * m.num_heads * m.d_head for m in model.modules() if isinstance(m, MultiHeadAttention))


def transformer_flops_per_token(model: nn.Module, context: int) -> int:
    """Training FLOPs per token of a model whose every token attends over `context` positions."""
    return 6 * non_embedding_parameters(model) + attention_flops_per_token(model, context)
