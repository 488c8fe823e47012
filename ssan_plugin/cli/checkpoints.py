"""Loading a fairseq checkpoint a command was given: torch's weights_only loader with the
plugin's allow-list, and one line for a missing, truncated, refused or wrong-task file. torch
is imported when a checkpoint is loaded, not with this module."""

import warnings
from fnmatch import fnmatch
from pathlib import Path
from typing import Optional, Tuple

from ..errors import InputError, one_line
from .files import check_input_file

def cfg_get(container, key):
    """``key`` of a checkpoint's config section, which is a dict, an omegaconf node or an
    argparse Namespace depending on the fairseq version that saved it; None when absent."""
    if container is None:
        return None
    if hasattr(container, "get"):
        return container.get(key)
    return getattr(container, key, None)


def checkpoint_identity(state: dict) -> dict:
    """{"task": name or None, "arch": name or None} recorded in a fairseq checkpoint state."""
    cfg, args = state.get("cfg"), state.get("args")
    task = cfg_get(cfg_get(cfg, "task"), "_name") or cfg_get(args, "task")
    model = cfg_get(cfg, "model")
    arch = cfg_get(model, "arch") or cfg_get(model, "_name") or cfg_get(args, "arch")
    return {"task": task, "arch": arch}


def load_checkpoint(path, expect_task: Optional[str] = None, expect_arch: Optional[str] = None,
                    what: str = "checkpoint") -> dict:
    """The state of a fairseq checkpoint, loaded with torch's weights_only check and the
    plugin's allow-list (``checkpoint_safety``). InputError, first the file, for a missing file,
    a directory, an empty or truncated file, a pickle the safe loader refuses (and the reason),
    a file without model state, and, with ``expect_task`` / ``expect_arch`` (fnmatch patterns,
    e.g. ``srl_tagger*``), a checkpoint of another task or architecture: what was expected and
    what was found."""
    import pickle

    import torch

    from ..runtime.checkpoint_safety import allow_fairseq_checkpoint_globals

    allow_fairseq_checkpoint_globals()  # the globals fairseq checkpoints pickle (idempotent)

    path = Path(path)
    label = f"{what} {path}".strip()
    if path.is_dir():
        raise InputError(f"{label} is a directory; give a checkpoint file, e.g. "
                         f"{path / 'checkpoint_best.pt'}")
    check_input_file(path, what)
    if path.stat().st_size == 0:
        raise InputError(f"{label} is empty (0 bytes): not a checkpoint")
    try:
        with warnings.catch_warnings():  # torch warns about the pickle protocol of odd files
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        text = str(err)
        if "Weights only load failed" in text:
            reason = text.split("Check the documentation")[0]
            for marker in ("trusted source.", "WeightsUnpickler error:"):
                reason = reason.split(marker, 1)[-1]
            raise InputError(f"{label}: refused by torch's safe loader (Weights only load "
                             f"failed): {one_line(reason)[:300]}") from None
        raise InputError(f"{label} is truncated or not a torch checkpoint: "
                         f"{one_line(text)[:300]}") from None
    except Exception as err:  # truncated zip, a text file, ...: torch raises many types
        raise InputError(f"{label} is truncated or not a torch checkpoint: "
                         f"{type(err).__name__}: {one_line(err)[:200]}") from None
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        raise InputError(f"{label} is not a fairseq checkpoint (no model state)")
    if expect_task is not None or expect_arch is not None:
        found = checkpoint_identity(state)
        ok_task = expect_task is None or found["task"] == expect_task
        ok_arch = expect_arch is None or (found["arch"] is not None
                                          and fnmatch(found["arch"], expect_arch))
        if not (ok_task and ok_arch):
            expected = ", ".join(f"{k} {v!r}" for k, v in (("task", expect_task),
                                                            ("arch", expect_arch)) if v)
            raise InputError(f"{label}: expected a checkpoint of {expected}, found task "
                             f"{found['task']!r}, arch {found['arch']!r}")
    return state


def embedding_mismatch(state: dict, key: str, dict_path) -> Optional[Tuple[int, int]]:
    """(rows, entries) when the checkpoint's weight ``key`` (an embedding, one row per
    dictionary entry, e.g. ``encoder.embed_tokens.weight``) and the fairseq dictionary at
    ``dict_path`` (its 4 special symbols included) differ in size: the model was trained on
    another dictionary. None when they agree, or when the weight or the file is absent.
    A dictionary fairseq cannot read: InputError naming the file."""
    weight = (state.get("model") or {}).get(key)
    if weight is None or not Path(dict_path).is_file():
        return None
    from fairseq.data import Dictionary

    try:
        entries = len(Dictionary.load(str(dict_path)))
    except Exception as err:  # a damaged dictionary: fairseq raises several types
        raise InputError(f"{dict_path}: not a fairseq dictionary ({type(err).__name__}: "
                         f"{err})") from None
    rows = int(weight.shape[0])
    return None if rows == entries else (rows, entries)
