"""The `reversal` assignment, declared as a one-file pack (pack.py)."""
