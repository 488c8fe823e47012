"""What the project's commands share: one clear line for bad input.

The conventions (README, "Errors"):

- bad input (an option out of range, a missing / unreadable / undecodable file, a directory
  where a file belongs, an output that cannot be written, a checkpoint of another task) stops
  the script with exit status 2 and ONE line on stderr, ``script.py: error: MESSAGE``, naming
  the option or the file; never a Python traceback. Option values are checked by argparse at
  parse time (the ``*_arg`` types below), so the message is argparse's own:
  ``script.py: error: argument --beam: must be an integer >= 1, got '0'``;
- out-of-range values are refused, never replaced by a default;
- outputs are guarded before any work (``files.guard_outputs``): never one of the inputs, never
  an existing file or a non-empty folder without ``--overwrite``;
- a child process or library step that fails gives one line naming the step and the path of
  a log file holding its whole output (exit status 1: the failure may not be the input's);
- a UTF-8 byte-order mark at the start of a text file is dropped, everywhere the same way
  (``decode_utf8``); invalid UTF-8 names the file, the line and the byte offset.

``InputError`` is the project's base class for such errors (``PipelineError`` of the
translation tools and the SRL readers' errors derive from it); ``script_main`` turns it into
the line above. Nothing here imports torch or fairseq at module level.

The error types and their one-line form are ``ssan_plugin/errors.py`` (below everything: the
attention modules raise them too). Modules here, one concern each (standard library only; torch
is imported when a checkpoint is loaded): ``arguments`` (entry points,
logging, argparse types), ``files`` (input and output checks, text reading), ``steps``
(child processes and library calls), ``checkpoints`` (loading a fairseq checkpoint).
"""
