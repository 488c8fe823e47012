"""Continue a trained fairseq Transformer as an encoder variant, schedule and all.

The reference trains SSAN from a trained Transformer and continues its schedule: weights,
update counter and learning-rate schedule carry over, the optimizer state is fresh, only the
policy networks are new. fairseq cannot do that alone: ``--finetune-from-model`` and
``--restore-file ... --reset-optimizer`` both restart the update counter and the schedule (a
second warm-up on a trained model), and without ``--reset-optimizer`` the optimizer state of the
plain model does not fit the variant's parameters.

:func:`continue_as_variant` writes a checkpoint of the variant that fairseq-train resumes from
(``--restore-file`` or as ``SAVE_DIR/checkpoint_last.pt``):

- model: every parameter of the base whose name and shape the variant shares; the variant's new
  parameters (SSAN's ``policy_proj``, a DiSAN sublayer, ...) freshly initialised; base
  parameters the variant does not have are dropped. Both lists are returned and logged;
- optimizer: a fresh state (no moments) for exactly the variant's trainable parameters, with
  the base's hyper-parameters (fairseq overrides the learning rate from the command line);
- the base's update counter, learning-rate scheduler state, epoch and position in the epoch;
  not the base's best validation score (``checkpoint_best.pt`` is the variant's own best).
"""

import argparse
import copy
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

from fairseq import checkpoint_utils, tasks
from fairseq.criterions import CRITERION_REGISTRY
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY
from omegaconf import OmegaConf

from .models.variant_transformer import VariantTransformerModel

logger = logging.getLogger(__name__)


class WarmStartError(ValueError):
    """A base checkpoint that cannot be continued as the requested variant."""


@dataclass
class WarmStartReport:
    new_parameters: List[str]
    dropped_parameters: List[str]
    num_updates: int


def variant_args(base_args: argparse.Namespace, arch: str, variant_flags: Sequence[str]):
    """The base's model arguments (its shape) with ``arch`` and the variant's own options."""
    model_cls = ARCH_MODEL_REGISTRY.get(arch)
    if model_cls is None or not issubclass(model_cls, VariantTransformerModel):
        raise WarmStartError(f"--arch {arch!r} is not an encoder variant of this plugin")
    parser = argparse.ArgumentParser(prog=f"variant options of {arch}", add_help=False,
                                     exit_on_error=False)
    model_cls.add_variant_args(parser)
    try:
        own, unknown = parser.parse_known_args(list(variant_flags))
    except argparse.ArgumentError as err:
        raise WarmStartError(str(err)) from None
    if unknown:
        raise WarmStartError(f"{' '.join(unknown)}: only {arch}'s own options may be given; the "
                             "model shape is the base checkpoint's")
    args = copy.deepcopy(base_args)
    vars(args).update(vars(own))
    args.arch = args._name = arch
    ARCH_CONFIG_REGISTRY[arch](args)  # fills what is still missing; the base's shape stays
    return args


def check_data(task_cfg, given: bool) -> None:
    """The data-bin a translation task is set up from holds what fairseq reads first: a language
    pair (the base's, or one in the file names) and its two dictionaries; else WarmStartError,
    one line naming the folder (``given``: it came from --data, not from the base)."""
    if task_cfg.get("_name") != "translation":
        return
    from fairseq import utils
    from fairseq.data import data_utils

    path = Path(utils.split_paths(str(task_cfg.data))[0])
    where = f"--data {path}" if given else f"the base's data-bin {path} (give --data)"
    if not path.is_dir():
        raise WarmStartError(f"{where} is not a directory")
    src, tgt = task_cfg.get("source_lang"), task_cfg.get("target_lang")
    if src is None or tgt is None:
        src, tgt = data_utils.infer_language_pair(str(path))
    if src is None or tgt is None:
        raise WarmStartError(f"{where} is not a fairseq data-bin: no SPLIT.SRC-TGT.LANG.idx file "
                             f"gives the language pair; give the data-bin the base was trained on")
    missing = [f"dict.{lang}.txt" for lang in (src, tgt) if not (path / f"dict.{lang}.txt").is_file()]
    if missing:
        raise WarmStartError(f"{where} has no {' or '.join(missing)}; give the data-bin the base "
                             f"was trained on")


def fresh_optimizer_state(base_state: dict, num_params: int) -> dict:
    """A torch optimizer state with no per-parameter state, for ``num_params`` parameters in
    one group, with the hyper-parameters of the base's (single) group."""
    groups = base_state["param_groups"]
    if len(groups) != 1:
        raise WarmStartError(f"the base optimizer has {len(groups)} parameter groups; one expected")
    group = {k: v for k, v in groups[0].items() if k != "params"}
    return {"state": {}, "param_groups": [dict(group, params=list(range(num_params)))]}


def continue_as_variant(base_path: str, out_path: str, arch: str, variant_flags: Sequence[str] = (),
                        criterion: str = "selective_label_smoothed_cross_entropy",
                        data: Optional[str] = None) -> WarmStartReport:
    """Write ``out_path``: ``base_path`` (a fairseq translation checkpoint) continued as ``arch``."""
    from . import register

    register()  # the plugin's architectures and criteria, the checkpoint allow-list

    if criterion not in CRITERION_REGISTRY:
        raise WarmStartError(f"--criterion {criterion!r} is not registered")
    state = checkpoint_utils.load_checkpoint_to_cpu(base_path)
    history = state.get("optimizer_history") or []
    if not history or state.get("last_optimizer_state") is None:
        raise WarmStartError(f"{base_path}: no optimizer history (saved with "
                             "--no-save-optimizer-state?): nothing to continue")
    base_args = state["cfg"]["model"]
    if not isinstance(base_args, argparse.Namespace):
        raise WarmStartError(f"{base_path}: not a checkpoint of a fairseq Transformer-family model")
    args = variant_args(base_args, arch, variant_flags)

    task_cfg = state["cfg"]["task"]
    if data:
        task_cfg = OmegaConf.merge(task_cfg, {"data": data})
    check_data(task_cfg, given=bool(data))
    model = tasks.setup_task(task_cfg).build_model(args)
    fresh, base = model.state_dict(), state["model"]
    mismatched = [k for k in fresh if k in base and base[k].shape != fresh[k].shape]
    if mismatched:
        raise WarmStartError(f"shapes differ for {', '.join(mismatched[:4])}: the variant must keep "
                             "the base's model shape (and dictionaries)")
    new = sorted(k for k in fresh if k not in base)
    dropped = sorted(k for k in base if k not in fresh)
    model.load_state_dict({k: base.get(k, v) for k, v in fresh.items()}, strict=True)

    trainable = sum(1 for p in model.parameters() if p.requires_grad)
    last = dict(history[-1], criterion_name=CRITERION_REGISTRY[criterion].__name__)
    state["model"] = model.state_dict()
    state["cfg"]["model"] = args
    state["cfg"]["criterion"] = {"_name": criterion}
    state["optimizer_history"] = history[:-1] + [last]
    state["last_optimizer_state"] = fresh_optimizer_state(state["last_optimizer_state"], trainable)
    # the variant's checkpoint_best.pt is chosen among its own validations, not against the
    # base's best (which it might never beat, leaving no checkpoint_best.pt at all)
    (state.get("extra_state") or {}).pop("best", None)
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    checkpoint_utils.torch_persistent_save(state, out_path)
    for name in new:
        logger.info("new (freshly initialised): %s", name)
    for name in dropped:
        logger.info("dropped (the variant has no such parameter): %s", name)
    return WarmStartReport(new, dropped, int(last["num_updates"]))
