"""Average the parameters of several fairseq checkpoints (as fairseq's scripts/average_checkpoints.py,
which fairseq-fixed does not ship), loading every file through the plugin's ``torch.load``
allow-list (``weights_only=True``; never unsafe unpickling). Any task's checkpoints (translation,
srl, sentence_pair), as long as they hold the same parameters.

Floating-point tensors are averaged in float64 and stored in their own dtype; integer tensors
must be equal in every input (they are counters, not weights) and are copied. All inputs must
hold the same parameter names and shapes. The output keeps the newest input's other entries
(cfg/args, extra_state, optimizer history: fairseq-generate, -validate, -interactive and
``--finetune-from-model`` read it as any checkpoint) and records ``averaged_from``.
"""

import logging
import os
import re
from pathlib import Path
from typing import List, Sequence

from .checkpoints import load_checkpoint_state
from .textio import PipelineError

logger = logging.getLogger("ssan_plugin.translation.average")

_EPOCH = re.compile(r"^checkpoint(\d+)\.pt$")
_UPDATE = re.compile(r"^checkpoint_(\d+)_(\d+)\.pt$")


def last_checkpoints(directory, n: int, kind: str = "auto") -> List[Path]:
    """The ``n`` newest epoch (``checkpointE.pt``) or update (``checkpoint_E_U.pt``)
    checkpoints of ``directory``, oldest first. ``kind='auto'`` takes whichever kind exists
    and refuses to guess when both do."""
    directory = Path(directory)
    if n < 1:
        raise PipelineError(f"--last N needs N >= 1, got {n}")
    if not directory.is_dir():
        raise PipelineError(f"--last: {directory} is not a directory")
    epochs = sorted((int(m.group(1)), p) for p in directory.iterdir()
                    if (m := _EPOCH.match(p.name)))
    updates = sorted((int(m.group(2)), p) for p in directory.iterdir()
                     if (m := _UPDATE.match(p.name)))
    if kind == "auto":
        if epochs and updates:
            raise PipelineError(f"{directory} has both epoch (checkpointE.pt) and update "
                                f"(checkpoint_E_U.pt) checkpoints: choose with --kind epoch "
                                f"or --kind update")
        kind = "update" if updates else "epoch"
    found = updates if kind == "update" else epochs
    pattern = "checkpoint_E_U.pt" if kind == "update" else "checkpointE.pt"
    if len(found) < n:
        raise PipelineError(f"--last {n}: {directory} has {len(found)} {kind} checkpoint(s) "
                            f"({pattern}); save more (--keep-last-epochs / "
                            f"--keep-interval-updates) or average fewer")
    return [p for _, p in found[-n:]]


def average_states(paths: Sequence) -> dict:
    """The averaged checkpoint state (a dict ready for torch.save)."""
    import torch

    if len(paths) < 1:
        raise PipelineError("give at least one checkpoint to average")
    if len(set(map(os.path.realpath, map(str, paths)))) != len(paths):
        raise PipelineError(f"the same checkpoint is given twice: {[str(p) for p in paths]}")
    sums, reference, keys, state = {}, {}, None, None
    for path in paths:
        state = load_checkpoint_state(path, expect_task=None)  # any task's checkpoints
        model = state.get("model")
        if not isinstance(model, dict) or not model:
            raise PipelineError(f"{path} is not a fairseq checkpoint (no model parameters)")
        if keys is None:
            keys = list(model)
            first = path
        elif set(model) != set(keys):
            missing, extra = sorted(set(keys) - set(model)), sorted(set(model) - set(keys))
            raise PipelineError(f"{path} has other parameters than {first} (missing "
                                f"{missing[:5]}, extra {extra[:5]}): checkpoints of different "
                                f"models cannot be averaged")
        for key in keys:
            tensor = model[key]
            if key not in reference:
                reference[key] = tensor
            elif tensor.shape != reference[key].shape:
                raise PipelineError(f"{path}: {key} has shape {tuple(tensor.shape)}, {first} "
                                    f"has {tuple(reference[key].shape)}")
            if tensor.is_floating_point():
                value = tensor.detach().to(torch.float64)
                sums[key] = value if key not in sums else sums[key] + value
            elif not torch.equal(tensor, reference[key]):
                raise PipelineError(f"{path}: integer tensor {key} differs from {first}'s; "
                                    f"integer tensors are not averaged")
    averaged = {}
    for key in keys:
        if key in sums:
            averaged[key] = (sums[key] / len(paths)).to(reference[key].dtype)
        else:
            averaged[key] = reference[key].clone()
    state["model"] = averaged  # every other entry: the newest (last) input's
    state["averaged_from"] = [str(Path(p).resolve()) for p in paths]
    return state


def average_checkpoints(paths: Sequence, output) -> dict:
    """Average ``paths`` into ``output`` (written atomically); returns the state."""
    import torch

    output = Path(output)
    if output.resolve() in {Path(p).resolve() for p in paths}:
        raise PipelineError(f"--output {output} is one of the inputs; choose another file")
    state = average_states(paths)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, output)
    logger.info("averaged %d checkpoints into %s: %s", len(paths), output,
                ", ".join(str(p) for p in paths))
    return state
