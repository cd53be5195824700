"""The `lm` assignment (CS336 assignment 1), declared as a repository pack (pack.py)."""
