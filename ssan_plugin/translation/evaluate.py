"""Score systems on a prepared data-bin with sacrebleu, with a paired significance test.

``evaluate`` checks everything first (manifest, reference line count, hypothesis files,
checkpoints against the dictionary), then decodes each checkpoint (``decode``), removes
sentencepiece (``SentencePieceProcessor.decode_pieces``), detokenises as the manifest says
(``languages.LanguageConfig.detokenise``) and scores against the raw reference:

- ``bleu``: detokenised sacrebleu BLEU (13a; Japanese always ja-mecab, Chinese zh), with its
  signature;
- ``chrf``: sacrebleu chrF2;
- ``tok_bleu``: BLEU on tokenised hypothesis and reference with sacrebleu ``tokenize='none'``,
  i.e. multi-bleu.perl-style numbers (Moses tokeniser, escape=False, for Moses languages; the
  given segmentation for segmented text; characters for unsegmented CJK);
- a paired test of every system against the first one (``significance``: paired bootstrap,
  default, or approximate randomisation; two-sided, ties counted, so identical outputs get
  p = 1), BLEU's 95% bootstrap interval, delta, p-value and whether the outputs are identical;
  with seeds named ``GROUP@SEED``, each system against the baseline group's system of the same
  seed (a sentence-level p: it describes that seed), and per group the seed mean, standard
  deviation, the seed-level test with Holm's correction (the verdict) and the pooled
  sentence-level bootstrap (``comparison``);
- ``by_length``: BLEU per source-length bucket (words: 1-10, ..., 41+) and a PNG, when the
  raw source is known (``source``, or the data-bin's recorded raw input, unchanged);
- ``tok_bleu_compound_split`` (German targets only): tokenised BLEU with hyphenated compounds
  split as ``##AT##-##AT##``, the number WMT14 En-De papers report.

With ``source`` (a raw source file, any test set), checkpoints translate it in-process with
exactly the preprocessing the manifest records (``translator.Translator``), instead of
fairseq-generate on the binarised split; on the data-bin's own test text both give the same
hypotheses. Without a data-bin (``data=None``) only hypothesis files can be scored; the target language
then comes from ``tgt_lang`` or the reference's file suffix (``test.de`` -> de).
"""

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from .checkpoints import check_checkpoint
from .decode import GenerateOptions, decode
from .languages import LanguageConfig, looks_segmented, require_sacrebleu_tokenizer
from .pipeline import TextPipeline, decode_pieces
from .textio import PipelineError, read_lines, sha256, write_lines

logger = logging.getLogger("ssan_plugin.translation.evaluate")


@dataclass
class SystemSpec:
    name: str
    kind: str  # "checkpoint" | "hyp"
    path: str


@dataclass
class EvalConfig:
    data: Optional[str]  # None: score --hyp files only
    systems: List[SystemSpec]
    ref: str
    subset: str = "test"
    json_out: Optional[str] = None
    hyp_dir: Optional[str] = None
    generate: GenerateOptions = field(default_factory=GenerateOptions)
    paired: str = "bs"  # bs | ar
    paired_n: int = 0  # 0: sacrebleu's default (1000 resamples / 10000 trials)
    skip_recorded_data_check: bool = False
    aso: bool = False  # groups: also Almost Stochastic Order over the seeds (deepsig)
    planned_seeds: Dict[str, int] = field(default_factory=dict)  # groups: interim verdicts
    tgt_lang: Optional[str] = None  # without data: the target language (default: ref suffix)
    source: Optional[str] = None  # raw source of the test set: checkpoints translate it
    by_length_png: Optional[str] = None  # default: beside json_out, NAME.by_length.png


