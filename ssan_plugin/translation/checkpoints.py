"""Refuse a checkpoint that was trained on another dictionary, before any decoding starts.

A fairseq checkpoint does not store its dictionary, but its embedding matrices have one row per
dictionary entry: the sizes must equal those of the data-bin's dictionaries. When the data
directory recorded in the checkpoint still exists, its dictionaries must also be identical to
ours (catches a different vocabulary of the same size).
"""

from pathlib import Path

from .textio import PipelineError


def _task_cfg(state):
    from ..cli.checkpoints import cfg_get

    task = cfg_get(state.get("cfg"), "task")
    if task is not None:
        return {k: cfg_get(task, k) for k in ("data", "source_lang", "target_lang")}
    args = state.get("args")
    if args is not None:
        return {k: getattr(args, k, None) for k in ("data", "source_lang", "target_lang")}
    return {"data": None, "source_lang": None, "target_lang": None}


def load_checkpoint_state(path, expect_task="translation"):
    """The checkpoint's state, with ssan_plugin.cli.checkpoints.load_checkpoint's checks (safe loading,
    a translation checkpoint); PipelineError otherwise."""
    from ..errors import InputError
    from ..cli.checkpoints import load_checkpoint

    try:
        return load_checkpoint(path, expect_task=expect_task)
    except InputError as err:
        raise PipelineError(str(err)) from None


def check_checkpoint(path, data_dir, src, tgt, compare_recorded_data=True):
    """Raise PipelineError if the checkpoint cannot have been trained on data_dir's dictionary."""
    from ..cli.checkpoints import embedding_mismatch
    from ..errors import InputError

    state = load_checkpoint_state(path)
    data_dir = Path(data_dir)
    task = _task_cfg(state)
    for side, lang in (("source", src), ("target", tgt)):
        recorded = task[f"{side}_lang"]
        if recorded is not None and recorded != lang:
            raise PipelineError(f"{path} was trained with {side} language {recorded!r}, but "
                                f"{data_dir} has {lang!r}")
    for side, lang in (("encoder", src), ("decoder", tgt)):
        dict_path = data_dir / f"dict.{lang}.txt"
        if not dict_path.is_file():
            raise PipelineError(f"missing dictionary {dict_path}")
        try:
            mismatch = embedding_mismatch(state, f"{side}.embed_tokens.weight", dict_path)
        except InputError as err:
            raise PipelineError(str(err)) from None
        if mismatch is not None:
            raise PipelineError(
                f"{path} was trained on another dictionary: its {side} embedding has "
                f"{mismatch[0]} rows, but {dict_path} has {mismatch[1]} entries (with the 4 "
                f"special symbols); evaluate it on the data-bin it was trained on")
    recorded_dir = task["data"]
    if compare_recorded_data and recorded_dir and Path(recorded_dir).is_dir():
        for lang in (src, tgt):
            theirs = Path(recorded_dir) / f"dict.{lang}.txt"
            ours = data_dir / f"dict.{lang}.txt"
            if theirs.is_file() and theirs.resolve() != ours.resolve() \
                    and theirs.read_bytes() != ours.read_bytes():
                raise PipelineError(
                    f"{path} was trained on {recorded_dir}, whose {theirs.name} differs from "
                    f"{ours}: another dictionary (pass --skip-recorded-data-check if "
                    f"{recorded_dir} no longer holds the training data)")
    return task
