import math

import numpy as np
import torch


def cross_entropy(logits, targets):
    logits = logits.reshape(-1, logits.size(-1))  # any leading dims
    targets = targets.reshape(-1)
    return (torch.logsumexp(logits, -1) - logits[torch.arange(logits.size(0)), targets]).mean()


def clip_grad_norm(parameters, max_norm):
    grads = [p.grad for p in parameters if p.grad is not None]
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    if norm > max_norm:
        torch._foreach_mul_(grads, max_norm / (norm.item() + 1e-6))
    return norm


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    st.update(step=torch.tensor(0.0), m=torch.zeros_like(p), v=torch.zeros_like(p))
                st["step"] += 1
                t = st["step"].item()
                st["m"].mul_(b1).add_(p.grad, alpha=1 - b1)
                st["v"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                m_hat = st["m"] / (1 - b1 ** t)
                v_hat = st["v"] / (1 - b2 ** t)
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.sub_(group["lr"] * m_hat / (v_hat.sqrt() + group["eps"]))
        return loss


def cosine_lr(it, lr_max, lr_min, warmup, cycle):
    if it < warmup:
        return lr_max * it / warmup
    if it > cycle:
        return lr_min
    return lr_min + (lr_max - lr_min) * (1 + math.cos(math.pi * (it - warmup) / (cycle - warmup))) / 2


def sample_batch(tokens, batch_size, context_length, device="cpu"):
    starts = np.random.choice(len(tokens) - context_length, size=batch_size, replace=True)
    windows = np.stack([tokens[s:s + context_length + 1] for s in starts]).astype(np.int64)
    batch = torch.from_numpy(windows).to(device)
    return batch[:, :-1], batch[:, 1:]
