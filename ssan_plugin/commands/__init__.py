"""The project's command-line tools: one module per command, each with ``main(argv=None)``
returning the exit status.

Installed as console scripts named ``ssan-`` + the module name with dashes (``evaluate_bleu``
-> ``ssan-evaluate-bleu``, listed in setup.py); ``python -m ssan_plugin.commands.evaluate_bleu``
runs the same code without the installed scripts (the runners use that form). A command imports
fairseq and torch only on the paths that need them, so scoring text files starts in about a
second; a command that loads a checkpoint calls ``ssan_plugin.register()`` first.
"""

PACKAGE = __name__


def console_name(module: str) -> str:
    """``ssan_plugin.commands.evaluate_bleu`` (or ``evaluate_bleu``) -> ``ssan-evaluate-bleu``."""
    return "ssan-" + module.rpartition(".")[2].replace("_", "-")


def module_command(name: str) -> list:
    """The interpreter arguments that run command ``name``: ``["-m", "ssan_plugin.commands.NAME"]``."""
    return ["-m", f"{PACKAGE}.{name}"]
