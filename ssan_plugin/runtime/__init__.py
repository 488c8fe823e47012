"""Process glue the plugin installs when fairseq loads it: the allow-list of globals that
fairseq checkpoints pickle (``checkpoint_safety``) and a clean exit past fairseq's prefetch
threads (``clean_exit``). Standard library and torch only; nothing here imports fairseq at
module level."""
