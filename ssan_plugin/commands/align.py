"""Word alignments of a translation model by forced decoding, scored against gold links.

Reads sentence pairs as tokenised words (``--bitext``, one ``A ||| B`` pair a line, the layout
of the WPT gold sets), teacher-forces the model on each pair and reads every decoder layer's
cross attention (``--map weights``) or cross selection (``--map selection``, a model trained
with ``--cross-selector``); see ssan_plugin/analysis/alignments.py for the rules. The bitext's
sides are named by ``--langs A-B`` (default: the file's suffix, e.g. ``test.ro-en``); the
model translates either way round, and links are written as the gold writes them (A's word
first, 1-based ``i-j``). With ``--gold``: precision, recall and AER (sure and possible links)
per decoder layer, the layer of the rule fixed in advance (the penultimate) reported first.

Writes ``--out`` (JSON: the scores of every layer and every layer's links) and, with
``--links``, the rule layer's links, one sentence a line.

``--eflomal-train PREFIX`` (instead of ``--data`` / ``--checkpoint``): the statistical peer,
eflomal trained on ``PREFIX.A`` / ``PREFIX.B`` (raw parallel text, Moses-tokenised here) plus the
bitext, scored the same way, forward, reverse, intersection and union
(ssan_plugin/translation/eflomal_peer.py).
"""

import json
import sys
from pathlib import Path

from ssan_plugin.errors import PipelineError
from ssan_plugin.cli.arguments import ArgumentParser, add_overwrite, positive_int, script_main
from ssan_plugin.cli.files import Input, guard_outputs, output_file
from ssan_plugin.commands import command_prog

prog = command_prog(__file__)


def bitext_langs(path: str, given) -> tuple:
    """(A, B) from ``--langs A-B`` or the bitext file's suffix."""
    spec = given or Path(path).suffix.lstrip(".")
    parts = spec.split("-")
    if len(parts) != 2 or not all(parts):
        raise PipelineError(f"--langs: name the bitext's two sides as A-B (e.g. ro-en); "
                            f"{'got ' + repr(given) if given else f'{path} has no such suffix'}")
    return tuple(parts)


