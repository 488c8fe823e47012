"""Experiment bookkeeping: the resumable runner of comparison plans (``runner``), archiving
runs with paths relative to the project root (``archive``), training curves from fairseq's
JSON logs (``train_log``) and the results tables regenerated from the archives
(``tables``, one module per kind of archive)."""
