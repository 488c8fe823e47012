"""The selectors by name: ``--encoder-selector NAME`` (docs/selectors.md). One line a selector;
a selector defined outside the package (a user dir of one's own, a test) joins with
:func:`register_selector`."""

import copy
import dataclasses
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
    if name == NO_SELECTOR:
        raise ValueError(f"{cls.__name__}.name: {NO_SELECTOR!r} means fairseq's attention")
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


#: the selector option value that keeps fairseq's attention at a site
NO_SELECTOR = "none"


def selector_class(name: str, option: str = "--encoder-selector") -> Type[Selector]:
    """The registered selector ``name``; an option error naming the choices otherwise."""
    try:
        return SELECTORS[name]
    except KeyError:
        raise OptionError(f"{option} must be one of {', '.join(SELECTORS)}, got "
                          f"{name!r}") from None


def _convert(value: str, kind, option: str):
    if kind is bool:
        if value.lower() in ("1", "true", "yes"):
            return True
        if value.lower() in ("0", "false", "no"):
            return False
        raise OptionError(f"{option}: expected true or false, got {value!r}")
    if kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            raise OptionError(f"{option}: expected a number, got {value!r}") from None
    choices = getattr(kind, "_choices", None) or getattr(kind, "__members__", None)
    if choices and value not in [str(c) for c in choices]:
        raise OptionError(f"{option}: expected one of {', '.join(map(str, choices))}, got {value!r}")
    return value


def site_args(args, name: str, site: str, overrides: str = "", option: str = "--encoder-selector"):
    """A copy of ``args`` for selector ``name`` at ``site`` (``selector_site``), with the
    selector's own options overridden by ``overrides``, "KEY=VALUE,..." (KEY: one of its
    options, with dashes or underscores, e.g. ``topk=4`` or ``--entmax-alpha=1.3``); anything
    else is refused in one line naming the selector's options."""
    selector = selector_class(name, option)
    site_copy = copy.copy(args)
    site_copy.selector_site = site
    fields = {f.name: f for f in dataclasses.fields(selector.options)} if selector.options else {}
    fields.pop("_name", None)
    for item in filter(None, (part.strip() for part in (overrides or "").split(","))):
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-").replace("-", "_")
        if not sep or key not in fields:
            known = ", ".join(sorted(fields)) or "none"
            raise OptionError(f"{option}-args {item!r}: the {name} selector's options are {known} "
                              f"(KEY=VALUE, comma-separated)")
        setattr(site_copy, key, _convert(value.strip(), fields[key].type, f"{option}-args {key}"))
    return site_copy


def selector_options() -> List[type]:
    """Every selector's options dataclass, once each (gumbel and soft share SSAN's), in
    registry order."""
    seen: List[type] = []
    for selector in SELECTORS.values():
        if selector.options is not None and selector.options not in seen:
            seen.append(selector.options)
    return seen
