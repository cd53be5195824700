"""The isolation machinery, on the trusted parent's side: the sandbox (bubblewrap), the seccomp confinement, a
run's folder, environment and limits, the memory and disk watches, the result pipe, warm workers and the check
daemon's client. Torch-free."""
