"""Word alignments of a translation model by forced decoding, scored against gold links.

Reads sentence pairs as tokenised words (``--bitext``, one ``A ||| B`` pair a line, the layout
of the WPT gold sets), teacher-forces the model on each pair and reads every decoder layer's
cross attention (``--map weights``) or cross selection (``--map selection``, a model trained
with ``--cross-selector``), each target piece read where it is predicted or, shifted, where it
is the decoder's input; see ssan_plugin/analysis/alignments.py for the rules. The bitext's
sides are named by ``--langs A-B`` (default: the file's suffix, e.g. ``test.ro-en``); the
model translates either way round, and links are written as the gold writes them (A's word
first, 1-based ``i-j``). With ``--gold``: precision, recall and AER (sure and possible links)
per reading and decoder layer, the rule fixed in advance (predicted, penultimate layer) reported
first, and the held-apart choice (each half of the pairs aligned with the reading and layer
best on the other half; with one pair it is not made, and the report says so). An option of
another aligner (``--map`` with the peer, ``--eflomal-runs`` with a model, ...) is refused.

Writes ``--out`` (JSON: the scores and per-sentence counts of every reading and layer and of
the held-apart choice; the links of the rule's entry and of the held-apart choice, or of every
entry with ``--links-of all``) and, with ``--links``, the rule's links, one sentence a line.
A cross selection that links most pairs makes every layer's links megabytes for a few hundred
sentences; the counts are all that the scores and their significance tests need.

``--eflomal-train PREFIX`` (instead of ``--checkpoint``): the statistical peer, eflomal trained
on ``PREFIX.A`` / ``PREFIX.B`` (raw parallel text, tokenised here as ``--data``'s manifest says
when given, e.g. without Romanian diacritics, else as preparation's defaults) plus the bitext,
scored against the same gold in a layout with directions (forward, reverse, intersection and
union) instead of layers, each score the mean over its runs
(ssan_plugin/translation/eflomal_peer.py). Its report also says how the training text writes the
bitext's words (``gold_words``: tokens never seen there, and tokens it writes mostly with other
diacritics), which is how a model trained on that text reads them.

``--diagonal`` (instead of a model or the peer): the reference that needs no training, each word
linked to the word of the other side at the same relative position
(``translation.alignment.diagonal_links``), scored in the peer's layout. An aligner that does
not beat it has learnt nothing about word order that position alone does not give.
"""

import json
import sys
from pathlib import Path

from ssan_plugin.errors import PipelineError
from ssan_plugin.cli.arguments import ArgumentParser, add_overwrite, positive_int, script_main
from ssan_plugin.cli.files import Input, guard_outputs, output_file
from ssan_plugin.commands import command_prog

