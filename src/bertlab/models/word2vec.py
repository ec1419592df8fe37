"""word2vec (Mikolov et al. 2013): two tables of word vectors trained by negative sampling.

`input_vectors` are the word vectors one keeps (word2vec.c's syn0); `output_vectors` (syn1neg) score
a target word against them. For each (input, target) example and k noise words drawn from the
unigram^0.75 distribution, the loss is

    -log sigma(v_target . h) - sum over the k noise words n of log sigma(-v_n . h)

with h the input word's vector (skip-gram) or the mean of the window's input vectors (CBOW). The
loss is summed, not averaged, over a batch, so that plain SGD at rate alpha moves every example by
alpha times its gradient, as word2vec.c's one-example-at-a-time updates do. A noise word equal to
the target is skipped, as there.

This module is the formula. Training makes the same update without autograd, one example at a
time, in word2vec/kernels.py (tests/test_word2vec.py checks it against autograd's SGD step on this
loss, example by example).
"""
import torch
import torch.nn.functional as F
from torch import nn

from .. import validate


class Word2Vec(nn.Module):
    def __init__(self, vocab_size: int, dim: int = 100):
        super().__init__()
        # dim x vocabulary is counted by no config: checked here, before the tables are allocated
        # (--dim 100000000 was an allocator error, or swap)
        validate.check_memory(f"word2vec's two tables of {vocab_size:,} words x dim {dim:,} (float32)",
                              2 * vocab_size * dim * validate.BYTES_PER_PARAMETER,
                              advice="use a smaller --dim or a larger --min-count (or pass --max-model-gb to allow it)")
        self.input_vectors = nn.Embedding(vocab_size, dim)
        self.output_vectors = nn.Embedding(vocab_size, dim)
        # gensim's start: inputs uniform in +-1/dim (word2vec.c's +-0.5/dim learnt the planted topics
        # of tests/test_word2vec.py slower), outputs zero
        nn.init.uniform_(self.input_vectors.weight, -1 / dim, 1 / dim)
        nn.init.zeros_(self.output_vectors.weight)

    def hidden(self, inputs: torch.Tensor) -> torch.Tensor:
        """h: an input word's vector (inputs (B,)), or the mean vector of each window (inputs (B, 2w),
        -1 where the window has no word)."""
        if inputs.dim() == 1:
            return self.input_vectors(inputs)
        present = (inputs >= 0).unsqueeze(-1).to(self.input_vectors.weight.dtype)
        summed = (self.input_vectors(inputs.clamp(min=0)) * present).sum(1)
        # The value is the mean, but each window word receives the whole gradient of h, not 1/n of
        # it: word2vec.c's CBOW update, which gensim keeps (cbow_mean=1). The true gradient of the
        # mean learnt the planted topics of tests/test_word2vec.py far slower than gensim.
        return summed - (summed * (1 - 1 / present.sum(1))).detach()

    def forward(self, inputs, targets, noise) -> torch.Tensor:
        """The batch's summed negative-sampling loss; targets (B,), noise (B, k)."""
        h = self.hidden(inputs)
        outputs = self.output_vectors(torch.cat([targets[:, None], noise], 1))  # (B, 1 + k, dim)
        scores = (outputs * h.unsqueeze(1)).sum(-1)  # B small dot products: faster than bmm on a CPU
        sign = torch.ones_like(scores)
        sign[:, 1:] = -1
        counted = torch.ones_like(scores)
        counted[:, 1:] = (noise != targets[:, None]).to(scores.dtype)
        return -(F.logsigmoid(sign * scores) * counted).sum()
