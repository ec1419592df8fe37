"""Position-wise feed-forward network: FFN(x) = act(x W1 + b1) W2 + b2, applied at every position."""
import torch.nn.functional as F
from torch import nn


ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,  # exact erf GELU, as BERT's checkpoints were trained with
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's tanh approximation
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
}


def activation(name: str):
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"unknown activation {name!r}; choose one of {sorted(ACTIVATIONS)}") from None


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, act: str = "gelu", dropout: float = 0.0):
        super().__init__()
        self.intermediate = nn.Linear(d_model, d_ff)
        self.output = nn.Linear(d_ff, d_model)
        self.act = activation(act)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.output(self.dropout(self.act(self.intermediate(x))))
