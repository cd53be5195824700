"""A small byte-level BPE (training and encoding), enough for the tokenizer adapters."""
from collections import Counter

import regex as re

PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def _merge(word, pair, new):
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def train_bpe(input_path, vocab_size, special_tokens):
    vocab = {i: bytes([i]) for i in range(256)}
    for tok in special_tokens:
        vocab[len(vocab)] = tok.encode()
    text = open(input_path, encoding="utf-8").read()
    chunks = re.split("|".join(map(re.escape, special_tokens)), text) if special_tokens else [text]
    words = Counter(tuple(bytes([b]) for b in m.group().encode())
                    for chunk in chunks for m in re.finditer(PAT, chunk))
    merges = []
    while len(vocab) < vocab_size:
        pairs = Counter()
        for w, n in words.items():
            for p in zip(w, w[1:]):
                pairs[p] += n
        if not pairs:
            break
        best = max(pairs, key=lambda p: (pairs[p], p))
        merges.append(best)
        vocab[len(vocab)] = best[0] + best[1]
        words = Counter({_merge(w, best, best[0] + best[1]): n for w, n in words.items()})
    return vocab, merges


class Tokenizer:
    def __init__(self, vocab, merges, special_tokens=None):
        self.vocab = dict(vocab)
        self.ids = {b: i for i, b in self.vocab.items()}
        self.rank = {m: r for r, m in enumerate(merges)}
        self.special = sorted(special_tokens or [], key=len, reverse=True)

    def _encode_word(self, word):
        w = tuple(bytes([b]) for b in word.encode())
        while len(w) > 1:
            pair = min(zip(w, w[1:]), key=lambda p: self.rank.get(p, float("inf")))
            if pair not in self.rank:
                break
            w = _merge(w, pair, pair[0] + pair[1])
        return [self.ids[b] for b in w]

    def encode(self, text):
        parts = re.split("(" + "|".join(map(re.escape, self.special)) + ")", text) if self.special else [text]
        out = []
        for part in parts:
            if part in self.special:
                out.append(self.ids[part.encode()])
            else:
                for m in re.finditer(PAT, part):
                    out += self._encode_word(m.group())
        return out

    def encode_iterable(self, iterable):
        for chunk in iterable:
            yield from self.encode(chunk)

    def decode(self, ids):
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")
