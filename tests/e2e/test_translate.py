"""Raw text -> translation (ssan-translate, ssan_plugin.hub) and checkpoint averaging
(ssan-average-checkpoints), end to end on the synthetic corpus: prepare_translation.py,
a tiny ssan_transformer trained for 30 updates (interval checkpoints at 10 and 30).

The outputs must equal the hypotheses evaluate_bleu.py writes for the test split (same
checkpoint, beam, length options and batch size; batches of 8, so several batches), bad inputs
(empty lines, CRLF, a line longer than the model's source positions) are handled and reported
without a traceback or a shorter output, and the averaged checkpoint is the mean and decodes.
"""

from pathlib import Path

import pytest
import torch
from helpers.translation_testlib import (PY, ROOT, SCRIPTS, evaluate, lines, load_script,
                                         prepare, read_json, run, train_tiny)

N_TEST = 37
GEN = ["--beam", 2, "--max-len-a", 0, "--max-len-b", 12, "--batch-size", 8]
TRANSLATE = load_script("translate")
AVERAGE = load_script("average_checkpoints")


def train_with_interval_checkpoints(data, save_dir):
    train_tiny(data, "ssan_transformer", save_dir, 30, 1, "--save-interval-updates", 10)
    found = sorted(Path(save_dir).glob("checkpoint_*_*.pt"))
    assert len(found) >= 2, found
    return Path(save_dir)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("translate")
    raw = tmp / "raw"
    run([PY, SCRIPTS / "make_synthetic_corpus.py", "--out", raw, "--train", 300,
         "--valid", 40, "--test", N_TEST])
    data = tmp / "bin"
    prepare("src", "tgt", raw, data, 100)
    ck = train_with_interval_checkpoints(data, tmp / "ck")
    checkpoint = ck / "checkpoint_last.pt"
    out = tmp / "eval"
    out.mkdir()
    evaluate(data, raw / "test.tgt", [("system", "ssan", checkpoint)], out / "r.json", *GEN)
    hyps = lines(read_json(out / "r.json")["systems"][0]["hyp_file"])
    assert len(hyps) == N_TEST
    return dict(tmp=tmp, raw=raw, data=data, ck=ck, checkpoint=checkpoint, hyps=hyps)


@pytest.fixture(scope="module")
def translator(setup):
    import ssan_plugin.hub

    return ssan_plugin.hub.load(setup["checkpoint"], setup["data"], beam=2, max_len_a=0,
                                max_len_b=12, batch_size=8)


def translate_cli(setup, *extra, input_bytes=None, check=True):
    """ssan-translate in a subprocess, text on stdin."""
    import subprocess

    from helpers.translation_testlib import ENV

    args = [PY, "-m", "ssan_plugin.commands.translate", "--data", setup["data"], "--checkpoint",
            setup["checkpoint"], *GEN, *extra]
    result = subprocess.run([str(a) for a in args], input=input_bytes, capture_output=True,
                            env=ENV, timeout=600)
    if check:
        assert result.returncode == 0, result.stderr.decode()[-3000:]
    return result


def translate_main(setup, tmp_path, data: bytes, *extra, checkpoint=None, data_dir=None):
    """ssan-translate's main in-process on a file: (exit code, output lines or None)."""
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_bytes(data)
    if out.exists():
        out.unlink()
    code = TRANSLATE.main(["--data", str(data_dir or setup["data"]), "--checkpoint",
                           str(checkpoint or setup["checkpoint"]), "--input", str(src),
                           "--output", str(out), "--quiet", *map(str, GEN), *extra])
    if not out.exists():
        return code, None
    text = out.read_text("utf-8")
    assert text == "" or text.endswith("\n")
    return code, text.split("\n")[:-1]


# ------------------------------------------------------------------ same as evaluation

def test_translate_script_equals_evaluated_hypotheses(setup):
    raw_src = (setup["raw"] / "test.src").read_bytes()
    result = translate_cli(setup, input_bytes=raw_src)
    out = result.stdout.decode("utf-8").split("\n")
    assert out[-1] == "" and out[:-1] == setup["hyps"]
    err = result.stderr.decode()
    assert f"{N_TEST} lines in, {N_TEST} lines out ({N_TEST} decoded)" in err
    assert "Traceback" not in err


def test_hub_equals_evaluated_hypotheses(setup, translator):
    raw_src = lines(setup["raw"] / "test.src")
    outputs = translator.translate(raw_src)
    assert outputs == setup["hyps"]
    # a subset in another order: each sentence's translation does not depend on its neighbours
    # (length limits do not depend on the batch when max_len_a = 0)
    order = [5, 0, 36, 17]
    assert translator.translate([raw_src[i] for i in order]) == [setup["hyps"][i] for i in order]


