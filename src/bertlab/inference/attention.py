"""Where each token looks: one layer's attention weights, as numbers and as a heatmap.

Row i of a head's (len, len) matrix is the softmax over keys for query token i, so every row
sums to 1; reading down a column shows which tokens attend to that token.
"""
import math

import numpy as np
import torch

from ..io import atomic_write
from .features import convert_example, hidden_state_indices, read_examples

DEFAULT_SENTENCE = "The animal didn't cross the street because it was too tired"


def layer_number(layer: int, num_layers: int) -> int:
    """google's layer number (negative counts from the top) -> 0..num_layers-1, validated."""
    hidden_state_indices([layer], num_layers)
    return layer % num_layers


@torch.inference_mode()
def attention_weights(model, tokenizer, text: str, layer: int):
    """(tokens, float32 (heads, len, len) weights of `layer`) for one text ("A ||| B" is a pair)."""
    features = convert_example(read_examples([text])[0], tokenizer, model.config.max_position_embeddings)
    if features.truncated:
        raise ValueError(f"{text[:40]!r}...: longer than the model's max_position_embeddings "
                         f"{model.config.max_position_embeddings} tokens")
    model.eval()
    device = next(model.parameters()).device
    ids = torch.tensor([features.input_ids], device=device)
    types = torch.tensor([features.input_type_ids], device=device)
    out = model(ids, types, output_attentions=True)
    return features.tokens, out.attentions[layer_number(layer, len(out.attentions))][0].float().cpu().numpy()


def most_attended(tokens, weights: np.ndarray, query: str, k: int = 5):
    """[(position, [(token, weight), ...]), ...]: for every occurrence of the token `query`
    (compared case-insensitively), the k tokens its (len, len) attention row weighs most."""
    positions = [i for i, t in enumerate(tokens) if t.lower() == query.lower()]
    if not positions:
        raise ValueError(f"--print-top {query}: no such token; the tokens are {' '.join(tokens)}")
    out = []
    for i in positions:
        order = np.argsort(-weights[i], kind="stable")[:k]
        out.append((i, [(tokens[j], float(weights[i, j])) for j in order]))
    return out


def render_heatmaps(path, tokens, weights: np.ndarray, titles, suptitle: str):
    """One heatmap per (len, len) matrix in `weights`, in a near-square grid, saved as a PNG:
    query tokens down the side, key tokens along the bottom."""
    import matplotlib
    matplotlib.use("Agg")  # no display needed; the file is the product
    import matplotlib.pyplot as plt
    n, length = len(weights), len(tokens)
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    cell = max(3.0, 0.3 * length) if n > 1 else max(5.0, 0.4 * length)
    fig, axes = plt.subplots(rows, cols, figsize=(cols * cell, rows * cell + 0.6), squeeze=False,
                             layout="constrained")
    font = 9 if n == 1 else 6
    for ax, matrix, title in zip(axes.flat, weights, titles):
        image = ax.imshow(matrix, cmap="viridis", vmin=0.0, vmax=1.0)
        ax.set_xticks(range(length), tokens, rotation=90, fontsize=font)
        ax.set_yticks(range(length), tokens, fontsize=font)
        ax.set_title(title, fontsize=font + 2)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.6, label="attention weight")
    fig.suptitle(suptitle)
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=100), mode="wb")
    plt.close(fig)
