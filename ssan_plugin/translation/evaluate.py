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
- sacrebleu's paired bootstrap resampling (``paired-bs``, default) or approximate
  randomisation (``paired-ar``) of every system against the first one (the baseline): BLEU's
  95% confidence interval, delta and p-value;
- ``tok_bleu_compound_split`` (German targets only): tokenised BLEU with hyphenated compounds
  split as ``##AT##-##AT##``, the number WMT14 En-De papers report.

Without a data-bin (``data=None``) only hypothesis files can be scored; the target language
then comes from ``tgt_lang`` or the reference's file suffix (``test.de`` -> de).
"""

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from .checkpoints import check_checkpoint
from .decode import GenerateOptions, decode
from .languages import LanguageConfig, looks_segmented, require_sacrebleu_tokenizer
from .pipeline import TextPipeline, decode_pieces
from .textio import PipelineError, read_lines, write_lines

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
    tgt_lang: Optional[str] = None  # without data: the target language (default: ref suffix)


def parse_system(value: str, kind: str) -> SystemSpec:
    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise PipelineError(f"expected NAME=PATH, got {value!r}")
    return SystemSpec(name=name, kind=kind, path=path)


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
    counts = manifest["counts"]
    if cfg.subset not in counts:
        raise PipelineError(f"--subset must be one of {sorted(counts)}, got {cfg.subset!r}")
    src, tgt = manifest["src"], manifest["tgt"]
    binary = Path(cfg.data) / f"{cfg.subset}.{src}-{tgt}.{src}.bin"
    if not binary.is_file():
        raise PipelineError(f"missing {binary}: {cfg.data} is not a complete data-bin")
    return counts[cfg.subset]["kept"]


def significance(named_hyps, refs, bleu_metric, test_type: str, n_samples: int):
    """sacrebleu's PairedTest on BLEU: (signature, [Result per system, baseline first])."""
    from sacrebleu.significance import PairedTest

    test = PairedTest(named_hyps, {"BLEU": bleu_metric}, references=[refs],
                      test_type=test_type, n_samples=n_samples,
                      n_ar_confidence=1000 if test_type == "ar" else -1)
    signatures, scores = test()
    key = next(k for k in scores if k != "System")
    return signatures[key].format(), scores[key]


def target_language(cfg: EvalConfig, refs) -> LanguageConfig:
    """Without a manifest: --tgt-lang, else the reference's suffix; segmentation detected."""
    lang = cfg.tgt_lang or Path(cfg.ref).suffix.lstrip(".") or "tgt"
    return LanguageConfig.create(lang, looks_segmented(refs, lang))