def test_fairseq_from_pretrained_as_the_readme_shows(setup):
    """fairseq's own hub (README, "Translating raw text"): from_pretrained with the plugin as
    user_dir and the data-bin's sentencepiece model. The synthetic corpus needs no normalisation
    or Moses tokenisation, so it gives the evaluated hypotheses too."""
    from fairseq.models.transformer import TransformerModel

    model = TransformerModel.from_pretrained(
        str(setup["ck"]), checkpoint_file="checkpoint_last.pt", data_name_or_path=str(setup["data"]),
        user_dir=str(ROOT / "ssan_plugin"), bpe="sentencepiece",
        sentencepiece_model=str(setup["data"] / "spm.model"))
    outputs = model.translate(lines(setup["raw"] / "test.src"), beam=2, max_len_a=0, max_len_b=12)
    assert outputs == setup["hyps"]


def test_hub_applies_the_manifest_preprocessing(setup, translator):
    # extra whitespace is normalised away exactly as prepare_translation.py did
    raw_src = lines(setup["raw"] / "test.src")[:3]
    messy = ["  " + x.replace(" ", " \t ") + " " for x in raw_src]
    assert translator.translate(messy) == setup["hyps"][:3]
    assert translator.pipeline.encode_source(raw_src) == \
        lines(setup["data"] / "text" / "test.spm.src")[:3]


# ------------------------------------------------------------------ bad input

def test_empty_lines_give_empty_outputs_and_are_reported(setup, translator, caplog):
    raw_src = lines(setup["raw"] / "test.src")
    outputs, report = translator.translate_with_report([raw_src[0], "", "   ", raw_src[1]])
    assert outputs == [setup["hyps"][0], "", "", setup["hyps"][1]]
    assert report.empty == [1, 2] and report.translated == 2
    assert any("2 empty input(s) (lines 2, 3)" in m for m in report.messages())
    with caplog.at_level("WARNING"):
        assert translator.translate([""]) == [""]
    assert "1 empty input(s) (lines 1)" in caplog.text


def test_crlf_input_gives_the_same_lines_and_is_reported(setup, tmp_path, capsys):
    raw_src = lines(setup["raw"] / "test.src")[:5]
    crlf = "".join(x + "\r\n" for x in raw_src[:4]) + raw_src[4]  # last line without line end
    code, out = translate_main(setup, tmp_path, crlf.encode("utf-8"))
    assert code == 0 and out == setup["hyps"][:5]
    assert "4 of 5 input lines ended in \\r\\n (CRLF)" in capsys.readouterr().err


def test_hub_strips_line_ends_and_refuses_inner_line_breaks(setup, translator):
    raw_src = lines(setup["raw"] / "test.src")[:2]
    outputs, report = translator.translate_with_report([raw_src[0] + "\r\n", raw_src[1] + "\n"])
    assert outputs == setup["hyps"][:2] and report.stripped_line_ends == 2
    from ssan_plugin.hub import PipelineError

    with pytest.raises(PipelineError, match="sentence 2 contains a line break"):
        translator.translate([raw_src[0], raw_src[0] + "\n" + raw_src[1]])


@pytest.fixture(scope="module")
def too_long_input(setup, translator):
    raw_src = lines(setup["raw"] / "test.src")
    long_line = " ".join(raw_src * 40)
    n_tokens = len(translator.pipeline.encode_source([long_line])[0].split()) + 1
    assert n_tokens > translator.max_source_tokens == 1024
    return [raw_src[0], long_line, raw_src[1]], n_tokens


def test_too_long_line_refused_before_decoding(translator, too_long_input):
    from ssan_plugin.hub import PipelineError

    sentences, n_tokens = too_long_input
    with pytest.raises(PipelineError) as err:
        translator.translate(sentences)
    assert (f"1 input(s) longer than the model's 1024 source positions" in str(err.value)
            and f"line 2 ({n_tokens} tokens)" in str(err.value)
            and "--too-long truncate" in str(err.value))


def test_too_long_line_empty_or_truncated_keeps_every_line(setup, translator, too_long_input):
    sentences, n_tokens = too_long_input
    outputs, report = translator.translate_with_report(sentences, too_long="empty")
    assert outputs == [setup["hyps"][0], "", setup["hyps"][1]]
    assert report.too_long == [(1, n_tokens)] and report.translated == 2
    assert "source positions (lines 2): empty output" in " ".join(report.messages())
    outputs, report = translator.translate_with_report(sentences, too_long="truncate",
                                                       max_len_b=3)
    assert len(outputs) == 3 and outputs[1] != "" and report.translated == 3
    assert "truncated to its first 1023 pieces" in " ".join(report.messages())


