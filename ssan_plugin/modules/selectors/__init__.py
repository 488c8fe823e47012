"""Selectors of encoder self-attention: the interface (``base``), one module a selector, and
the registry by name (``registry``). See docs/selectors.md."""

from .base import Selection, Selector, SelectorMultiheadAttention  # noqa: F401
from .registry import SELECTORS, selector_class, selector_options  # noqa: F401