def evaluate(cfg: EvalConfig) -> dict:
    from sacrebleu.metrics import BLEU, CHRF

    if cfg.paired not in ("bs", "ar"):
        raise PipelineError(f"paired test must be 'bs' or 'ar', got {cfg.paired!r}")
    raw_refs = read_lines(cfg.ref)
    if cfg.data is not None:
        pipeline = TextPipeline.from_data_dir(cfg.data)
        manifest = pipeline.manifest
        src, tgt = manifest["src"], manifest["tgt"]
        n = subset_size(cfg, manifest)
        if len(raw_refs) != n:
            raise PipelineError(f"reference {cfg.ref} has {len(raw_refs)} lines, but the "
                                f"{cfg.subset} set of {cfg.data} has {n} sentences")
        tgt_lang = pipeline.tgt
    else:
        pipeline = manifest = None
        n = len(raw_refs)
        tgt_lang = target_language(cfg, raw_refs)
        tgt = tgt_lang.lang
    check_systems(cfg, manifest, n)
    tokenize = tgt_lang.sacrebleu_tokenize()
    require_sacrebleu_tokenizer(tokenize)  # before any decoding

    refs = [tgt_lang.reference(x) for x in raw_refs]
    hyp_dir = Path(cfg.hyp_dir) if cfg.hyp_dir else (
        Path(cfg.json_out).resolve().parent if cfg.json_out else None)
    if hyp_dir is not None:
        hyp_dir.mkdir(parents=True, exist_ok=True)

    outputs = []
    for spec in cfg.systems:
        record = {"name": spec.name, "sent_per_s": None}
        if spec.kind == "hyp":
            hyps = read_lines(spec.path)
            record["hyp_file"] = str(Path(spec.path).resolve())
        else:
            log_path = hyp_dir / f"{spec.name}.{cfg.subset}.generate.log" if hyp_dir else None
            decoded = decode(cfg.data, spec.path, src, tgt, cfg.subset, n, cfg.generate,
                             log_path=log_path)
            hyps = decode_pieces(tgt_lang, pipeline.sp, decoded.pieces)
            record["sent_per_s"] = decoded.sent_per_s
            record["generate_command"] = decoded.command
            if hyp_dir is not None:
                hyp_file = hyp_dir / f"{spec.name}.{cfg.subset}.{tgt}"
                write_lines(hyp_file, hyps)
                record["hyp_file"] = str(hyp_file)
        if len(hyps) != n:  # cannot happen after the checks above; keep the invariant explicit
            raise PipelineError(f"{spec.name}: {len(hyps)} hypotheses for {n} references")
        outputs.append((record, hyps))

    bleu = BLEU(tokenize=tokenize)
    signature, results = significance([(r["name"], h) for r, h in outputs], refs, bleu,
                                      cfg.paired, cfg.paired_n)
    chrf = CHRF()
    tok_bleu = BLEU(tokenize="none", force=True)
    tok_refs = [tgt_lang.bleu_tokenise(x) for x in refs]
    split_refs = ([tgt_lang.bleu_tokenise_compound_split(x) for x in refs]
                  if tgt_lang.compound_split_bleu() else None)
    systems = []
    for i, ((record, hyps), result) in enumerate(zip(outputs, results)):
        entry = {
            "name": record["name"],
            "bleu": float(result.score),
            "chrf": float(chrf.corpus_score(hyps, [refs]).score),
            "tok_bleu": float(tok_bleu.corpus_score([tgt_lang.bleu_tokenise(h) for h in hyps],
                                                    [tok_refs]).score),
            "n": len(hyps),
        }
        if split_refs is not None:
            entry["tok_bleu_compound_split"] = float(tok_bleu.corpus_score(
                [tgt_lang.bleu_tokenise_compound_split(h) for h in hyps], [split_refs]).score)
        if i > 0:
            entry["delta"] = entry["bleu"] - systems[0]["bleu"]
            entry["p_value"] = None if result.p_value is None else float(result.p_value)
        entry["bleu_ci"] = None if result.ci is None else float(result.ci)
        entry["sent_per_s"] = record["sent_per_s"]
        if "hyp_file" in record:
            entry["hyp_file"] = record["hyp_file"]
        systems.append(entry)
    report = {"signature": signature, "systems": systems}
    if cfg.json_out:
        with open(cfg.json_out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, ensure_ascii=False)
            f.write("\n")
    notes = {
        "chrf_signature": chrf.get_signature().format(),
        "tok_bleu": f"sacrebleu tokenize=none on text tokenised with "
                    f"{tgt_lang.bleu_tokenisation_name()}",
        "reference": ("Romanian reference normalised like the outputs "
                      f"(cedilla -> comma{', diacritics removed' if tgt_lang.romanian_remove_diacritics else ''})"
                      if tgt.lower() == "ro" else "raw reference, unchanged"),
        "test": "paired bootstrap resampling" if cfg.paired == "bs" else "approximate randomisation",
    }
    if split_refs is not None:
        notes["tok_bleu_compound_split"] = (
            "sacrebleu tokenize=none on Moses-tokenised text (sacremoses, escape=False, no "
            "aggressive dash splits) with hyphenated compounds split as ##AT##-##AT## "
            "(tensor2tensor get_ende_bleu.sh / fairseq compound_split_bleu.sh)")
    return {"report": report, "notes": notes}


def _fmt(x, spec=".2f"):
    return "—" if x is None else format(x, spec)


def markdown_table(report: dict, notes: Optional[dict] = None) -> str:
    split = any("tok_bleu_compound_split" in s for s in report["systems"])
    head = "| system | BLEU ± 95% CI | Δ vs baseline | p-value | chrF | tok BLEU |"
    rule = "|---|---|---|---|---|---|"
    if split:
        head += " tok BLEU, compound split ##AT## |"
        rule += "---|"
    rows = [head + " n | sent/s |", rule + "---|---|"]
    for i, s in enumerate(report["systems"]):
        bleu = f"{s['bleu']:.2f}" + (f" ± {s['bleu_ci']:.2f}" if s.get("bleu_ci") is not None else "")
        delta = "(baseline)" if i == 0 else f"{s['delta']:+.2f}"
        p = "" if i == 0 else _fmt(s.get("p_value"), ".4f")
        row = f"| {s['name']} | {bleu} | {delta} | {p} | {s['chrf']:.2f} | {s['tok_bleu']:.2f} |"
        if split:
            row += f" {_fmt(s.get('tok_bleu_compound_split'))} |"
        rows.append(row + f" {s['n']} | {_fmt(s.get('sent_per_s'), '.1f')} |")
    lines = rows + ["", f"BLEU signature: {report['signature']}"]
    if notes:
        lines += [f"chrF signature: {notes['chrf_signature']}",
                  f"tok BLEU: {notes['tok_bleu']}"]
        if "tok_bleu_compound_split" in notes:
            lines.append(f"tok BLEU, compound split: {notes['tok_bleu_compound_split']}")
        lines += [f"significance: {notes['test']} against {report['systems'][0]['name']}",
                  f"reference: {notes['reference']}"]
    return "\n".join(lines)