def check_systems(cfg: EvalConfig, manifest, n: int):
    if not cfg.systems:
        raise PipelineError("give at least one --system NAME=CHECKPOINT or --hyp NAME=FILE")
    names = [s.name for s in cfg.systems]
    if len(set(names)) != len(names):
        raise PipelineError(f"system names must be unique, got {names}")
    for spec in cfg.systems:
        if spec.kind == "hyp":
            count = len(read_lines(spec.path))
            if count != n:
                what = f"the {cfg.subset} set has {n}" if manifest else f"--ref has {n}"
                raise PipelineError(f"--hyp {spec.name}={spec.path} has {count} lines, {what}")
        elif manifest is None:
            raise PipelineError(f"--system {spec.name}={spec.path}: decoding a checkpoint "
                                f"needs --data (the data-bin it was trained on); without "
                                f"--data only --hyp files are scored")
        else:
            check_checkpoint(spec.path, cfg.data, manifest["src"], manifest["tgt"],
                             compare_recorded_data=not cfg.skip_recorded_data_check)


def subset_size(cfg: EvalConfig, manifest) -> int:
    counts = manifest.get("counts", {})
    if cfg.subset not in counts:
        raise PipelineError(f"--subset must be one of {sorted(counts)}, got {cfg.subset!r}")
    src, tgt = manifest["src"], manifest["tgt"]
    binary = Path(cfg.data) / f"{cfg.subset}.{src}-{tgt}.{src}.bin"
    if not binary.is_file():
        raise PipelineError(f"missing {binary}: {cfg.data} is not a complete data-bin")
    return counts[cfg.subset]["kept"]


def target_language(cfg: EvalConfig, refs) -> LanguageConfig:
    """Without a manifest: --tgt-lang, else the reference's suffix; segmentation detected."""
    lang = cfg.tgt_lang or Path(cfg.ref).suffix.lstrip(".") or "tgt"
    return LanguageConfig.create(lang, looks_segmented(refs, lang))


def _source_side(cfg: EvalConfig, pipeline, n: int, source_lines=None):
    """(raw source lines or None, where they came from): ``--source``, else the data-bin's
    raw input of the subset when it is still where the manifest says and unchanged."""
    if cfg.source is not None:
        return source_lines, str(Path(cfg.source).resolve())
    if pipeline is None:
        return None, "no --source and no data-bin"
    record = pipeline.manifest.get("inputs", {}).get(cfg.subset, {}).get(pipeline.manifest["src"])
    if not record or not Path(record["path"]).is_file() or sha256(record["path"]) != record["sha256"]:
        return None, (f"the {cfg.subset} source recorded in the manifest is missing or changed; "
                      f"give --source for BLEU by length")
    sources = read_lines(record["path"])
    if len(sources) != n:
        return None, f"{record['path']} has {len(sources)} lines, the {cfg.subset} set {n}"
    return sources, record["path"]


def _translate_source(cfg: EvalConfig, spec: SystemSpec, sources):
    """--source given: the checkpoint translates the raw source in-process, preprocessed as
    the manifest records (translator.Translator)."""
    from .translator import TranslateOptions, Translator

    g = cfg.generate
    options = TranslateOptions(beam=g.beam, lenpen=g.lenpen, max_len_a=g.max_len_a,
                               max_len_b=g.max_len_b, batch_size=g.batch_size, cpu=g.cpu,
                               too_long=g.too_long)
    translator = Translator(spec.path, cfg.data, options,
                            compare_recorded_data=not cfg.skip_recorded_data_check)
    hyps, report = translator.translate_with_report(sources)
    for message in report.messages():
        logger.warning("%s: %s", spec.name, message)
    speed = report.translated / report.seconds if report.seconds else None
    return hyps, speed


