"""The notes' self-attention example, step by step (file 000, "Self-Attention", steps 1-8 and its
"代码" listing): three 4-d inputs, 4x3 key/query/value weights, and the output of query 1."""
import math

import torch

from ..core import attention
from . import Shown, rounded

INPUTS = [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]
W_KEY = [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]]
W_QUERY = [[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]]
W_VALUE = [[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]]

# What the notes print at each step.
NOTES = {
    "keys": [[0, 1, 1], [4, 4, 0], [2, 3, 1]],
    "queries": [[1, 0, 2], [2, 2, 2], [2, 1, 3]],
    "values": [[1, 2, 3], [2, 8, 0], [2, 6, 3]],
    "scores": [[2, 4, 4], [4, 16, 12], [4, 12, 10]],
    "softmax": [[6.3379e-02, 4.6831e-01, 4.6831e-01], [6.0337e-06, 9.8201e-01, 1.7986e-02],
                [2.9539e-04, 8.8054e-01, 1.1917e-01]],
    "softmax_rounded": [0.0, 0.5, 0.5],  # row 1 as the notes round it before step 6
    "output_1": [2.0, 7.0, 1.5],  # from the rounded softmax
}


def self_attention() -> Shown:
    shown = Shown("self-attention of three inputs", "000, Self-Attention (steps 1-8, 代码)")
    x = torch.tensor(INPUTS, dtype=torch.float64)
    keys = x @ torch.tensor(W_KEY, dtype=torch.float64)
    queries = x @ torch.tensor(W_QUERY, dtype=torch.float64)
    values = x @ torch.tensor(W_VALUE, dtype=torch.float64)
    d_k = keys.size(-1)
    # core.attention divides the scores by sqrt(d_k); the notes do not, so hand it queries scaled
    # up by sqrt(d_k) to get the notes' unscaled attention through the same function.
    unscaled, unscaled_weights = attention(queries * math.sqrt(d_k), keys, values)
    scaled, scaled_weights = attention(queries, keys, values)
    for name, ours in (("keys", keys), ("queries", queries), ("values", values)):
        shown.compare(name, NOTES[name], rounded(ours))
    shown.compare("scores Q K^T", NOTES["scores"], rounded(queries @ keys.T))
    shown.compare("softmax (unscaled)", NOTES["softmax"], rounded(unscaled_weights, 5, significant=True))
    shown.compare("output 1 (unscaled)", f"{NOTES['output_1']} (softmax rounded to {NOTES['softmax_rounded']})",
                  rounded(unscaled[0]))
    shown.say(f"{'outputs (unscaled)':<24} bertlab: {rounded(unscaled)}")
    shown.say(f"{'softmax (scaled)':<24} bertlab: {rounded(scaled_weights)}")
    shown.say(f"{'outputs (scaled)':<24} bertlab: {rounded(scaled)}")
    shown.say(f"why they differ: the notes skip the 1/sqrt(d_k) = 1/sqrt({d_k}) of scaled dot-product attention, "
              "which bertlab's core.attention.attention applies, so the notes' softmax is sharper")
    shown.values.update(keys=keys, queries=queries, values=values, scores=queries @ keys.T,
                        unscaled_weights=unscaled_weights, unscaled=unscaled,
                        scaled_weights=scaled_weights, scaled=scaled)
    return shown
