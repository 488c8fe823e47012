"""ssan_plugin/cli/: argument types, file checks, the step wrapper, script_main."""

import argparse
import sys

import pytest

from ssan_plugin import errors
from ssan_plugin.cli import arguments, checkpoints, files, steps


def test_number_types_refuse_out_of_range_and_name_the_range():
    assert arguments.positive_int("3") == 3
    for bad in ("0", "-1", "1.5", "x"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"must be an integer >= 1, got"):
            arguments.positive_int(bad)
    cov = arguments.float_arg(0.98, 1.0)
    assert cov("0.99") == 0.99
    with pytest.raises(argparse.ArgumentTypeError, match=r"in \[0.98, 1\], got '2.0'"):
        cov("2.0")
    with pytest.raises(argparse.ArgumentTypeError, match="finite"):
        arguments.finite_float("inf")
    rate = arguments.float_arg(0.0, 1.0, hi_open=True)
    with pytest.raises(argparse.ArgumentTypeError, match=r"in \[0, 1\)"):
        rate("1")


def test_named_path_splits_at_the_first_equals_and_refuses_the_rest():
    parse = arguments.named_path("FILE")
    assert parse("ssan@2=runs/a=b.de") == ("ssan@2", "runs/a=b.de")
    for bad in ("runs/a.de", "=runs/a.de", "ssan=", "="):
        with pytest.raises(argparse.ArgumentTypeError, match=f"expected NAME=FILE, got '{bad}'"):
            parse(bad)
    # with a default name, a bare path is named by it; an empty name or path is still refused
    named = arguments.named_path("CKPT", default_name=lambda path: path.split("/")[0])
    assert named("ssan/best.pt") == ("ssan", "ssan/best.pt")
    assert named("x=ssan/best.pt") == ("x", "ssan/best.pt")
    with pytest.raises(argparse.ArgumentTypeError, match="expected NAME=CKPT or CKPT, got '=a'"):
        named("=a")


def test_parser_error_is_one_line_exit_2(capsys):
    ap = arguments.ArgumentParser(prog="x.py")
    ap.add_argument("--beam", type=arguments.positive_int, default=5)
    with pytest.raises(SystemExit) as info:
        ap.parse_args(["--beam", "0"])
    assert info.value.code == 2
    assert capsys.readouterr().err == ("x.py: error: argument --beam: must be an integer >= 1, "
                                       "got '0' (see --help)\n")


def test_input_checks(tmp_path):
    with pytest.raises(errors.InputError, match="no such file"):
        files.check_input_file(tmp_path / "none")
    with pytest.raises(errors.InputError, match="is a directory"):
        files.check_input_file(tmp_path, "--ref")
    (tmp_path / "e").write_bytes(b"")
    assert files.check_input_file(tmp_path / "e") == tmp_path / "e"
    with pytest.raises(errors.InputError, match="is empty"):
        files.check_input_file(tmp_path / "e", nonempty=True)
    (tmp_path / "bom").write_bytes("\ufeffa\nb\n".encode())
    assert files.read_text(tmp_path / "bom") == "a\nb\n"
    (tmp_path / "bad").write_bytes(b"ok\nd\xe4\n")
    with pytest.raises(errors.InputError, match=r"bad: line 2 is not valid UTF-8 \(bytes b'\\xe4' "
                                             r"at byte offset 4\)"):
        files.read_text(tmp_path / "bad")


