class Tokenizer:
    def __init__(self, vocab, merges, special_tokens=None):
        raise NotImplementedError  # TODO after the model works


def train_bpe(input_path, vocab_size, special_tokens):
    raise NotImplementedError
