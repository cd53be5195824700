import torch


def cross_entropy(logits, targets):
    # log-sum-exp trick: never exponentiate a large logit
    logits = logits.float()
    lse = torch.logsumexp(logits, dim=-1)
    target_logit = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (lse - target_logit).mean()


def gradient_clipping(parameters, max_l2_norm, eps=1e-6):
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return
    total = torch.sqrt(sum((g.detach() ** 2).sum() for g in grads))
    if total > max_l2_norm:
        scale = max_l2_norm / (total + eps)
        for g in grads:
            g.mul_(scale)