prog = command_prog(__file__)
EFLOMAL_RUNS = 5  # the peer's runs by default (its sampler takes no seed)


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
    parser.add_argument("--data", help="data-bin written by ssan-prepare-translation (with "
                                       "--eflomal-train: the peer's text is tokenised as its "
                                       "manifest says)")
    parser.add_argument("--checkpoint", help="fairseq checkpoint (.pt)")
    parser.add_argument("--eflomal-train", metavar="PREFIX",
                        help="align with eflomal trained on PREFIX.A / PREFIX.B plus the bitext "
                             "instead of a model")
    parser.add_argument("--diagonal", action="store_true",
                        help="the diagonal reference (each word linked to the word at the same "
                             "relative position) instead of a model")
    parser.add_argument("--eflomal-runs", type=positive_int,
                        help=f"eflomal runs (it samples; scores are their mean and spread; "
                             f"default {EFLOMAL_RUNS})")
    parser.add_argument("--bitext", required=True, help="tokenised sentence pairs, 'A ||| B' a line")
    parser.add_argument("--gold", help="gold links of the bitext, 1-based i-j (sure), i?j / ipj "
                                       "(possible), A's word first")
    parser.add_argument("--langs", help="the bitext's sides A-B (default: the bitext's suffix)")
    parser.add_argument("--map", choices=("weights", "selection"),
                        help="a model's cross attention weights (any model; the default) or "
                             "cross selection (--cross-selector models)")
    parser.add_argument("--out", required=True,
                        help="JSON of every reading and layer's scores and per-sentence counts, "
                             "with links as --links-of says (the peer and the diagonal: per "
                             "direction, scores and links)")
    parser.add_argument("--links-of", choices=("chosen", "all"),
                        help="the links a model's --out keeps: the rule's and the held-apart "
                             "choice's (chosen, the default) or every reading and layer's (all); "
                             "scores and per-sentence counts are kept for every one")
    parser.add_argument("--links", help="the rule layer's links, one sentence a line (the peer "
                                        "and the diagonal: the forward direction's, the peer's "
                                        "first run's)")
    add_overwrite(parser)
    args = parser.parse_args(argv)
    aligners = int(args.checkpoint is not None) + int(args.eflomal_train is not None) + int(args.diagonal)
    if (aligners != 1 or (args.checkpoint and not args.data)
            or (args.data and not (args.checkpoint or args.eflomal_train))):
        parser.error("give --data and --checkpoint (a model), --eflomal-train (the peer; with "
                     "--data, its text tokenised as that data-bin's) or --diagonal (the "
                     "reference), one of them")
    # an option of another aligner is refused, never ignored
    given = [option for option, value, aligner in (
        ("--map", args.map, args.checkpoint), ("--links-of", args.links_of, args.checkpoint),
        ("--eflomal-runs", args.eflomal_runs, args.eflomal_train)) if value is not None and not aligner]
    if given:
        parser.error(f"{', '.join(given)}: not an option of this aligner (--map and --links-of "
                     f"are a model's, --eflomal-runs the peer's)")
    args.map = args.map or "weights"
    args.links_of = args.links_of or "chosen"
    args.eflomal_runs = args.eflomal_runs or EFLOMAL_RUNS
    side_a, side_b = bitext_langs(args.bitext, args.langs)
    outputs = [output_file("--out", args.out)] + ([output_file("--links", args.links)] if args.links else [])
    corpus = [Input("--eflomal-train", f"{args.eflomal_train}.{lang}") for lang in (side_a, side_b)
              if args.eflomal_train]
    guard_outputs(outputs, [Input("--data", args.data), Input("--checkpoint", args.checkpoint),
                            Input("--bitext", args.bitext), Input("--gold", args.gold), *corpus],
                  args.overwrite)
    from tqdm import tqdm

    from ssan_plugin.analysis.alignments import (FOLDS, LAYER_RULE, READINGS, RULE_READING,
                                                 forced_alignments, held_apart_choice)
    from ssan_plugin.analysis.inputs import AnalysisInput
    from ssan_plugin.translation.alignment import (COUNTS, check_links, format_links, read_bitext,
                                                   read_gold, scores_of_counts, sentence_counts,
                                                   unmarked_romanian)

    pairs = read_bitext(args.bitext)
    if not pairs:
        raise PipelineError(f"--bitext {args.bitext} holds no sentence pair")
    gold = read_gold(args.gold) if args.gold else None
    if gold is not None:
        if len(gold) != len(pairs):
            raise PipelineError(f"--gold has {len(gold)} lines, --bitext {len(pairs)}")
        for k, (reference, (a, b)) in enumerate(zip(gold, pairs), 1):
            check_links(reference.possible, len(a), len(b), f"--gold line {k}")
    if args.eflomal_train:
        return peer(args, pairs, gold, side_a, side_b)
    if args.diagonal:
        return diagonal(args, pairs, gold, side_a, side_b)
    model = AnalysisInput(args.data, args.checkpoint)
    src, tgt = model.pipeline.manifest["src"], model.pipeline.manifest["tgt"]
    if (src, tgt) == (side_a, side_b):
        flipped = False
    elif (src, tgt) == (side_b, side_a):
        flipped = True
    else:
        raise PipelineError(f"the model translates {src}-{tgt}, the bitext is {side_a}-{side_b} "
                            f"(--langs)")
    # the bitext's side each of the model's languages reads (0: A, 1: B)
    for config, side in ((model.pipeline.src, int(flipped)), (model.pipeline.tgt, int(not flipped))):
        warning = unmarked_romanian(config.lang, not config.romanian_remove_diacritics,
                                    [pair[side] for pair in pairs])
        if warning:
            print(f"ssan-align: warning: {warning}", file=sys.stderr)
    ordered = [(b, a) if flipped else (a, b) for a, b in pairs]
    result = forced_alignments(model, ordered, args.map,
                               progress=lambda it: tqdm(it, desc="forced decoding", file=sys.stderr))
    # A's word first, as the gold writes links
    links = {reading: [[{(j, i) for i, j in s} if flipped else s for s in per_sentence]
                       for per_sentence in per_layer] for reading, per_layer in result.links.items()}

    def scored(entry: dict, predicted) -> dict:
        if gold is not None:
            counts = sentence_counts(predicted, gold)
            scores = scores_of_counts([sum(column) for column in zip(*counts)], len(gold))
            entry.update(precision=scores.precision, recall=scores.recall, aer=scores.aer,
                         predicted=scores.predicted, sure=scores.sure, possible=scores.possible,
                         sentence_counts=[list(c) for c in counts])
        return entry

    rule = (RULE_READING, result.rule_layer)

    def entry_of(reading: str, index: int, per_sentence) -> dict:
        # target pieces without a link: a selection without a majority, or an all-zero row
        entry = {"layer": index, "unlinked_pieces": result.unlinked[reading][index]}
        if args.links_of == "all" or (reading, index) == rule:
            entry["links"] = [format_links(s) for s in per_sentence]
        return scored(entry, per_sentence)

    readings = {reading: [entry_of(reading, index, per_sentence)
                          for index, per_sentence in enumerate(links[reading])]
                for reading in READINGS}
    report = {"checkpoint": args.checkpoint, "data": args.data, "bitext": args.bitext,
              "gold": args.gold, "langs": f"{side_a}-{side_b}", "model": f"{src}-{tgt}",
              "map": args.map, "rule": LAYER_RULE, "rule_reading": RULE_READING,
              "rule_layer": result.rule_layer, "sentences": len(pairs), "links_of": args.links_of,
              "readings": readings}
    if gold is not None:
        report["sentence_counts_are"] = list(COUNTS)
    held = None
    if gold is not None and len(pairs) >= FOLDS:
        held = held_apart_choice(links, gold, result.rule)
        report["held_apart"] = scored({
            "folds": FOLDS, "fold_of_pair": f"pair k (0-based) in fold k % {FOLDS}",
            "choices": [{"fold": fold, "reading": reading, "layer": layer, "aer_on_other_folds": aer}
                        for fold, ((reading, layer), aer) in enumerate(zip(held.choices, held.chosen_on_aer))],
            "links": [format_links(s) for s in held.links]}, held.links)
    elif gold is not None:  # said, not silently left out
        report["held_apart"] = None
        report["held_apart_not_made"] = (f"{len(pairs)} sentence pair: the held-apart choice "
                                         f"needs at least {FOLDS}, one a fold")
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    rule_entry = readings[RULE_READING][result.rule_layer]
    if args.links:
        Path(args.links).write_text("".join(line + "\n" for line in rule_entry["links"]), encoding="utf-8")
    order = [rule] + [(reading, i) for reading in READINGS for i in range(len(readings[reading]))
                      if (reading, i) != rule]
    for reading, i in order:
        entry = readings[reading][i]
        tag = f"{reading}, layer {i}" + (f" (the rule: {LAYER_RULE})"
                                         if (reading, i) == rule else "")
        unlinked = (f", {entry['unlinked_pieces']} target pieces unlinked"
                    if entry["unlinked_pieces"] else "")
        if gold is not None:
            print(f"{tag}: AER {100 * entry['aer']:.1f}, precision {100 * entry['precision']:.1f}, "
                  f"recall {100 * entry['recall']:.1f} ({entry['predicted']} links{unlinked})")
        else:
            print(f"{tag}: {sum(map(len, links[reading][i]))} links{unlinked}")
    if held is not None:
        entry = report["held_apart"]
        chosen = "; ".join(f"fold {c['fold']}: {c['reading']}, layer {c['layer']}" for c in entry["choices"])
        print(f"held-apart choice ({chosen}): AER {100 * entry['aer']:.1f}, precision "
              f"{100 * entry['precision']:.1f}, recall {100 * entry['recall']:.1f}")
    elif gold is not None:
        print(f"held-apart choice: not made ({report['held_apart_not_made']})")
    return 0


