"""nvfp4.common: the framework-independent part of TransformerEngine's API, at TE's path
(``transformer_engine.common``): ``nvfp4.common.recipe`` holds TE's recipe classes, so

    from nvfp4.common import recipe      # was: from transformer_engine.common import recipe
"""
from . import recipe

__all__ = ["recipe"]
