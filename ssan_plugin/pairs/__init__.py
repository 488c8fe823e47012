"""Sentence-pair data (SICK, SNLI): readers, preparation, metrics, evaluation, transfer.

- ``corpus``: the SICK (tab-separated) and SNLI (s1/s2/labels) readers, strict, errors name
  the file and line;
- ``datadir``: the prepared data directory's layout (shared by the writer and every reader);
- ``prepare``: raw pairs -> normalised, sentencepiece (or word) encoded fairseq data + manifest,
  through the translation pipeline's own functions;
- ``metrics``: accuracy, per-class F1, confusion matrix, Pearson / Spearman / MSE, paired
  tests;
- ``relatedness``: the relatedness head's maths under ``--relatedness-loss`` (Tai et al.'s
  target distribution, the predicted score), shared by the model and the criterion;
- ``transfer``: a translation encoder's weights into the pair model's encoder;
- ``evaluate``: checkpoints -> predictions, metrics and comparisons.

Front ends: ``ssan-prepare-pairs``, ``ssan-evaluate-pairs``; fairseq side:
``tasks/sentence_pair.py``, ``models/pair_classifier.py``, ``criterions/sentence_pair_loss.py``.
"""
