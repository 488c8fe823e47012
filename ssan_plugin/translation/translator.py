"""Raw text -> translations, in-process, with the preprocessing a data-bin's manifest records.

``Translator(checkpoint, data_dir)`` checks the checkpoint against the data-bin's dictionary,
loads it with fairseq's ``checkpoint_utils.load_model_ensemble_and_task`` (through the
plugin's ``torch.load`` allow-list) and decodes with fairseq's own ``GeneratorHubInterface``
batching, ``task.build_generator`` (SequenceGenerator) and ``task.inference_step``. Text goes
through ``pipeline.TextPipeline`` (the same normalisation, Moses tokenisation and
sentencepiece model as the test split; the same detokenisation as ``ssan-evaluate-bleu``), and
hypotheses are post-processed as fairseq-generate's ``H-`` lines are. With the same beam,
length options and batch size the output equals the hypotheses ``ssan-evaluate-bleu`` writes.

Inputs that cannot be translated as they are never raise a torch error and never shorten the
output: one output per input, always. An empty input (or one that normalises to nothing)
yields an empty output without running the model. A sentence with more sentencepiece pieces
than the model's source positions is refused before any decoding (``too_long="error"``, the
default, naming each such sentence), truncated to fit (``"truncate"``) or given an empty output
(``"empty"``). Line ends (``\\r\\n``, ``\\n``) at the end of a sentence are removed; a line break
inside a sentence is refused (one sentence per element). Each case is logged and counted in the
``TranslationReport``.
"""

import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from .decode import TOO_LONG, DecodingOptions
from .checkpoints import check_checkpoint
from .pipeline import TextPipeline, progress
from .textio import PipelineError

logger = logging.getLogger("ssan_plugin.translation.translator")

__all__ = ["TOO_LONG", "TranslateOptions", "TranslationReport", "Translator"]


@dataclass
class TranslateOptions(DecodingOptions):
    """Decoding options (the defaults are ssan-evaluate-bleu's, ``too_long`` included) and the
    raw-input handling."""

    threads: int = 1  # sentencepiece encoding threads

    def validate(self):
        super().validate()
        if self.threads < 1:
            raise PipelineError(f"threads must be >= 1, got {self.threads}")


@dataclass
class TranslationReport:
    """What happened to each input; indices are 0-based positions in the input list."""

    n: int = 0
    translated: int = 0
    empty: List[int] = field(default_factory=list)  # empty (after normalisation): empty output
    too_long: List[Tuple[int, int]] = field(default_factory=list)  # (index, source tokens)
    too_long_action: str = "error"
    stripped_line_ends: int = 0  # inputs whose trailing \r / \n were removed
    max_source_tokens: int = 0  # the model's limit, end-of-sentence token included
    seconds: float = 0.0

    def messages(self) -> List[str]:
        out = []
        if self.stripped_line_ends:
            out.append(f"{self.stripped_line_ends} input(s) ended in a line break (\\r\\n or "
                       f"\\n): removed before translation")
        if self.empty:
            out.append(f"{len(self.empty)} empty input(s) (lines {_lines(self.empty)}): "
                       f"empty output, not decoded")
        if self.too_long:
            action = {"truncate": f"source truncated to its first "
                                  f"{self.max_source_tokens - 1} pieces before translation",
                      "empty": "empty output, not decoded"}[self.too_long_action]
            out.append(f"{len(self.too_long)} input(s) longer than the model's "
                       f"{self.max_source_tokens} source positions (lines "
                       f"{_lines([i for i, _ in self.too_long])}): {action}")
        return out


def _lines(indices, limit=10):
    shown = ", ".join(str(i + 1) for i in indices[:limit])
    return shown + (f", ... ({len(indices) - limit} more)" if len(indices) > limit else "")


def _generation_config(opts: TranslateOptions):
    """fairseq-generate's defaults plus our options (not the training run's cfg.generation)."""
    from fairseq.dataclass.configs import GenerationConfig
    from omegaconf import OmegaConf

    gen = OmegaConf.structured(GenerationConfig())
    gen.beam, gen.lenpen = opts.beam, opts.lenpen
    gen.max_len_a, gen.max_len_b = opts.max_len_a, opts.max_len_b
    gen.nbest = 1
    return gen


