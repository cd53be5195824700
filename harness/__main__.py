"""`python -m harness` is `mtxdiag` (handy in a checkout that is not the installed one)."""
from .cli.main import main

main()
