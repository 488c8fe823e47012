"""fairseq-train's start-up in-process on a data-bin: (task, model, criterion) and a batch."""

from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from conftest import PLUGIN_DIR, TINY_MODEL


def build(data, argv):
    """Parse ``argv`` as fairseq-train does (tiny model flags first) -> (task, model, criterion)."""
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [str(data), "--user-dir", str(PLUGIN_DIR), *TINY_MODEL, *argv])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    return task, task.build_model(cfg.model), task.build_criterion(cfg.criterion)


def first_batch(task, split="train", max_sentences=8):
    task.load_dataset(split)
    itr = task.get_batch_iterator(task.dataset(split), max_sentences=max_sentences, seed=1)
    return next(itr.next_epoch_itr(shuffle=False))
