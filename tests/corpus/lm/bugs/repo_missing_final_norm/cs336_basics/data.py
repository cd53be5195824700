import numpy as np
import torch


def get_batch(x, batch_size, context_length, device):
    ix = torch.randint(len(x) - context_length, (batch_size,))
    inputs = torch.stack([torch.from_numpy(x[i:i + context_length].astype(np.int64)) for i in ix.tolist()])
    targets = torch.stack([torch.from_numpy(x[i + 1:i + 1 + context_length].astype(np.int64)) for i in ix.tolist()])
    if "cuda" in str(device):
        return inputs.pin_memory().to(device, non_blocking=True), targets.pin_memory().to(device, non_blocking=True)
    return inputs.to(device), targets.to(device)