def test_too_long_line_through_the_script(setup, too_long_input, tmp_path, capsys):
    sentences, n_tokens = too_long_input
    data = "".join(x + "\n" for x in sentences).encode("utf-8")
    code, out = translate_main(setup, tmp_path, data)
    err = capsys.readouterr().err
    assert code == 2 and out is None
    assert "translate.py: error: 1 input(s) longer than the model's 1024" in err
    code, out = translate_main(setup, tmp_path, data, "--too-long", "empty")
    assert code == 0 and out == [setup["hyps"][0], "", setup["hyps"][1]]
    assert "translate.py: 1 input(s) longer than" in capsys.readouterr().err


def test_missing_manifest_and_foreign_checkpoint_are_messages(setup, tmp_path, capsys):
    import shutil

    code, out = translate_main(setup, tmp_path, b"x\n", data_dir=tmp_path)
    assert code == 2 and out is None and "manifest.json not found" in capsys.readouterr().err
    other = tmp_path / "bin_small_dict"  # the same data-bin with a smaller dictionary
    shutil.copytree(setup["data"], other)
    for lang in ("src", "tgt"):
        dict_lines = lines(other / f"dict.{lang}.txt")[:-5]
        (other / f"dict.{lang}.txt").write_text("".join(x + "\n" for x in dict_lines))
    code, out = translate_main(setup, tmp_path, b"x\n", data_dir=other)
    assert code == 2 and out is None
    assert "was trained on another dictionary" in capsys.readouterr().err


# ------------------------------------------------------------------ checkpoint averaging

def test_average_is_the_mean_and_decodes(setup, tmp_path):
    avg = tmp_path / "avg.pt"
    assert AVERAGE.main(["--last", "2", str(setup["ck"]), "--output", str(avg)]) == 0
    inputs = sorted(setup["ck"].glob("checkpoint_*_*.pt"),
                    key=lambda p: int(p.stem.split("_")[-1]))[-2:]
    import ssan_plugin  # noqa: F401  (allow-list)

    states = [torch.load(p, map_location="cpu", weights_only=True)["model"] for p in inputs]
    averaged = torch.load(avg, map_location="cpu", weights_only=True)
    assert averaged["averaged_from"] == [str(p.resolve()) for p in inputs]
    model = averaged["model"]
    assert set(model) == set(states[0])
    differing = 0
    for key, value in model.items():
        expected = (states[0][key].double() + states[1][key].double()) / 2
        assert value.dtype == states[0][key].dtype
        torch.testing.assert_close(value.double(), expected, rtol=0, atol=1e-6)
        differing += not torch.equal(states[0][key], states[1][key])
    assert differing > 10  # the two checkpoints really differ: a real mean was taken
    # the same average from explicit --inputs
    avg2 = tmp_path / "avg2.pt"
    assert AVERAGE.main(["--inputs", *map(str, inputs), "--output", str(avg2)]) == 0
    again = torch.load(avg2, map_location="cpu", weights_only=True)["model"]
    assert all(torch.equal(again[k], model[k]) for k in model)
    # it decodes with fairseq-generate: every test sentence
    gen = run([Path(PY).parent / "fairseq-generate", setup["data"], "--user-dir",
               ROOT / "ssan_plugin", "--path", avg, "--gen-subset", "test", "--beam", 2,
               "--max-len-b", 5, "--required-batch-size-multiple", 1, "--cpu"])
    assert sorted(int(x.split("\t")[0][2:]) for x in gen.stdout.splitlines()
                  if x.startswith("H-")) == list(range(N_TEST))


def test_average_refuses_bad_inputs(setup, tmp_path, capsys):
    import pickle

    assert AVERAGE.main(["--last", "9", str(setup["ck"]), "--output", str(tmp_path / "a.pt")]) == 2
    assert "has 2 update checkpoint(s)" in capsys.readouterr().err
    evil = tmp_path / "evil.pt"

    class Evil:
        def __reduce__(self):
            import os
            return (os.system, (f"touch {tmp_path / 'pwned'}",))

    with open(evil, "wb") as f:
        pickle.dump({"model": Evil()}, f)
    assert AVERAGE.main(["--inputs", str(setup["checkpoint"]), str(evil),
                         "--output", str(tmp_path / "a.pt")]) == 2
    err = capsys.readouterr().err
    assert f"checkpoint {evil}: refused by torch's safe loader" in err and "Weights only load failed" in err
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "a.pt").exists()
