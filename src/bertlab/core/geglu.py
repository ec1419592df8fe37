"""The GeGLU feed-forward (Shazeer 2020, "GLU Variants Improve Transformer"):
FFN(x) = (GELU(x W) * x V) W2. Beside the activation, a learned gate decides per feature how much
passes; W and V are one input projection 2 x d_ff wide, split into the value and its gate."""
from torch import nn

from .feed_forward import activation


class GeGLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int, act: str = "gelu", bias: bool = False, dropout: float = 0.0):
        super().__init__()
        self.intermediate = nn.Linear(d_model, 2 * d_ff, bias=bias)
        self.act = activation(act)
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x):
        value, gate = self.intermediate(x).chunk(2, dim=-1)
        return self.output(self.dropout(self.act(value) * gate))
