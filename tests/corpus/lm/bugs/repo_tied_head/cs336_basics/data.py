import numpy as np
import torch


def get_batch(dataset, batch_size, context_length, device):
    # a window needs context_length + 1 tokens: the last start is len - context_length - 1
    starts = np.random.randint(0, len(dataset) - context_length, size=batch_size)
    x = np.stack([dataset[s:s + context_length] for s in starts])
    y = np.stack([dataset[s + 1:s + 1 + context_length] for s in starts])
    return (torch.from_numpy(x.astype(np.int64)).to(device),
            torch.from_numpy(y.astype(np.int64)).to(device))
