"""Selectors of encoder self-attention: the contract and the one attention module (``base``),
one module a selector, and the registry by name (``registry``). See docs/selectors.md."""

from .base import Selection, Selector, SelectorMultiheadAttention  # noqa: F401
from .registry import SELECTORS, register_selector, selector_class, selector_options  # noqa: F401
