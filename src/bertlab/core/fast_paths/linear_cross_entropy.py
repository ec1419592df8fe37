"""The output layer and the mean cross-entropy as one step: F.cross_entropy(F.linear(x, weight), targets).

A language model's output layer makes the largest tensors of a training step (GPT-2 at batch 8 x
256: 2048 x 50257 logits, 411 MB), and the plain path keeps several of that size: the logits, their
log-softmax, the gradient nll_loss writes into zeros, the log-softmax gradient. Here the logits are
made vocabulary-major, (vocab, tokens) = weight @ x^T, and turned in place into their own gradient,
(softmax - one-hot) / count, from which the gradients of x and weight are computed at once; backward
only scales them by the loss's gradient. Vocabulary-major because MKL's GEMM is about a quarter faster
that way round than x @ weight^T, whose output rows are 50257 floats apart; the three GEMMs and the
softmax passes of the head took 5.8 s against 7.0 s for the plain path (fp32, 2 threads, measured).

CPU float32 only; elsewhere (and under autocast or torch.compile) the plain path runs.
"""
import torch
import torch.nn.functional as F

# Tokens per pass, so that a pass's logits stay within 2**27 floats (512 MB) however large the batch.
_FLOATS_PER_PASS = 2**27


def linear_cross_entropy(x, weight, targets, ignore_index=-100):
    """F.cross_entropy(F.linear(x, weight), targets, ignore_index=ignore_index): x (tokens, d),
    weight (vocab, d), targets (tokens,); the mean over targets that are not ignore_index."""
    if x.device.type != "cpu" or x.dtype != torch.float32 or weight.dtype != torch.float32 \
            or torch.is_autocast_enabled("cpu") or torch.compiler.is_compiling():
        return F.cross_entropy(F.linear(x, weight), targets, ignore_index=ignore_index)
    return _LinearCrossEntropy.apply(x, weight, targets, ignore_index)


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, targets, ignore_index):
        kept = targets != ignore_index
        scale = kept / kept.sum()  # each kept token's share of the mean (nan if none is kept, as F's)
        want_x, want_weight = ctx.needs_input_grad[:2]
        grad_x = torch.empty_like(x) if want_x else None
        grad_weight = None
        total = x.new_zeros(())
        step = max(1, _FLOATS_PER_PASS // weight.size(0))
        for start in range(0, len(x), step):
            xs, rows = x[start:start + step], slice(start, start + step)
            logits = weight @ xs.t()  # (vocab, tokens)
            total += _softmax_minus_one_hot_(logits, targets[rows], kept[rows], scale[rows])
            if want_x:
                torch.mm(logits.t(), weight, out=grad_x[rows])
            if want_weight:
                grad_weight = logits @ xs if grad_weight is None else grad_weight.addmm_(logits, xs)
        ctx.save_for_backward(grad_x, grad_weight)
        return total

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        grad_x, grad_weight = ctx.saved_tensors
        if bool(grad != 1):  # 1 when the loss itself is differentiated: no pass over the weight's size
            grad_x = None if grad_x is None else grad_x * grad
            grad_weight = None if grad_weight is None else grad_weight * grad
        return grad_x, grad_weight, None, None


def _softmax_minus_one_hot_(logits, targets, kept, scale):
    """Turn (vocab, tokens) logits in place into the mean loss's gradient w.r.t. them,
    (softmax - one-hot) * scale per token; return the tokens' share of the mean loss."""
    at = torch.where(kept, targets, 0)[None]
    target_logit = logits.gather(0, at)[0]
    peak = logits.amax(0)
    exp = logits.sub_(peak).exp_()
    sums = exp.sum(0)
    loss = ((peak + sums.log() - target_logit) * scale).sum()
    exp.mul_(scale / sums)
    exp.scatter_add_(0, at, -scale[None])
    return loss
