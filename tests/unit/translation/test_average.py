"""ssan_plugin/translation/average.py: which checkpoints --last N takes (numbers, not names,
ordered; both kinds refused unless chosen), and the average against a direct mean of stand-in
checkpoints: float tensors averaged in float64 and kept in their dtype, integer tensors equal
and copied, the newest input's other entries kept; every mismatch named."""

import os

import pytest
import torch

from ssan_plugin.translation.average import average_checkpoints, average_states, last_checkpoints
from ssan_plugin.translation.textio import PipelineError


def touch(directory, *names):
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_bytes(b"")
    return directory


def test_last_epoch_checkpoints_by_number(tmp_path):
    d = touch(tmp_path, "checkpoint9.pt", "checkpoint10.pt", "checkpoint2.pt",
              "checkpoint_best.pt", "checkpoint_last.pt", "checkpoint3.pt.tmp")
    assert [p.name for p in last_checkpoints(d, 2)] == ["checkpoint9.pt", "checkpoint10.pt"]
    assert [p.name for p in last_checkpoints(d, 3, "epoch")] == ["checkpoint2.pt", "checkpoint9.pt",
                                                                 "checkpoint10.pt"]


def test_last_update_checkpoints_by_update(tmp_path):
    d = touch(tmp_path, "checkpoint_2_900.pt", "checkpoint_1_1000.pt", "checkpoint_3_1100.pt",
              "checkpoint_best.pt")
    assert [p.name for p in last_checkpoints(d, 2)] == ["checkpoint_1_1000.pt", "checkpoint_3_1100.pt"]


def test_last_checkpoints_refusals(tmp_path):
    d = touch(tmp_path / "both", "checkpoint1.pt", "checkpoint2.pt", "checkpoint_1_10.pt")
    with pytest.raises(PipelineError, match="has both epoch .* choose with --kind epoch or --kind update"):
        last_checkpoints(d, 1)
    assert [p.name for p in last_checkpoints(d, 1, "update")] == ["checkpoint_1_10.pt"]
    with pytest.raises(PipelineError, match=r"--last 3: .* has 2 epoch checkpoint\(s\) \(checkpointE.pt\)"):
        last_checkpoints(d, 3, "epoch")
    with pytest.raises(PipelineError, match="--last N needs N >= 1, got 0"):
        last_checkpoints(d, 0)
    with pytest.raises(PipelineError, match="--last: .*nodir is not a directory"):
        last_checkpoints(tmp_path / "nodir", 1)
    empty = touch(tmp_path / "empty")
    with pytest.raises(PipelineError, match=r"has 0 epoch checkpoint\(s\)"):
        last_checkpoints(empty, 1)


def save(path, model, **other):
    torch.save({"model": model, **other}, path)
    return path


def three(tmp_path):
    g = torch.Generator().manual_seed(0)
    paths, models = [], []
    for k in range(3):
        model = {"w": torch.randn(3, 2, generator=g), "h": torch.randn(4, generator=g).half(),
                 "steps": torch.tensor([5, 7])}
        models.append(model)
        paths.append(save(tmp_path / f"c{k}.pt", model, extra_state={"epoch": k}))
    return paths, models


def test_the_average_is_the_mean(tmp_path):
    paths, models = three(tmp_path)
    state = average_states(paths)
    w = sum(m["w"].double() for m in models) / 3
    h = sum(m["h"].double() for m in models) / 3
    assert state["model"]["w"].dtype == torch.float32 and torch.equal(state["model"]["w"], w.float())
    assert state["model"]["h"].dtype == torch.float16 and torch.equal(state["model"]["h"], h.half())
    assert torch.equal(state["model"]["steps"], torch.tensor([5, 7]))
    assert state["extra_state"] == {"epoch": 2}  # the newest (last) input's
    assert state["averaged_from"] == [str(p.resolve()) for p in paths]
    assert torch.equal(average_states(paths[:1])["model"]["w"], models[0]["w"])


@pytest.mark.parametrize("change, message", [
    (lambda m: m.pop("h"), r"c1.pt has other parameters than .*c0.pt \(missing \['h'\], extra \[\]\)"),
    (lambda m: m.update(x=torch.zeros(1)), r"\(missing \[\], extra \['x'\]\)"),
    (lambda m: m.update(w=torch.zeros(2, 3)), r"c1.pt: w has shape \(2, 3\), .*c0.pt has \(3, 2\)"),
    (lambda m: m.update(steps=torch.tensor([5, 8])), "c1.pt: integer tensor steps differs from"),
])
def test_checkpoints_that_cannot_be_averaged(tmp_path, change, message):
    paths, models = three(tmp_path)
    change(models[1])
    save(paths[1], models[1])
    with pytest.raises(PipelineError, match=message):
        average_states(paths)


def test_input_refusals(tmp_path):
    paths, _ = three(tmp_path)
    with pytest.raises(PipelineError, match="give at least one checkpoint"):
        average_states([])
    with pytest.raises(PipelineError, match="the same checkpoint is given twice"):
        average_states([paths[0], tmp_path / "." / "c0.pt"])
    save(tmp_path / "empty.pt", {})
    with pytest.raises(PipelineError, match="empty.pt is not a fairseq checkpoint"):
        average_states([tmp_path / "empty.pt"])
    with pytest.raises(PipelineError, match="missing.pt"):
        average_states([paths[0], tmp_path / "missing.pt"])


class RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_an_unsafe_pickle_is_refused_unrun(tmp_path):
    paths, _ = three(tmp_path)
    save(tmp_path / "evil.pt", {"w": torch.zeros(3, 2)}, args=RunsCode(tmp_path / "ran"))
    with pytest.raises(PipelineError, match="refused by torch's safe loader"):
        average_states([paths[0], tmp_path / "evil.pt"])
    assert not (tmp_path / "ran").exists()


def test_average_checkpoints_writes_the_average(tmp_path):
    paths, _ = three(tmp_path)
    out = tmp_path / "avg" / "averaged.pt"
    state = average_checkpoints(paths, out)
    written = torch.load(out, weights_only=True)
    assert torch.equal(written["model"]["w"], state["model"]["w"])
    assert sorted(p.name for p in out.parent.iterdir()) == ["averaged.pt"]  # no .tmp left
    with pytest.raises(PipelineError, match="--output .*c1.pt is one of the inputs"):
        average_checkpoints(paths, tmp_path / "c1.pt")
