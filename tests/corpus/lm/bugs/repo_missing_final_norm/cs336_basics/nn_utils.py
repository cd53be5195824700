import torch


def softmax(x, dim=-1):
    m = torch.max(x, dim=dim, keepdim=True).values
    e = torch.exp(x - m)
    return e / torch.sum(e, dim=dim, keepdim=True)


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-1, -2) / (Q.shape[-1] ** 0.5)
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    return softmax(scores, dim=-1) @ V


def cross_entropy(logits, targets):
    logits = logits.reshape(-1, logits.shape[-1])
    targets = targets.reshape(-1)
    m = logits.max(dim=-1, keepdim=True).values
    shifted = logits - m
    log_z = torch.log(torch.exp(shifted).sum(dim=-1))
    correct = shifted[torch.arange(len(targets)), targets]
    return (log_z - correct).mean()


def clip_gradients(params, max_norm):
    params = [p for p in params if p.grad is not None]
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params]))
    coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    for p in params:
        p.grad.detach().mul_(coef)
