import torch


def cross_entropy(logits, targets):
    # log-sum-exp trick: never exponentiate a large logit
    logits = logits.float()
    lse = torch.logsumexp(logits, dim=-1)
    target_logit = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (lse - target_logit).mean()
