"""ssan_plugin: selective and directional self-attention encoders for fairseq.

Use it as ``--user-dir ssan_plugin`` with fairseq-train / -generate / -interactive /
-validate, or ``import ssan_plugin`` before loading a checkpoint from Python. Importing it
registers the models, criteria and tasks, and allow-lists the globals fairseq checkpoints need
under torch's weights_only loader (see checkpoint_safety), and stops fairseq's data-prefetch
threads at exit, which could otherwise abort a finished fairseq-train (see clean_exit).
"""

import logging
import sys
import warnings

# fairseq.tasks.frm_text_to_speech calls logging.basicConfig(level=DEBUG) when fairseq's tasks
# are imported. In a process whose logging is not configured yet (a script that imports the
# plugin before its own set-up) every library's DEBUG lines would then reach stderr
# (matplotlib's font search, ...); fairseq's CLIs configure logging first and are unaffected.
_LOGGING_UNCONFIGURED = not logging.getLogger().handlers

from .checkpoint_safety import allow_fairseq_checkpoint_globals  # noqa: E402

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

# fairseq's speech task logs "Please install tensorboardX" at INFO whenever fairseq's tasks are
# imported (tensorboardX is only for its speech training; fairseq-train --tensorboard-logdir
# uses torch's SummaryWriter here); before any logging is configured that line reaches
# every script's screen.
logging.getLogger("fairseq.tasks.text_to_speech").setLevel(logging.WARNING)

allow_fairseq_checkpoint_globals()

from .clean_exit import register as _register_clean_exit  # noqa: E402

_register_clean_exit()  # fairseq-train's prefetch thread could abort the exit (clean_exit)

from .cli import install_option_error_hook  # noqa: E402

# a plugin option refused while fairseq builds the model: one line and exit 2, as argparse does
install_option_error_hook()

from . import criterions, models  # noqa: E402,F401  (registrations)
from .tasks import sentence_pair, srl  # noqa: E402,F401  (register the tasks)

if _LOGGING_UNCONFIGURED:
    from .cli import StderrHandler  # noqa: E402

    _root = logging.getLogger()
    if _root.level == logging.DEBUG:
        _root.setLevel(logging.INFO)  # what fairseq's own CLIs use
    # fairseq's basicConfig bound its handler to the sys.stderr of import time; one that
    # follows the current sys.stderr instead (a caller that redirects it later, e.g. pytest's
    # capture, would otherwise leave a handler on a closed stream)
    for _handler in list(_root.handlers):
        if type(_handler) is logging.StreamHandler and _handler.stream is sys.stderr:
            _root.removeHandler(_handler)
            _follower = StderrHandler()
            _follower.setFormatter(_handler.formatter)
            _follower.setLevel(_handler.level)
            _root.addHandler(_follower)