def peer(args, pairs, gold, side_a: str, side_b: str) -> int:
    """``--eflomal-train``: the peer's links (its first run's) and scores (mean and standard
    deviation over ``--eflomal-runs``), in --out's layout (directions instead of layers)."""
    from tqdm import tqdm

    from ssan_plugin.translation.alignment import gold_word_coverage
    from ssan_plugin.translation.eflomal_peer import eflomal_links, tokenised_corpus
    from ssan_plugin.translation.pipeline import language_config_from_manifest, load_manifest

    configs = None
    if args.data:  # the text as the compared models read it
        manifest = load_manifest(args.data)
        if {side_a, side_b} != {manifest["src"], manifest["tgt"]}:
            raise PipelineError(f"--data prepares {manifest['src']}-{manifest['tgt']}, the bitext is "
                                f"{side_a}-{side_b} (--langs)")
        configs = {lang: language_config_from_manifest(manifest, lang) for lang in (side_a, side_b)}
    corpus = tokenised_corpus(args.eflomal_train, side_a, side_b, configs)
    runs = [eflomal_links(corpus, pairs) for _ in tqdm(range(args.eflomal_runs), desc="eflomal",
                                                       file=sys.stderr)]
    # how the training text writes the bitext's words (a model trained on it reads them so)
    coverage = {lang: gold_word_coverage([pair[side] for pair in pairs], (c[side] for c in corpus))
                for side, lang in enumerate((side_a, side_b))}
    for lang, entry in coverage.items():
        print(f"{lang} words of --bitext: {entry['tokens']}; never in the training text "
              f"{entry['unseen']}; written there mostly with other diacritics {entry['other_marks']}")
    write_directions(args, "eflomal", runs, pairs, gold, side_a, side_b,
                     {"train": args.eflomal_train, "data": args.data, "train_pairs": len(corpus),
                      "gold_words": coverage})
    return 0


