class Tokenizer:
    pass
