"""The selectors by name: ``--encoder-selector NAME`` (docs/selectors.md). One line a selector."""

from typing import Dict, List, Type

from . import entmax, fixed_mask, gate, gumbel, soft, topk
from .base import Selector
from ...cli.errors import OptionError

SELECTORS: Dict[str, Type[Selector]] = {
    "gumbel": gumbel.GumbelSelector,
    "soft": soft.SoftSelector,
    "topk": topk.TopKSelector,
    "entmax": entmax.EntmaxSelector,
    "gate": gate.GateSelector,
    "fixed_mask": fixed_mask.FixedMaskSelector,
}


def selector_class(name: str) -> Type[Selector]:
    """The registered selector ``name``; an option error naming the choices otherwise."""
    try:
        return SELECTORS[name]
    except KeyError:
        raise OptionError(f"--encoder-selector must be one of {', '.join(SELECTORS)}, got "
                          f"{name!r}") from None


def selector_options() -> List[type]:
    """Every selector's options dataclass, once each (gumbel and soft share SSAN's), in
    registry order."""
    seen: List[type] = []
    for selector in SELECTORS.values():
        if selector.options is not None and selector.options not in seen:
            seen.append(selector.options)
    return seen
