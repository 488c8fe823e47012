"""The workflows behind the analysis commands (``ssan-show-selection``,
``ssan-selection-stats``, ``ssan-probe``, ``ssan-induce-trees``): model and data in, JSON-friendly
results out. Bad input raises :class:`~ssan_plugin.errors.PipelineError` with one
line naming the problem. See examples/analysis/README.md."""

import json
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np

from ..errors import PipelineError
from .inputs import AnalysisInput
from .maps import (UnsupportedEncoder, layer_kinds, learnt_selector_values, maps_json, plot_grid,
                   selective_layers, sentence_maps, to_words)


def _maps(inp: AnalysisInput, tokens, **kwargs):
    try:
        return list(sentence_maps(inp.model, tokens, inp.pad_idx, **kwargs))
    except UnsupportedEncoder as err:
        raise PipelineError(str(err)) from None


def show_selection(inp: AnalysisInput, lines: Sequence[str], out_dir,
                   targets: Optional[Sequence[str]] = None) -> List[Path]:
    """Per sentence k (1-based): ``sentK.json`` (pieces, per layer and head the 0/1 selection
    and the attention matrix), ``sentK_selection.png`` and ``sentK_attention.png`` (layers x
    heads grids; only the maps the model has). With ``targets`` (one reference translation a
    sentence, teacher-forced), a model that selects in its decoder also gets
    ``sentK_decoder_selection.png`` (target x target) and ``sentK_cross_selection.png`` (target
    x source), and the JSON their 0/1 selections (``target_pieces``, ``decoder``, ``cross``).
    Returns the files written."""
    from .alignments import decoder_selection_maps

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    encoded = inp.encode_lines(lines)
    if targets is not None and len(targets) != len(lines):
        raise PipelineError(f"{len(targets)} target sentences for {len(lines)} sources")
    target_encoded = inp.encode_lines(targets, side="target") if targets is not None else None
    kinds = layer_kinds(inp.model)
    written = []
    for k, (line, enc, maps) in enumerate(zip(lines, encoded, _maps(inp, [e.tokens for e in encoded])), 1):
        path = out_dir / f"sent{k}.json"
        record = maps_json(enc.pieces, maps, kinds, line)
        decoder_panels = {}
        if target_encoded is not None:
            tgt = target_encoded[k - 1]
            decoder_panels = decoder_selection_maps(inp.model, enc.tokens, tgt.tokens)
            record["target"] = targets[k - 1]
            record["target_pieces"] = tgt.pieces
            for site, panels in decoder_panels.items():
                record[site] = {str(layer): panel.int().tolist() for layer, panel in sorted(panels.items())}
        path.write_text(json.dumps(record) + "\n", encoding="utf-8")
        written.append(path)
        for site, panels in decoder_panels.items():
            if panels:
                png = out_dir / f"sent{k}_{site}_selection.png"
                plot_grid(panels, tgt.pieces, png, "selection",
                          title=f"{site} selection: {targets[k - 1][:80]}",
                          key_pieces=tgt.pieces if site == "decoder" else enc.pieces)
                written.append(png)
        for what, panels in (("selection", maps.selection), ("attention", maps.attention)):
            if panels:
                png = out_dir / f"sent{k}_{what}.png"
                vmax = 1.0 if what == "selection" else max(float(t.max()) for t in panels.values()) or 1.0
                plot_grid(panels, enc.pieces, png, what, title=f"{what}: {line[:80]}", vmax=vmax,
                          kinds=kinds)
                written.append(png)
    return written


def selection_stats(inp: AnalysisInput, conll) -> dict:
    """:class:`~ssan_plugin.analysis.word_classes.WordClassStats` over the sentences of a
    CoNLL-2012 file (words and POS tags), as a dict: the layers that select (SSAN, ReSA, every
    selector of ``selective_transformer``; maps.py says what counts as selected), with each
    layer's learnt per-head selector values under ``learnt`` (entmax's alpha; empty if none)."""
    from .trees import read_parsed_conll
    from .word_classes import WordClassStats

    if not selective_layers(inp.model):
        raise PipelineError("the model has no selective encoder layer (ssan, resa or a selector "
                            "of selective_transformer): nothing is selected, every pair attends")
    sentences = read_parsed_conll(conll)
    encoded = inp.encode_words([s.words for s in sentences])
    stats = WordClassStats()
    for s, enc, maps in zip(sentences, encoded, _maps(inp, [e.tokens for e in encoded], attention=False)):
        stats.add(maps.selection, enc.word_index, s.tags)
    return {"conll": str(conll), "kinds": {str(k): v for k, v in layer_kinds(inp.model).items()},
            "learnt": {str(k): v for k, v in learnt_selector_values(inp.model).items()},
            **stats.as_dict()}


def probe(inp: AnalysisInput, task: str, probing_file, classifier: str = "logreg",
          seed: int = 1, wrd_target: str = "inserted") -> dict:
    """Probing accuracy per layer (:func:`ssan_plugin.analysis.probe.run_probe`) on a SentEval
    probing file. For ``wrd`` the class predicted is, by ``wrd_target``, the position of the
    moved word (``inserted``, the label's first number), its original slot (``original``, the
    second), or the pair (``pair``)."""
    from .probe import pooled_layer_features, run_probe
    from .probing_data import TASKS, read_probing_file

    if task not in TASKS:
        raise PipelineError(f"unknown probing task {task!r} (choose from {', '.join(TASKS)})")
    examples = read_probing_file(probing_file)
    labels = [e[1] for e in examples]
    if task == "wrd":
        pick = {"inserted": 0, "original": 1}.get(wrd_target)
        if pick is not None:
            labels = [label.split()[pick] for label in labels]
    encoded = inp.encode_lines([e[2] for e in examples])
    states = [m.states for m in _maps(inp, [e.tokens for e in encoded], attention=False, states=True)]
    try:
        out = run_probe(pooled_layer_features(states), [e[0] for e in examples], labels, task,
                        classifier, seed)
    except ValueError as err:
        raise PipelineError(f"{probing_file}: {err}") from None
    out["probing_file"] = str(probing_file)
    if task == "wrd":
        out["wrd_target"] = wrd_target
    return out


def induce_trees(inp: AnalysisInput, conll) -> dict:
    """Split-point trees from each layer's head-averaged, word-level attention, scored against
    the CoNLL file's trees (:mod:`ssan_plugin.analysis.trees`), with the right-branching
    baseline."""
    from .trees import SpanScore, read_parsed_conll, score_spans

    sentences = read_parsed_conll(conll)
    encoded = inp.encode_words([s.words for s in sentences])
    scores, baseline = {}, SpanScore()
    for s, enc, maps in zip(sentences, encoded, _maps(inp, [e.tokens for e in encoded])):
        if not maps.attention:
            raise PipelineError("the model records no attention weights (resa layers only?): "
                                "tree induction needs transformer, ssan, selector, disan or "
                                "biblosan layers")
        for i, (layer, att) in enumerate(sorted(maps.attention.items())):
            words = to_words(att.mean(0), enc.word_index, len(s.words)).numpy()
            score_spans(s, words, scores.setdefault(layer, SpanScore()), baseline if i == 0 else None)
    return {"conll": str(conll), "n_sentences": len(sentences),
            "layers": [{"layer": layer, **score.as_dict()} for layer, score in sorted(scores.items())],
            "right_branching": baseline.as_dict()}


def write_json(data: dict, path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, default=lambda x: float(x) if isinstance(x, np.floating) else str(x))
        f.write("\n")
