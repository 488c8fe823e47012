"""ssan_plugin: selective and directional self-attention encoders for fairseq.

Use it as ``--user-dir ssan_plugin`` with fairseq-train / -generate / -interactive /
-validate, or from Python through ``ssan_plugin.hub`` (or ``import ssan_plugin`` and then
fairseq's own loaders). Registration (:func:`register`) gives fairseq the plugin's models,
criteria and tasks, allow-lists the globals fairseq checkpoints need under torch's weights_only
loader (``runtime.checkpoint_safety``), stops fairseq's data-prefetch threads at exit, which
could otherwise abort a finished fairseq-train (``runtime.clean_exit``), and turns a refused
plugin option into one line (``errors``).

It happens when fairseq is imported, not before: at once if fairseq already is (``--user-dir``,
or a caller that imported fairseq first), otherwise right after ``import fairseq`` completes.
So a command that never needs fairseq (scoring two text files) does not pay the seconds its
import takes. Code that imports a plugin module which itself imports fairseq, before fairseq,
gets that module's registrations only; it calls :func:`register` (the commands, the hub and
every checkpoint loader of the plugin do).
"""

import importlib.abc
import importlib.util
import logging
import sys
import warnings

# Deprecation warnings that fairseq 0.12 itself triggers in hydra and torch on every run
# (fairseq-train, -generate, ... import this package through --user-dir before they start).
# Nothing the plugin or its users can fix; each filter names the message and the module that
# warns, so any other warning, the plugin's own included, still shows.
_FAIRSEQ_STACK_WARNINGS = (
    # fairseq's dataclass/utils.py: hydra.experimental initialize/compose, no version_base
    (r"hydra\.experimental\.(initialize|compose)\(\) is no longer experimental",
     r"hydra\.experimental\.(initialize|compose)$"),
    (r"\s*The version_base parameter is not specified", r"hydra\.experimental\.initialize$"),
    (r"In 'config': Usage of deprecated keyword in package header '# @package _group_'",
     r"hydra\.core\.default_element$"),
    (r"\s*'config' is validated against ConfigStore schema with the same name", r"sys$"),
    (r"\s*The strict flag in the compose API is deprecated", r"hydra\.compose$"),
    # fairseq's MultiheadAttention: bool key_padding_mask with the decoder's float future mask
    (r"Support for mismatched key_padding_mask and attn_mask is deprecated",
     r"torch\.nn\.functional$"),
    # fairseq's train_step on CPU
    (r"`torch\.cuda\.amp\.autocast\(args\.\.\.\)` is deprecated", r"fairseq\.tasks\.fairseq_task$"),
    # fairseq's data iterator asks for pinned memory, also without an accelerator
    (r"'pin_memory' argument is set as true but no accelerator is found",
     r"torch\.utils\.data\.dataloader$"),
)
for _message, _module in _FAIRSEQ_STACK_WARNINGS:
    warnings.filterwarnings("ignore", message=_message, module=_module)

_registered = False


def register(logging_was_unconfigured: bool = False) -> None:
    """Register the plugin with fairseq (idempotent; imports fairseq). ``logging_was_unconfigured``:
    no logging handler existed before fairseq was imported, so the handler fairseq's import
    installed on the stderr of that moment is replaced by one that follows ``sys.stderr``."""
    global _registered
    if _registered:
        return
    _registered = True
    # fairseq's speech task logs "Please install tensorboardX" at INFO whenever fairseq's tasks
    # are imported (tensorboardX is only for its speech training; fairseq-train
    # --tensorboard-logdir uses torch's SummaryWriter here).
    logging.getLogger("fairseq.tasks.text_to_speech").setLevel(logging.WARNING)

    from .errors import install_option_error_hook
    from .runtime.checkpoint_safety import allow_fairseq_checkpoint_globals
    from .runtime.clean_exit import register as register_clean_exit

    allow_fairseq_checkpoint_globals()
    register_clean_exit()  # fairseq-train's prefetch thread could abort the exit
    install_option_error_hook()  # a refused plugin option: one line and exit 2, as argparse

    from . import criterions, models  # noqa: F401  (registrations)
    from .tasks import sentence_pair, srl  # noqa: F401  (register the tasks)

    if logging_was_unconfigured:
        _follow_stderr(logging.getLogger())


def _follow_stderr(root: logging.Logger) -> None:
    """fairseq.tasks.frm_text_to_speech calls logging.basicConfig(level=DEBUG) when fairseq's
    tasks are imported; in a process whose logging was not configured yet, every library's DEBUG
    lines would reach stderr (matplotlib's font search, ...), through a handler bound to the
    sys.stderr of that moment (a caller that redirects it later, e.g. pytest's capture, would
    keep a handler on a closed stream). INFO, as fairseq's CLIs use, on the current stderr."""
    from .cli.arguments import StderrHandler

    if root.level == logging.DEBUG:
        root.setLevel(logging.INFO)
    for handler in list(root.handlers):
        if type(handler) is logging.StreamHandler and handler.stream is sys.stderr:
            root.removeHandler(handler)
            follower = StderrHandler()
            follower.setFormatter(handler.formatter)
            follower.setLevel(handler.level)
            root.addHandler(follower)


def _plugin_module_initializing() -> bool:
    """Some ``ssan_plugin`` module is part-way through its own import (registering now would
    import it again, half made)."""
    return any(getattr(getattr(module, "__spec__", None), "_initializing", False)
               for name, module in list(sys.modules.items())
               if name.startswith(__name__ + "."))


class _RegisterAfterFairseq(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """One-shot import hook: when ``fairseq`` is first imported, load it with its own loader,
    then :func:`register` (unless a plugin module is half-imported, see the module docstring)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "fairseq":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)  # the finders that come after this one
        if spec is None or spec.loader is None:
            return spec
        self.loader = spec.loader
        self.logging_was_unconfigured = not logging.getLogger().handlers
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        if not _plugin_module_initializing():
            register(self.logging_was_unconfigured)


if "fairseq" in sys.modules:
    register()
elif not any(isinstance(finder, _RegisterAfterFairseq) for finder in sys.meta_path):
    sys.meta_path.insert(0, _RegisterAfterFairseq())
