"""ssan_plugin/criterions/srl_cross_entropy.py (with the srl task and the srl_tagger model):
token cross-entropy plus the selection regulariser, on a tiny CoNLL-2005 data-bin."""

import pytest
import torch
from helpers.srl_cli import tiny05  # noqa: F401  (fixture)


def test_criterion_is_token_cross_entropy_plus_selection_regulariser(tiny05):
    import ssan_plugin  # noqa: F401
    from fairseq import options, tasks

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        str(tiny05), "--task", "srl", "--arch", "srl_tagger", "--srl-encoder", "ssan",
        "--encoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32", "--encoder-layers", "2",
        "--encoder-attention-heads", "2", "--criterion", "srl_cross_entropy",
        "--select-scale", "0.5", "--cpu", "--ssan-layers", "1"])
    task = tasks.setup_task(args)
    task.load_dataset("valid")
    model = task.build_model(args).eval()
    criterion = task.build_criterion(args)
    batch = task.dataset("valid").collater([task.dataset("valid")[i] for i in range(3)])
    loss, sample_size, log = criterion(model, batch)

    logits, extra = model(**batch["net_input"])
    assert logits.shape == (3, 4, len(task.label_dict))
    assert [s.layer for s in extra["selection_stats"]] == [1]
    target = batch["target"]
    keep = target.ne(task.label_dict.pad()) & target.ne(task.label_dict.unk())
    assert int((target == task.label_dict.unk()).sum()) == 1  # the unseen A2 is not scored
    ce = torch.nn.functional.cross_entropy(logits[keep].float(), target[keep], reduction="sum")
    reg = 0.5 * extra["selection_stats"][0].pair_rate
    assert sample_size == batch["ntokens"] == 10
    assert float(loss) == pytest.approx(float(ce + reg * sample_size), rel=1e-5)
    assert log["sel_pairs_1"] > 0

    san = options.parse_args_and_arch(options.get_training_parser(), [
        str(tiny05), "--task", "srl", "--arch", "srl_tagger", "--encoder-embed-dim", "16",
        "--encoder-layers", "1", "--encoder-attention-heads", "2", "--cpu"])
    assert task.build_model(san)(**batch["net_input"])[1]["selection_stats"] == []