def diagonal(args, pairs, gold, side_a: str, side_b: str) -> int:
    """``--diagonal``: the reference's links and scores, in the peer's layout (one run: it is
    deterministic)."""
    from ssan_plugin.translation.alignment import diagonal_links

    per_pair = [diagonal_links(len(a), len(b)) for a, b in pairs]
    run = {name: [links[name] for links in per_pair] for name in per_pair[0]}
    write_directions(args, "diagonal", [run], pairs, gold, side_a, side_b, {})
    return 0


def write_directions(args, name: str, runs, pairs, gold, side_a: str, side_b: str, extra: dict) -> None:
    """Write --out (and --links) for a peer or reference aligner: per direction, the first run's
    links and, with gold, their per-sentence counts (COUNTS: what a seed-level test of this
    aligner against a model reads) and each score's mean, standard deviation and per-run values
    over ``runs`` (``[{direction: one link set per pair}]``), printed as they are scored."""
    from ssan_plugin.translation.alignment import (COUNTS, alignment_scores, format_links,
                                                   sentence_counts)

    import statistics

    directions = []
    for direction in runs[0]:
        entry = {"direction": direction, "links": [format_links(s) for s in runs[0][direction]]}
        if gold is not None:
            scores = [alignment_scores(run[direction], gold) for run in runs]
            for field in ("aer", "precision", "recall"):
                values = [getattr(score, field) for score in scores]
                entry[field] = statistics.mean(values)
                entry[f"{field}_sd"] = statistics.stdev(values) if len(values) > 1 else 0.0
                entry[f"{field}_runs"] = values
            entry.update(predicted=scores[0].predicted, sure=scores[0].sure, possible=scores[0].possible,
                         sentence_counts=[list(c) for c in sentence_counts(runs[0][direction], gold)])
            spread = f" (sd {100 * entry['aer_sd']:.1f} over {len(runs)} runs)" if len(runs) > 1 else ""
            print(f"{name} {direction}: AER {100 * entry['aer']:.1f}{spread}, precision "
                  f"{100 * entry['precision']:.1f}, recall {100 * entry['recall']:.1f}")
        directions.append(entry)
    report = {"peer": name, "runs": len(runs), "bitext": args.bitext, "gold": args.gold,
              "langs": f"{side_a}-{side_b}", "sentences": len(pairs), **extra,
              **({"sentence_counts_are": list(COUNTS)} if gold is not None else {}),
              "directions": directions}
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    if args.links:
        Path(args.links).write_text("".join(line + "\n" for line in directions[0]["links"]),
                                    encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
