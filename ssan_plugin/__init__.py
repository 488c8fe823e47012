"""ssan_plugin: selective and directional self-attention encoders for fairseq.

Use it as ``--user-dir ssan_plugin`` with fairseq-train / -generate / -interactive /
-validate, or ``import ssan_plugin`` before loading a checkpoint from Python. Importing it
registers the models, criteria and tasks, and allow-lists the globals fairseq checkpoints need
under torch's weights_only loader (see checkpoint_safety).
"""

from .checkpoint_safety import allow_fairseq_checkpoint_globals

allow_fairseq_checkpoint_globals()

from . import criterions, models  # noqa: E402,F401  (registrations)
from .tasks import srl  # noqa: E402,F401  (registers the srl task)
