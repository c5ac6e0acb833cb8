"""TE's transformer_engine.pytorch.attention.dot_product_attention: the DotProductAttention module
(dot_product_attention.py), its attention core (backends.py) and mask helpers (utils.py)."""
from .dot_product_attention import DotProductAttention

__all__ = ["DotProductAttention"]
