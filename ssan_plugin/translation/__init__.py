"""Translation data pipeline and evaluation.

One concern per module:

- ``textio``: strict UTF-8 reading, line counts, checksums, the ``PipelineError`` users see;
- ``languages``: per-language normalisation, Moses (de)tokenisation, Romanian and Japanese
  handling, and the tokenisation used for tokenised BLEU;
- ``prepare``: raw parallel files -> filtered, sentencepiece-encoded fairseq data-bin + manifest;
- ``decode``: fairseq-generate on a data-bin, order restored, every sentence checked;
- ``evaluate``: sacrebleu scores, paired significance test, markdown table and JSON.

The command-line front ends are ``scripts/prepare_translation.py`` and
``scripts/evaluate_bleu.py``.
"""
