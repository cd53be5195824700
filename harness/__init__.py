"""mtxdiag: diagnose and grade students' PyTorch transformers.

The data path is a pipeline, one module per stage:
    loader (child)  ->  probes (child)  ->  runner (parent: validate)
    ->  engine (parent: symptoms -> ranked causes)  ->  report
"""
__version__ = "0.1.0"
