import math

import torch


class AdamW(torch.optim.Optimizer):
    """Decoupled weight decay, applied before the Adam step as torch.optim.AdamW does."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        with torch.no_grad():
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    st = self.state[p]
                    if not st:
                        st["step"] = 0
                        st["exp_avg"] = torch.zeros_like(p)
                        st["exp_avg_sq"] = torch.zeros_like(p)
                    st["step"] += 1
                    grad = p.grad + group["weight_decay"] * p
                    st["exp_avg"].lerp_(grad, 1 - beta1)
                    st["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                    bc1 = 1 - beta1 ** st["step"]
                    bc2 = 1 - beta2 ** st["step"]
                    denom = (st["exp_avg_sq"] / bc2).sqrt() + group["eps"]
                    p.addcdiv_(st["exp_avg"], denom, value=-group["lr"] / bc1)
        return loss


def get_lr_cosine_schedule(t, alpha_max, alpha_min, T_w, T_c):
    if t < T_w:
        return t * alpha_max / T_w
    elif T_w <= t <= T_c:
        return alpha_min + (1 + math.cos((t - T_w) / (T_c - T_w) * math.pi)) * (alpha_max - alpha_min) / 2
    else:
        return alpha_min
