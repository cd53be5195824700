"""Everything that runs beside the student's code, in the sandboxed child process: the entry point (`main`), the
second process of the training probes (`side`), the warm worker that forks children (`zygote`), the loaders
(a file, a notebook, a repository), the audit hook, the guard, the text scan, and the probes (`probes/`).
Nothing outside this folder imports a module of it except through the torch-free ones that read text (`scan`),
and the parent's entry points never do (tests/unit/test_process_boundary.py)."""