@script_main(prog=prog)
def main(argv=None) -> int:
    parser = ArgumentParser(prog=prog(), description=__doc__)
    parser.add_argument("--data", help="data-bin written by ssan-prepare-translation")
    parser.add_argument("--checkpoint", help="fairseq checkpoint (.pt)")
    parser.add_argument("--eflomal-train", metavar="PREFIX",
                        help="align with eflomal trained on PREFIX.A / PREFIX.B plus the bitext "
                             "instead of a model")
    parser.add_argument("--eflomal-runs", type=positive_int, default=5,
                        help="eflomal runs (it samples; scores are their mean and spread)")
    parser.add_argument("--bitext", required=True, help="tokenised sentence pairs, 'A ||| B' a line")
    parser.add_argument("--gold", help="gold links of the bitext, 1-based i-j (sure), i?j / ipj "
                                       "(possible), A's word first")
    parser.add_argument("--langs", help="the bitext's sides A-B (default: the bitext's suffix)")
    parser.add_argument("--map", choices=("weights", "selection"), default="weights",
                        help="cross attention weights (any model) or cross selection "
                             "(--cross-selector models)")
    parser.add_argument("--out", required=True, help="JSON of the scores and links of every layer")
    parser.add_argument("--links", help="the rule layer's links, one sentence a line")
    add_overwrite(parser)
    args = parser.parse_args(argv)
    model_given = args.data is not None or args.checkpoint is not None
    if (args.eflomal_train is not None and model_given) or \
            (args.eflomal_train is None and not (args.data and args.checkpoint)):
        parser.error("give --data and --checkpoint (a model), or --eflomal-train (the peer)")
    side_a, side_b = bitext_langs(args.bitext, args.langs)
    outputs = [output_file("--out", args.out)] + ([output_file("--links", args.links)] if args.links else [])
    corpus = [Input("--eflomal-train", f"{args.eflomal_train}.{lang}") for lang in (side_a, side_b)
              if args.eflomal_train]
    guard_outputs(outputs, [Input("--data", args.data), Input("--checkpoint", args.checkpoint),
                            Input("--bitext", args.bitext), Input("--gold", args.gold), *corpus],
                  args.overwrite)
    from tqdm import tqdm

    from ssan_plugin.analysis.alignments import LAYER_RULE, forced_alignments
    from ssan_plugin.analysis.inputs import AnalysisInput
    from ssan_plugin.translation.alignment import (alignment_scores, check_links, format_links,
                                                   read_bitext, read_gold)

    pairs = read_bitext(args.bitext)
    gold = read_gold(args.gold) if args.gold else None
    if gold is not None:
        if len(gold) != len(pairs):
            raise PipelineError(f"--gold has {len(gold)} lines, --bitext {len(pairs)}")
        for k, (reference, (a, b)) in enumerate(zip(gold, pairs), 1):
            check_links(reference.possible, len(a), len(b), f"--gold line {k}")
    if args.eflomal_train:
        return peer(args, pairs, gold, side_a, side_b)
    model = AnalysisInput(args.data, args.checkpoint)
    src, tgt = model.pipeline.manifest["src"], model.pipeline.manifest["tgt"]
    if (src, tgt) == (side_a, side_b):
        flipped = False
    elif (src, tgt) == (side_b, side_a):
        flipped = True
    else:
        raise PipelineError(f"the model translates {src}-{tgt}, the bitext is {side_a}-{side_b} "
                            f"(--langs)")
    ordered = [(b, a) if flipped else (a, b) for a, b in pairs]
    result = forced_alignments(model, ordered, args.map,
                               progress=lambda it: tqdm(it, desc="forced decoding", file=sys.stderr))
    layers = []
    for index, per_sentence in enumerate(result.layers):
        links = [{(j, i) for i, j in s} if flipped else s for s in per_sentence]  # A's word first
        entry = {"layer": index, "links": [format_links(s) for s in links]}
        if gold is not None:
            scores = alignment_scores(links, gold)
            entry.update(precision=scores.precision, recall=scores.recall, aer=scores.aer,
                         predicted=scores.predicted, sure=scores.sure, possible=scores.possible)
        layers.append(entry)
    report = {"checkpoint": args.checkpoint, "data": args.data, "bitext": args.bitext,
              "gold": args.gold, "langs": f"{side_a}-{side_b}", "model": f"{src}-{tgt}",
              "map": args.map, "rule": LAYER_RULE, "rule_layer": result.rule_layer,
              "sentences": len(pairs), "layers": layers}
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    if args.links:
        Path(args.links).write_text("".join(line + "\n" for line in layers[result.rule_layer]["links"]),
                                    encoding="utf-8")
    order = [result.rule_layer] + [i for i in range(len(layers)) if i != result.rule_layer]
    for i in order:
        entry = layers[i]
        tag = f"layer {i}" + (f" ({LAYER_RULE})" if i == result.rule_layer else "")
        if gold is not None:
            print(f"{tag}: AER {100 * entry['aer']:.1f}, precision {100 * entry['precision']:.1f}, "
                  f"recall {100 * entry['recall']:.1f} ({entry['predicted']} links)")
        else:
            print(f"{tag}: {sum(len(line.split()) for line in entry['links'])} links")
    return 0


def peer(args, pairs, gold, side_a: str, side_b: str) -> int:
    """``--eflomal-train``: the peer's links (its first run's) and scores (mean and standard
    deviation over ``--eflomal-runs``), in --out's layout (directions instead of layers)."""
    from tqdm import tqdm

    from ssan_plugin.translation.alignment import alignment_scores, format_links
    from ssan_plugin.translation.eflomal_peer import DIRECTIONS, eflomal_links, tokenised_corpus

    import statistics

    corpus = tokenised_corpus(args.eflomal_train, side_a, side_b)
    runs = [eflomal_links(corpus, pairs) for _ in tqdm(range(args.eflomal_runs), desc="eflomal",
                                                       file=sys.stderr)]
    directions = []
    for name in DIRECTIONS:
        entry = {"direction": name, "links": [format_links(s) for s in runs[0][name]]}
        if gold is not None:
            scores = [alignment_scores(run[name], gold) for run in runs]
            for field in ("aer", "precision", "recall"):
                values = [getattr(score, field) for score in scores]
                entry[field] = statistics.mean(values)
                entry[f"{field}_sd"] = statistics.stdev(values) if len(values) > 1 else 0.0
                entry[f"{field}_runs"] = values
            entry.update(predicted=scores[0].predicted, sure=scores[0].sure, possible=scores[0].possible)
            print(f"eflomal {name}: AER {100 * entry['aer']:.1f} (sd {100 * entry['aer_sd']:.1f} over "
                  f"{len(runs)} runs), precision {100 * entry['precision']:.1f}, recall "
                  f"{100 * entry['recall']:.1f}")
        directions.append(entry)
    report = {"peer": "eflomal", "runs": len(runs), "train": args.eflomal_train, "train_pairs": len(corpus),
              "bitext": args.bitext, "gold": args.gold, "langs": f"{side_a}-{side_b}",
              "sentences": len(pairs), "directions": directions}
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    if args.links:
        Path(args.links).write_text("".join(line + "\n" for line in directions[0]["links"]),
                                    encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
