"""What tells a copy derived from a weight (an MKL-prepacked weight, attention's stacked Q/K/V)
that the weight has changed since the copy was made."""
from torch.optim.optimizer import register_optimizer_step_post_hook

_optimizer_steps = 0
_counting = None  # the hook's handle, once the first stamp is taken


def _count_step(optimizer, args, kwargs):
    global _optimizer_steps
    _optimizer_steps += 1


def weight_stamp(weight):
    """A weight's version counter, its storage, and the number of optimizer steps taken so far.

    A fused optimizer (torch.optim.AdamW(fused=True)) writes the parameters without bumping their
    version counters, so a stamp also counts optimizer steps, with a hook every
    torch.optim.Optimizer runs after its step. The first stamp registers it: before any stamp no
    derived copy exists that a step could make stale, and importing bertlab hooks nothing.
    """
    global _counting
    if _counting is None:
        _counting = register_optimizer_step_post_hook(_count_step)
    # inference tensors (made under torch.inference_mode) cannot change and carry no version counter
    return (-1 if weight.is_inference() else weight._version), weight.data_ptr(), _optimizer_steps
