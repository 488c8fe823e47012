"""Selectors of attention (encoder self, decoder self and cross attention): the contract and
the one attention module (``base``), one module a selector, and the registry by name
(``registry``). See docs/selectors.md."""

from .base import SITES, Selection, Selector, SelectorMultiheadAttention, SiteContext  # noqa: F401
from .registry import SELECTORS, register_selector, selector_class, selector_options  # noqa: F401
