"""LAMB (You et al., 2019, "Large Batch Optimization for Deep Learning: Training BERT in 76
minutes", Algorithm 2): Adam's direction, rescaled per parameter tensor by a trust ratio.

    m_t = b1 m + (1 - b1) g                v_t = b2 v + (1 - b2) g^2
    r_t = (m_t / (1 - b1^t)) / (sqrt(v_t / (1 - b2^t)) + eps)
    u_t = r_t + lambda x_t                 (lambda = the group's weight decay; 0 for LayerNorm, biases)
    x_t+1 = x_t - lr * ||x_t|| / ||u_t|| * u_t

The trust ratio ||x|| / ||u|| makes every layer move by about lr times its own size, whatever the
scale of its gradient; that is what lets the batch grow to 32k without the early layers diverging.
Where either norm is zero (a freshly zeroed bias) the ratio is 1: a plain Adam step. Following the
paper, the ratio applies to every tensor; only the weight decay is limited to the decayed group.
"""
import torch


class Lamb(torch.optim.Optimizer):
    state_keys = ("step", "exp_avg", "exp_avg_sq")  # per parameter; a resumed checkpoint is checked for them

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-6, weight_decay: float = 0.01):
        if lr < 0 or eps < 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"invalid LAMB settings lr={lr} betas={betas} eps={eps}")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            by_step = {}  # tensors at the same step share the bias corrections: one foreach call each
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("LAMB does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                by_step.setdefault(state["step"], []).append(p)
            for t, params in by_step.items():
                self._update(params, t, group)
        return loss

    def _update(self, params, t: int, group):
        """The update of the module docstring for tensors at step t, a whole list per kernel call
        (torch._foreach_*: one pass over the list instead of ~10 Python-dispatched ops per tensor)."""
        beta1, beta2 = group["betas"]
        grads = [p.grad for p in params]
        m = [self.state[p]["exp_avg"] for p in params]
        v = [self.state[p]["exp_avg_sq"] for p in params]
        torch._foreach_lerp_(m, grads, 1 - beta1)
        torch._foreach_mul_(v, beta2)
        torch._foreach_addcmul_(v, grads, grads, value=1 - beta2)
        denom = torch._foreach_div(v, 1 - beta2 ** t)
        torch._foreach_sqrt_(denom)
        torch._foreach_add_(denom, group["eps"])
        update = torch._foreach_div(m, 1 - beta1 ** t)
        torch._foreach_div_(update, denom)
        if group["weight_decay"]:
            torch._foreach_add_(update, params, alpha=group["weight_decay"])
        # the trust ratios as one tensor: no device-to-host sync per parameter on a GPU
        w_norm = torch.stack(torch._foreach_norm(params))
        u_norm = torch.stack(torch._foreach_norm(update))
        ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
        torch._foreach_mul_(update, list((ratio * group["lr"]).unbind()))
        torch._foreach_sub_(params, update)
