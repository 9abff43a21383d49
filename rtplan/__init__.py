"""rtplan: a real-time game service that learns when to think."""

__version__ = "0.1.0"
__all__ = ["__version__"]
