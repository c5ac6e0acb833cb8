"""TE's transformer_engine.pytorch.attention: DotProductAttention (dot_product_attention/),
MultiheadAttention (multi_head_attention.py) and RotaryPositionEmbedding (rope.py, with
apply_rotary_pos_emb). TE's InferenceParams (KV caching) and FusedMLAQUpProjRopeQuant are not
provided."""
from .dot_product_attention import DotProductAttention
from .multi_head_attention import MultiheadAttention
from .rope import RotaryPositionEmbedding

__all__ = ["DotProductAttention", "MultiheadAttention", "RotaryPositionEmbedding"]
