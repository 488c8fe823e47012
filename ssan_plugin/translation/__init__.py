"""Translation data pipeline and evaluation.

One concern per module:

- ``textio``: strict UTF-8 reading, line counts, checksums, the ``PipelineError`` users see;
- ``languages``: per-language normalisation, Moses (de)tokenisation, Romanian and Japanese
  handling, and the tokenisation used for tokenised BLEU;
- ``pipeline``: the manifest's text pipeline (raw source -> sentencepiece pieces, output
  pieces -> detokenised text), shared by preparation, evaluation and translation;
- ``prepare``: raw parallel files -> filtered, sentencepiece-encoded fairseq data-bin + manifest;
- ``checkpoints``: safe checkpoint loading, checkpoint vs data-bin dictionary checks;
- ``decode``: fairseq-generate on a data-bin, order restored, every sentence checked;
- ``evaluate``: sacrebleu scores, paired significance test, markdown table and JSON;
- ``translator``: raw sentences -> translations in-process (``ssan_plugin.hub.load``);
- ``average``: checkpoint averaging;
- ``alignment``: word alignments: gold links (sure, possible), precision / recall / AER, links
  between sentencepiece pieces mapped back to words.

The command-line front ends are ``ssan-prepare-translation``,
``ssan-evaluate-bleu``, ``ssan-translate`` and ``ssan-average-checkpoints``.
"""
