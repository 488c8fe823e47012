"""Process glue that ``ssan_plugin.register()`` installs: the allow-list of globals that
fairseq checkpoints pickle (``checkpoint_safety``: the standard library and torch at module
level, omegaconf and fairseq only inside its functions) and a clean exit past fairseq's
prefetch threads (``clean_exit``, which imports fairseq at module level: only ``register()``
imports it, and that imports fairseq anyway)."""