def evaluate(cfg: EvalConfig) -> dict:
    """``ssan-evaluate-bleu``'s work: decode or read each system's hypotheses, check them
    against the references, and score them (BLEU, chrF, tokenised BLEU; by source length;
    each system against the first, sentence level, and groups of seeds at seed level). The
    JSON report: ``signature``, ``significance`` (the tests' conventions), ``systems`` (one
    record each) and, with ``GROUP@SEED`` systems, ``groups``."""
    from sacrebleu.metrics import BLEU, CHRF

    from ..stats.significance import (
        DEFAULT_BOOTSTRAP_SAMPLES,
        DEFAULT_RANDOMIZATION_TRIALS,
        DEFAULT_SEED,
        paired_bootstrap,
        paired_randomization,
        sacrebleu_score_fn,
        sacrebleu_stats,
    )
    from ..stats.seed_groups import has_groups, same_seed_baseline
    from .comparison import by_length, plot_by_length, pooled_groups, source_lengths

    if cfg.paired not in ("bs", "ar"):
        raise PipelineError(f"paired test must be 'bs' or 'ar', got {cfg.paired!r}")
    if cfg.paired_n < 0:
        raise PipelineError(f"the number of resamples/trials must be >= 0, got {cfg.paired_n}")
    raw_refs = read_lines(cfg.ref)
    source_lines = read_lines(cfg.source) if cfg.source is not None else None  # read once
    names = [s.name for s in cfg.systems]
    grouped = has_groups(names)  # validates GROUP@SEED names before any decoding
    if cfg.source is not None and cfg.generate.extra:
        raise PipelineError("--generate-args applies to fairseq-generate on the binarised "
                            "split; with --source the checkpoints translate in-process")
    if cfg.data is not None:
        pipeline = TextPipeline.from_data_dir(cfg.data)
        manifest = pipeline.manifest
        src, tgt = manifest["src"], manifest["tgt"]
        if cfg.source is not None:
            n = len(source_lines)
            what = f"--source {cfg.source} has {n} lines"
        else:
            n = subset_size(cfg, manifest)
            what = f"the {cfg.subset} set of {cfg.data} has {n} sentences"
        if len(raw_refs) != n:
            raise PipelineError(f"reference {cfg.ref} has {len(raw_refs)} lines, but {what}")
        tgt_lang = pipeline.tgt
    else:
        pipeline = manifest = None
        n = len(raw_refs)
        tgt_lang = target_language(cfg, raw_refs)
        tgt = tgt_lang.lang
        if source_lines is not None and len(source_lines) != n:
            raise PipelineError(f"--source {cfg.source} has {len(source_lines)} "
                                f"lines, --ref {cfg.ref} has {n}")
    check_systems(cfg, manifest, n)
    tokenize = tgt_lang.sacrebleu_tokenize()
    require_sacrebleu_tokenizer(tokenize)  # before any decoding
    sources, source_origin = _source_side(cfg, pipeline, n, source_lines)

    refs = [tgt_lang.reference(x) for x in raw_refs]
    hyp_dir = Path(cfg.hyp_dir) if cfg.hyp_dir else (
        Path(cfg.json_out).resolve().parent if cfg.json_out else None)
    if hyp_dir is not None:
        hyp_dir.mkdir(parents=True, exist_ok=True)
    label = Path(cfg.source).name if cfg.source is not None else cfg.subset

    outputs = []
    for spec in cfg.systems:
        record = {"name": spec.name, "sent_per_s": None}
        if spec.kind == "hyp":
            hyps = read_lines(spec.path)
            record["hyp_file"] = str(Path(spec.path).resolve())
        else:
            if cfg.source is not None:
                hyps, record["sent_per_s"] = _translate_source(cfg, spec, sources)
                record["decoded"] = f"in-process from {source_origin}"
            else:
                log_path = hyp_dir / f"{spec.name}.{cfg.subset}.generate.log" if hyp_dir else None
                decoded = decode(cfg.data, spec.path, src, tgt, cfg.subset, n, cfg.generate,
                                 log_path=log_path)
                hyps = decode_pieces(tgt_lang, pipeline.sp, decoded.pieces)
                record["sent_per_s"] = decoded.sent_per_s
                record["generate_command"] = decoded.command
            if hyp_dir is not None:
                hyp_file = hyp_dir / f"{spec.name}.{label}.{tgt}"
                write_lines(hyp_file, hyps)
                record["hyp_file"] = str(hyp_file)
        if len(hyps) != n:  # cannot happen after the checks above; keep the invariant explicit
            raise PipelineError(f"{spec.name}: {len(hyps)} hypotheses for {n} references")
        outputs.append((record, hyps))

    bleu = BLEU(tokenize=tokenize)
    score = sacrebleu_score_fn(bleu)
    stats = [sacrebleu_stats(bleu, hyps, refs) for _, hyps in outputs]
    n_bs = cfg.paired_n if (cfg.paired == "bs" and cfg.paired_n) else DEFAULT_BOOTSTRAP_SAMPLES
    n_ar = cfg.paired_n or DEFAULT_RANDOMIZATION_TRIALS
    against = same_seed_baseline(names) if grouped else [0] * len(names)
    chrf = CHRF()
    tok_bleu = BLEU(tokenize="none", force=True)
    tok_refs = [tgt_lang.bleu_tokenise(x) for x in refs]
    split_refs = ([tgt_lang.bleu_tokenise_compound_split(x) for x in refs]
                  if tgt_lang.compound_split_bleu() else None)
    lengths = source_lengths(sources) if sources is not None else None
    systems = []
    for i, (record, hyps) in enumerate(outputs):
        base = against[i]
        bs = paired_bootstrap(stats[base], stats[i], score, n_bs, DEFAULT_SEED)
        entry = {
            "name": record["name"],
            "bleu": float(bleu.corpus_score(hyps, [refs]).score),
            "chrf": float(chrf.corpus_score(hyps, [refs]).score),
            "tok_bleu": float(tok_bleu.corpus_score([tgt_lang.bleu_tokenise(h) for h in hyps],
                                                    [tok_refs]).score),
            "n": len(hyps),
        }
        if split_refs is not None:
            entry["tok_bleu_compound_split"] = float(tok_bleu.corpus_score(
                [tgt_lang.bleu_tokenise_compound_split(h) for h in hyps], [split_refs]).score)
        if i > 0:
            test = bs if cfg.paired == "bs" else paired_randomization(
                stats[base], stats[i], score, n_ar, DEFAULT_SEED)
            entry["compared_with"] = outputs[base][0]["name"]
            entry["delta"] = test.delta
            entry["p_value"] = test.p_value
            entry["identical"] = hyps == outputs[base][1]
        entry["bleu_ci"] = bs.ci
        entry["sent_per_s"] = record["sent_per_s"]
        if lengths is not None:
            entry["by_length"] = by_length(lengths, stats[i], score)
        for key in ("hyp_file", "decoded"):
            if key in record:
                entry[key] = record[key]
        systems.append(entry)
    significance = {
        "test": "paired bootstrap" if cfg.paired == "bs" else "paired approximate randomisation",
        "samples": n_bs if cfg.paired == "bs" else n_ar,
        "seed": DEFAULT_SEED,
        "convention": "two-sided, ties counted: p = (#{resampled |difference| at least the "
                      "observed} + 1) / (samples + 1); identical outputs get p = 1",
        "ci": f"95% paired bootstrap percentile interval, {n_bs} resamples",
    }
    report = {"signature": bleu.get_signature().format(), "significance": significance,
              "systems": systems}
    if grouped:
        report["groups"] = pooled_groups(names, stats, score, n_bs, DEFAULT_SEED, aso=cfg.aso,
                                         planned=cfg.planned_seeds)
        significance["groups"] = (
            "verdict: seed-level test (seeds with replacement, paired by seed, and one sentence "
            "multiset per resample; standard error corrected for the seed count, Student t on "
            "Welch-Satterthwaite df; Holm over the groups); p (sentences): pooled paired "
            "bootstrap, the same resampled sentence ids for every seed, seeds held fixed")
    if sources is not None:
        report["source"] = source_origin
    if cfg.json_out:
        with open(cfg.json_out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, ensure_ascii=False)
            f.write("\n")
    if lengths is not None and (cfg.by_length_png or cfg.json_out):
        png = Path(cfg.by_length_png or Path(cfg.json_out).with_suffix(".by_length.png"))
        plot_by_length(systems, png, title=f"BLEU by source length ({label})")
        report_png = str(png)
    else:
        report_png = None
    notes = {
        "chrf_signature": chrf.get_signature().format(),
        "tok_bleu": f"sacrebleu tokenize=none on text tokenised with "
                    f"{tgt_lang.bleu_tokenisation_name()}",
        "reference": ("Romanian reference normalised like the outputs "
                      f"(cedilla -> comma{', diacritics removed' if tgt_lang.romanian_remove_diacritics else ''})"
                      if tgt.lower() == "ro" else "raw reference, unchanged"),
        "test": f"{significance['test']} ({significance['convention']})",
        "source": source_origin,
        "by_length_png": report_png,
    }
    if split_refs is not None:
        notes["tok_bleu_compound_split"] = (
            "sacrebleu tokenize=none on Moses-tokenised text (sacremoses, escape=False, no "
            "aggressive dash splits) with hyphenated compounds split as ##AT##-##AT## "
            "(tensor2tensor get_ende_bleu.sh / fairseq compound_split_bleu.sh)")
    return {"report": report, "notes": notes}


