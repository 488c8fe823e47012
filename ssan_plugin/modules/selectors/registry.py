"""The selectors by name: ``--encoder-selector NAME`` (docs/selectors.md). One line a selector;
a selector defined outside the package (a user dir of one's own, a test) joins with
:func:`register_selector`."""

import inspect
from typing import Dict, List, Type

from . import entmax, fixed_mask, gate, gumbel, soft, topk
from .base import Selector
from ...errors import OptionError

SELECTORS: Dict[str, Type[Selector]] = {
    "gumbel": gumbel.GumbelSelector,
    "soft": soft.SoftSelector,
    "topk": topk.TopKSelector,
    "entmax": entmax.EntmaxSelector,
    "gate": gate.GateSelector,
    "fixed_mask": fixed_mask.FixedMaskSelector,
}


def register_selector(cls: Type[Selector]) -> Type[Selector]:
    """Add the selector class ``cls`` under ``cls.name`` (usable as a class decorator); it is
    then an ``--encoder-selector`` choice with its options, as the package's own. Its module must
    be imported before fairseq parses the command line (e.g. from the ``--user-dir`` package).
    A name already taken by another class is refused (the same class imported again under
    another module name, as fairseq's ``--user-dir`` may do, replaces itself)."""
    if not (isinstance(cls, type) and issubclass(cls, Selector)):
        raise TypeError(f"register_selector takes a Selector subclass, got {cls!r}")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"{cls.__name__}.name must be an identifier, got {name!r}")
    taken = SELECTORS.get(name, cls)
    if taken is not cls and not _same_definition(taken, cls):
        raise ValueError(f"selector name {name!r} is taken by {SELECTORS[name].__qualname__}")
    SELECTORS[name] = cls
    return cls


def _same_definition(a: type, b: type) -> bool:
    """Whether two classes are one definition (the same source file and qualified name)."""
    try:
        return a.__qualname__ == b.__qualname__ and inspect.getsourcefile(a) == inspect.getsourcefile(b)
    except TypeError:  # a class without a source file (built-in, or defined in a REPL)
        return False


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
