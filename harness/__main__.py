"""`python -m harness` is `mtxdiag` (handy in a checkout that is not the installed one)."""
from .cli import main

main()
