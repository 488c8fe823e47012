"""Experiment bookkeeping: comparison plans (``plan``: what runs exist and what each is) and
their resumable runner (``runner``, which imports ``plan``, never the reverse), archiving runs
with paths relative to the project root (``archive``), training curves from fairseq's JSON
logs (``train_log``) and the results tables regenerated from the archives (``tables``, one
module per kind of archive)."""
