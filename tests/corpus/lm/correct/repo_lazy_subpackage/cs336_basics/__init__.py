__version__ = "0.1.0"

from .nn.layers import Embedding, Linear  # noqa: F401
