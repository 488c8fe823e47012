"""Semantic role labelling data and evaluation.

- ``brackets``: the CoNLL bracket (Start-End) notation, BIO tags, conversions.
- ``corpus``: Sentence / Proposition records, CoNLLFormatError (``path:line: message``).
- ``conll2012``, ``conll2005``: readers of the two corpus layouts.
- ``props``: CoNLL-2005 props files (what srl-eval.pl reads).
- ``scorer``: span precision / recall / F1 exactly as srl-eval.pl computes them.
- ``viterbi``: BIO-constrained decoding.
- ``datadir``: the prepared data directory: file names per split, the instances table.
- ``binarize``: corpus -> data directory (dictionaries, instances, indexed datasets, manifest).
- ``evaluate``: decode a split with a checkpoint, write gold/predicted props, score.
- ``validation``: span counts instance by instance (the validation F1 of the ``srl`` task).
- ``compare``: several systems' props files scored against the gold, each compared with the
  first by the paired bootstrap; F1 per label, by sentence length, by argument distance.

Only ``binarize`` (fairseq Dictionary, indexed datasets) and ``evaluate`` (checkpoints, the
task) use fairseq. The fairseq side lives in ``ssan_plugin.tasks.srl`` (task),
``ssan_plugin.models.srl_tagger`` (model) and ``ssan_plugin.criterions.srl_cross_entropy``
(criterion). The command-line front ends are ``ssan-prepare-srl`` and
``ssan-evaluate-srl``.
"""
