"""BPE tokenizer; compared against tiktoken's GPT-2 encoding while developing."""
import tiktoken
from tqdm import tqdm


class Tokenizer:
    def __init__(self, vocab, merges, special_tokens=None):
        self.vocab, self.merges = vocab, merges
        self.special_tokens = special_tokens or []
        self._ref = tiktoken.get_encoding("gpt2")

    def encode(self, text):
        raise NotImplementedError

    def decode(self, ids):
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")


def train_bpe(input_path, vocab_size, special_tokens):
    vocab = {i: bytes([i]) for i in range(256)}
    for _ in tqdm(range(vocab_size - 256)):
        raise NotImplementedError
    return vocab, []