def _fmt(x, spec=".2f"):
    return "—" if x is None else format(x, spec)


def _p_cell(s: dict) -> str:
    if s.get("identical"):
        return "identical"
    return _fmt(s.get("p_value"), ".4f")


def markdown_table(report: dict, notes: Optional[dict] = None) -> str:
    """The systems table; then, when present, the seed-pooled groups and BLEU by length."""
    split = any("tok_bleu_compound_split" in s for s in report["systems"])
    seeds = bool(report.get("groups"))
    p_head = "p (sentences, this seed)" if seeds else "p-value"
    head = f"| system | BLEU ± 95% CI | Δ | vs | {p_head} | chrF | tok BLEU |"
    rule = "|---|---|---|---|---|---|---|"
    if split:
        head += " tok BLEU, compound split ##AT## |"
        rule += "---|"
    rows = [head + " n | sent/s |", rule + "---|---|"]
    for i, s in enumerate(report["systems"]):
        bleu = f"{s['bleu']:.2f}" + (f" ± {s['bleu_ci']:.2f}" if s.get("bleu_ci") is not None else "")
        delta = "(baseline)" if i == 0 else f"{s['delta']:+.2f}"
        vs = "" if i == 0 else s.get("compared_with", report["systems"][0]["name"])
        p = "" if i == 0 else _p_cell(s)
        row = (f"| {s['name']} | {bleu} | {delta} | {vs} | {p} | {s['chrf']:.2f} | "
               f"{s['tok_bleu']:.2f} |")
        if split:
            row += f" {_fmt(s.get('tok_bleu_compound_split'))} |"
        rows.append(row + f" {s['n']} | {_fmt(s.get('sent_per_s'), '.1f')} |")
    lines = rows
    if report.get("groups"):
        from ..stats.seed_groups import group_table

        lines += ["", group_table(report["groups"], "BLEU",
                                  lambda g: (g["mean_bleu"], g["std_bleu"]))]
    if report["systems"] and "by_length" in report["systems"][0]:
        from .comparison import length_label

        buckets = report["systems"][0]["by_length"]
        lines += ["", "| system | " + " | ".join(
            f"{length_label(b)} words (n={b['n']})" for b in buckets) + " |",
            "|---|" + "---|" * len(buckets)]
        for s in report["systems"]:
            lines.append(f"| {s['name']} | " + " | ".join(
                _fmt(b["bleu"]) for b in s["by_length"]) + " |")
    lines += ["", f"BLEU signature: {report['signature']}"]
    if notes:
        lines += [f"chrF signature: {notes['chrf_signature']}",
                  f"tok BLEU: {notes['tok_bleu']}"]
        if "tok_bleu_compound_split" in notes:
            lines.append(f"tok BLEU, compound split: {notes['tok_bleu_compound_split']}")
        lines += [f"significance: {notes['test']}",
                  f"reference: {notes['reference']}"]
        if notes.get("by_length_png"):
            lines.append(f"BLEU by length: {notes['by_length_png']} (source: {notes['source']})")
        elif "by_length" not in report["systems"][0]:
            lines.append(f"BLEU by length: not computed ({notes['source']})")
    return "\n".join(lines)