def test_output_checks(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(errors.InputError, match="exists and is not a directory"):
        files.check_output_dir(tmp_path / "f", "--dest")
    with pytest.raises(errors.InputError, match="is a directory"):
        files.check_output_file(tmp_path, "--json")
    with pytest.raises(errors.InputError, match=f"{tmp_path / 'f'} is not a directory"):
        files.check_output_file(tmp_path / "f" / "r.json", "--json")
    assert files.check_output_file(tmp_path / "new" / "deeper" / "r.json")


def test_run_step_one_line_and_full_log(tmp_path):
    log = tmp_path / "logs" / "step.log"
    code = "import sys; print('first'); print('the reason', file=sys.stderr); sys.exit(3)"
    with pytest.raises(errors.StepError) as info:
        steps.run_step("fairseq-preprocess", [sys.executable, "-c", code], log)
    assert str(info.value) == f"fairseq-preprocess failed (exit 3): the reason; full log: {log}"
    assert log.read_text().split() == ["first", "the", "reason"]
    assert steps.run_step("ok", [sys.executable, "-c", "print('hi')"], log) == "hi\n"


def test_library_step_and_script_main(tmp_path, capsys):
    @arguments.script_main(prog="s.py")
    def main(fail):
        with steps.library_step("sentencepiece training", tmp_path / "spm.log"):
            if fail == "library":
                raise RuntimeError("INTERNAL: bad\nmore")
            if fail == "input":
                raise errors.InputError("--x: bad\n  value")
        return 0

    assert main("library") == 1
    assert capsys.readouterr().err == ("s.py: error: sentencepiece training failed: RuntimeError: "
                                       f"INTERNAL: bad; full log: {tmp_path / 'spm.log'}\n")
    assert "Traceback" in (tmp_path / "spm.log").read_text()
    assert main("input") == 2
    assert capsys.readouterr().err == "s.py: error: --x: bad value\n"
    assert main("none") == 0


def test_load_checkpoint_names_file_and_reason(tmp_path):
    import os

    import torch

    good = tmp_path / "ok.pt"
    torch.save({"model": {"w": torch.zeros(50)},
                "cfg": {"task": {"_name": "translation"}, "model": {"_name": "transformer"}}}, good)
    assert set(checkpoints.load_checkpoint(good, expect_task="translation")["model"]) == {"w"}
    with pytest.raises(errors.InputError, match=r"expected a checkpoint of task 'srl', arch "
                                             r"'srl_tagger\*', found task 'translation', arch "
                                             r"'transformer'"):
        checkpoints.load_checkpoint(good, expect_task="srl", expect_arch="srl_tagger*")
    (tmp_path / "cut.pt").write_bytes(good.read_bytes()[:300])
    with pytest.raises(errors.InputError, match=r"cut.pt is truncated or not a torch checkpoint"):
        checkpoints.load_checkpoint(tmp_path / "cut.pt")

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'pwned'}",))

    torch.save({"model": Evil()}, tmp_path / "evil.pt")
    with pytest.raises(errors.InputError, match=r"evil.pt: refused by torch's safe loader .*"
                                             r"unsupported GLOBAL posix.system"):
        checkpoints.load_checkpoint(tmp_path / "evil.pt")
    assert not (tmp_path / "pwned").exists()


def test_importing_the_plugin_leaves_no_debug_logging():
    """fairseq's frm_text_to_speech sets the root logger to DEBUG at import; a script that has
    not configured logging yet must not print other libraries' DEBUG lines because of it. The
    plugin registers when fairseq is imported, after it here."""
    import subprocess

    code = ("import logging, ssan_plugin, fairseq; import matplotlib; matplotlib.use('Agg'); "
            "import matplotlib.pyplot as plt; plt.figure(); plt.text(0, 0, 'x'); "
            "plt.savefig('/dev/null', format='png'); logging.getLogger('probe').info('kept'); "
            "print(logging.getLogger().level)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "20"
    assert "DEBUG" not in proc.stderr
    assert "INFO:probe:kept" in proc.stderr


def test_script_logging_follows_the_current_stderr():
    """setup_logging under one redirected stderr, then a record under another: it goes to the
    stderr of the moment (no "--- Logging error ---" from a closed stream)."""
    import io
    import logging
    import sys

    from ssan_plugin.cli.arguments import setup_logging

    first = io.StringIO()
    saved = sys.stderr
    try:
        sys.stderr = first
        setup_logging()
        first.close()
        sys.stderr = second = io.StringIO()
        logging.getLogger("ssan_plugin.test").info("hello")
        assert second.getvalue().rstrip().endswith("hello")
    finally:
        sys.stderr = saved  # the handler set up above follows it back


def test_embedding_mismatch_counts_rows_against_dictionary_entries(tmp_path):
    import torch

    d = tmp_path / "dict.txt"
    d.write_text("a 5\nb 3\nc 1\n")  # 3 words + 4 special symbols
    state = {"model": {"enc.weight": torch.zeros(7, 2), "big.weight": torch.zeros(9, 2)}}
    assert checkpoints.embedding_mismatch(state, "enc.weight", d) is None
    assert checkpoints.embedding_mismatch(state, "big.weight", d) == (9, 7)
    assert checkpoints.embedding_mismatch(state, "absent.weight", d) is None
    assert checkpoints.embedding_mismatch(state, "big.weight", tmp_path / "none.txt") is None
    (tmp_path / "bad.txt").write_text("no-count-here\n")
    with pytest.raises(errors.InputError, match=r"bad.txt: not a fairseq dictionary"):
        checkpoints.embedding_mismatch(state, "big.weight", tmp_path / "bad.txt")


def test_cfg_get_reads_dicts_namespaces_and_nothing():
    import argparse

    assert checkpoints.cfg_get({"a": 1}, "a") == 1
    assert checkpoints.cfg_get(argparse.Namespace(a=2), "a") == 2
    assert checkpoints.cfg_get(argparse.Namespace(), "a") is None
    assert checkpoints.cfg_get(None, "a") is None
