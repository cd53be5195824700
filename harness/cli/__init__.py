"""The processes a user starts: the `mtxdiag` command (`main`), its `mutants` and `watch` commands, and the check
daemon's server (`daemon`). Thin: they call the API below them."""