class Translator:
    """A checkpoint + its data-bin, ready to translate raw sentences."""

    def __init__(self, checkpoint, data_dir, options: Optional[TranslateOptions] = None,
                 compare_recorded_data: bool = True):
        import torch
        from fairseq import checkpoint_utils
        from fairseq.hub_utils import GeneratorHubInterface
        from omegaconf import open_dict

        # The plugin's models and tasks are in fairseq's registries because the caller has
        # registered the plugin (ssan_plugin.register(): the commands and the hub call it
        # before building a Translator); check_checkpoint (through
        # ssan_plugin.cli.checkpoints.load_checkpoint) puts the fairseq checkpoint globals on
        # torch.load's allow-list before fairseq loads the checkpoint below.
        self.options = options or TranslateOptions()
        self.options.validate()
        self.checkpoint, self.data_dir = Path(checkpoint), Path(data_dir)
        self.pipeline = TextPipeline.from_data_dir(data_dir)
        manifest = self.pipeline.manifest
        check_checkpoint(checkpoint, data_dir, manifest["src"], manifest["tgt"],
                         compare_recorded_data=compare_recorded_data)
        models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
            [str(checkpoint)], arg_overrides={"data": str(data_dir)})
        with open_dict(cfg):
            cfg.generation = _generation_config(self.options)
            # batches as fairseq-generate --batch-size N (no token budget from training)
            cfg.dataset.max_tokens = None
            cfg.dataset.batch_size = self.options.batch_size
        cpu = self.options.cpu if self.options.cpu is not None else not torch.cuda.is_available()
        self.hub = GeneratorHubInterface(cfg, task, models)
        if not cpu:
            self.hub.cuda()
        self.hub.eval()
        self.task = task
        self.max_source_tokens = int(self.hub.max_positions[0])
        self.last_report: Optional[TranslationReport] = None

    # ------------------------------------------------------------------ public API
    def translate(self, sentences: Sequence[str], **overrides) -> List[str]:
        """Raw sentences -> detokenised translations, one per sentence, in order.

        ``overrides``: any TranslateOptions field except ``cpu`` (e.g. ``beam=2``).
        Problems are logged; the details are in ``self.last_report``."""
        outputs, report = self.translate_with_report(sentences, **overrides)
        for message in report.messages():
            logger.warning(message)
        return outputs

    def translate_with_report(self, sentences: Sequence[str],
                              **overrides) -> Tuple[List[str], TranslationReport]:
        started = time.time()
        opts = replace(self.options, **overrides)
        opts.validate()
        if isinstance(sentences, str):
            raise PipelineError("translate() takes a list of sentences, not one string")
        report = TranslationReport(n=len(sentences), too_long_action=opts.too_long,
                                   max_source_tokens=self.max_source_tokens)
        raw = []
        for i, sentence in enumerate(sentences):
            if not isinstance(sentence, str):
                raise PipelineError(f"sentence {i + 1} is a {type(sentence).__name__}, not str")
            stripped = sentence.rstrip("\r\n")
            if stripped != sentence:
                report.stripped_line_ends += 1
            if "\n" in stripped or "\r" in stripped:
                raise PipelineError(f"sentence {i + 1} contains a line break inside it; pass "
                                    f"one sentence per list element (one per line)")
            raw.append(stripped)

        pieces = self.pipeline.encode_source(raw, threads=opts.threads)
        src_dict = self.task.source_dictionary
        limit = self.max_source_tokens - 1  # pieces; the end-of-sentence token takes one
        todo = []  # (index, token tensor)
        for i, line in enumerate(pieces):
            if not line:
                report.empty.append(i)
                continue
            tokens = src_dict.encode_line(line, add_if_not_exist=False, append_eos=True).long()
            if tokens.numel() > self.max_source_tokens:
                report.too_long.append((i, tokens.numel()))
                if opts.too_long == "truncate":
                    tokens = src_dict.encode_line(" ".join(line.split()[:limit]),
                                                  add_if_not_exist=False, append_eos=True).long()
                else:
                    continue
            todo.append((i, tokens))
        if report.too_long and opts.too_long == "error":
            shown = ", ".join(f"line {i + 1} ({n} tokens)" for i, n in report.too_long[:10])
            more = f" and {len(report.too_long) - 10} more" if len(report.too_long) > 10 else ""
            raise PipelineError(
                f"{len(report.too_long)} input(s) longer than the model's "
                f"{self.max_source_tokens} source positions (sentencepiece pieces + end of "
                f"sentence): {shown}{more}. Nothing was translated; split these sentences, or "
                f"choose --too-long truncate (translate the first {limit} pieces) or --too-long "
                f"empty (empty output for them)")

        outputs = [""] * len(raw)
        hyps = self._generate([t for _, t in todo], opts)
        for (i, _), text in zip(todo, self.pipeline.decode_target(hyps)):
            outputs[i] = text
        report.translated = len(todo)
        report.seconds = time.time() - started
        if len(outputs) != len(sentences):  # the contract: one output per input
            raise AssertionError(f"{len(outputs)} outputs for {len(sentences)} inputs")
        self.last_report = report
        return outputs, report

    # ------------------------------------------------------------------ decoding
    def _generate(self, tokens: List, opts: TranslateOptions) -> List[str]:
        """fairseq's batching and SequenceGenerator; returns the best hypothesis of each input
        as fairseq-generate's H- text (space-joined target dictionary symbols)."""
        import torch
        from fairseq import utils
        from fairseq_cli.generate import get_symbols_to_strip_from_output

        if not tokens:
            return []
        hub = self.hub
        generator = self.task.build_generator(hub.models, _generation_config(opts))
        strip = get_symbols_to_strip_from_output(generator)
        saved = hub.cfg.dataset.batch_size
        hub.cfg.dataset.batch_size = opts.batch_size
        try:
            batches = hub._build_batches(tokens, skip_invalid_size_inputs=False)
        finally:
            hub.cfg.dataset.batch_size = saved
        results = {}
        bar = progress(range(len(tokens)), "translate", unit=" sentences",
                       min_total=2 * opts.batch_size)  # decoding is slow: show it sooner
        with torch.no_grad():
            for batch in batches:
                batch = utils.apply_to_sample(lambda t: t.to(hub.device), batch)
                hypos = self.task.inference_step(generator, hub.models, batch)
                for sample_id, sentence_hypos in zip(batch["id"].tolist(), hypos):
                    _, text, _ = utils.post_process_prediction(
                        hypo_tokens=sentence_hypos[0]["tokens"].int().cpu(), src_str="",
                        alignment=sentence_hypos[0]["alignment"], align_dict=None,
                        tgt_dict=hub.tgt_dict, remove_bpe=None, extra_symbols_to_ignore=strip)
                    results[sample_id] = text
                bar.update(len(hypos))
        bar.close()
        missing = [i for i in range(len(tokens)) if i not in results]
        if missing:  # fairseq's batching must return every sentence; never a shorter output
            raise PipelineError(f"fairseq returned no hypothesis for {len(missing)} of "
                                f"{len(tokens)} sentences (first: {missing[:5]})")
        return [results[i] for i in range(len(tokens))]
