"""ssan_plugin/cli/files.py guard_outputs (and remove_own_files): every way an output could lose
data is one InputError line naming the option and the path, found before anything is written;
ssan_plugin/cli/arguments.py check_decoding_limits."""

import os

import pytest
from helpers.tree_snapshot import snapshot

from ssan_plugin.cli.arguments import ArgumentParser, check_decoding_limits
from ssan_plugin.errors import InputError
from ssan_plugin.cli.files import (
    Input,
    Output,
    guard_outputs,
    output_dir,
    output_file,
    remove_own_files,
)


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "in.txt").write_text("input\n")
    (tmp_path / "out.txt").write_text("an earlier output\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "manifest.json").write_text("{}\n")
    (data / "test.props").write_text("gold\n")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x\n")
    (tmp_path / "empty").mkdir()
    return tmp_path


def refused(tree, outputs, inputs=(), overwrite=False, **kwargs):
    """The message of the refusal, asserting nothing under ``tree`` changed."""
    before = snapshot(tree)
    with pytest.raises(InputError) as info:
        guard_outputs(outputs, inputs, overwrite, **kwargs)
    assert snapshot(tree) == before
    message = str(info.value)
    assert "\n" not in message
    return message


# ---------------------------------------------------------------- an output that is an input

def test_output_equal_to_an_input_is_refused_even_with_overwrite(tree):
    for overwrite in (False, True):
        message = refused(tree, [output_file("--output", tree / "in.txt")],
                          [Input("--input", tree / "in.txt")], overwrite)
        assert message == (f"--output {tree / 'in.txt'} is the input --input {tree / 'in.txt'}; "
                           f"an output never replaces an input: choose another path")


def test_the_same_file_through_a_link_is_refused(tree):
    (tree / "soft.txt").symlink_to(tree / "in.txt")
    os.link(tree / "in.txt", tree / "hard.txt")
    for name in ("soft.txt", "hard.txt"):
        message = refused(tree, [output_file("--json", tree / name)],
                          [Input("--ref", tree / "in.txt")], overwrite=True)
        assert message.startswith(f"--json {tree / name} is the input --ref {tree / 'in.txt'} "
                                  f"(the same file, after resolving links)")
    # the path spelled another way is the same path
    message = refused(tree, [output_file("--json", tree / "data" / ".." / "in.txt")],
                      [Input("--ref", tree / "in.txt")], overwrite=True)
    assert "is the input --ref" in message


def test_a_file_of_an_input_folder_is_never_replaced(tree):
    message = refused(tree, [output_file("--pred-props", tree / "data" / "test.props")],
                      [Input("--data", tree / "data")], overwrite=True)
    assert message == (f"--pred-props {tree / 'data' / 'test.props'} would replace a file of "
                       f"the input --data {tree / 'data'}; choose a path outside it")
    # a new file in it is no loss
    assert guard_outputs([output_file("--json", tree / "data" / "new.json")],
                         [Input("--data", tree / "data")])


def test_named_inputs_are_labelled_as_given(tree):
    message = refused(tree, [output_file("--json", tree / "in.txt")],
                      [Input("--hyp", tree / "in.txt", f"--hyp base={tree / 'in.txt'}")],
                      overwrite=True)
    assert f"is the input --hyp base={tree / 'in.txt'};" in message


def test_missing_inputs_are_left_to_the_command(tree):
    assert guard_outputs([output_file("--json", tree / "r.json")],
                         [Input("--data", tree / "nowhere"), Input("--ref", None)])


# ---------------------------------------------------------------- folders holding inputs

def test_an_output_folder_holding_an_input_it_would_replace(tree):
    (tree / "full" / "sent1.json").write_text("{}\n")
    writes = {"sent1.json", "sent2.json"}
    message = refused(tree, [output_dir("--out", tree / "full", writes=writes)],
                      [Input("--input", tree / "full" / "sent1.json")], overwrite=True)
    assert message == (f"--out {tree / 'full'} holds the input --input "
                       f"{tree / 'full' / 'sent1.json'}, which this command would replace; "
                       f"choose another folder")
    # an input it does not write is no loss
    assert guard_outputs([output_dir("--out", tree / "full", writes=writes)],
                         [Input("--input", tree / "full" / "x")], overwrite=True)
    # unknown writes: any input inside is refused
    assert "holds the input" in refused(tree, [output_dir("--out", tree / "full")],
                                        [Input("--input", tree / "full" / "x")], overwrite=True)


def test_an_output_folder_overlapping_an_input_folder(tree):
    data = tree / "data"
    assert refused(tree, [output_dir("--dest", data)], [Input("--data", data)],
                   overwrite=True) == (f"--dest {data} is the input --data {data}; choose "
                                       f"another folder")
    assert refused(tree, [output_dir("--dest", tree)], [Input("--data", data)],
                   overwrite=True).endswith(f"holds the input --data {data}; choose another folder")
    # writes named: only a file the command writes there is a loss
    message = refused(tree, [output_dir("--dest", data, writes={"manifest.json"})],
                      [Input("--translation-data", data)], overwrite=True)
    assert message == (f"--dest {data} would replace {data / 'manifest.json'}, a file of the "
                       f"input --translation-data {data}; choose another folder")
    assert guard_outputs([output_dir("--hyp-dir", data, adds=True, writes=lambda r: r == "h.de")],
                         [Input("--data", data)])
    message = refused(tree, [output_dir("--hyp-dir", tree, adds=True,
                                        writes=lambda r: r == "data/test.props")],
                      [Input("--data", data)])
    assert f"would replace {data / 'test.props'}, a file of the input --data" in message


# ---------------------------------------------------------------- existing outputs, --overwrite

def test_an_existing_output_needs_overwrite(tree):
    message = refused(tree, [output_file("--json", tree / "out.txt")])
    assert message == (f"--json {tree / 'out.txt'} exists; pass --overwrite to replace it, or "
                       f"choose another path")
    assert guard_outputs([output_file("--json", tree / "out.txt")], overwrite=True)
    message = refused(tree, [output_file("--md", tree / "out.txt")], overwrite_option="--force")
    assert "pass --force to replace it" in message


def test_a_non_empty_folder_needs_overwrite_unless_it_is_added_to(tree):
    message = refused(tree, [output_dir("--dest", tree / "full")])
    assert message == (f"--dest {tree / 'full'} is not empty; pass --overwrite to replace what "
                       f"this command writes there, or choose a new folder")
    assert guard_outputs([output_dir("--dest", tree / "full")], overwrite=True)
    assert guard_outputs([output_dir("--hyp-dir", tree / "full", adds=True)])
    assert guard_outputs([output_dir("--dest", tree / "empty")])


# ---------------------------------------------------------------- kinds, paths, parents

def test_folder_and_file_mix_ups(tree):
    assert refused(tree, [output_file("--json", tree / "full")], overwrite=True) == \
        f"--json {tree / 'full'} is a directory; a file name is expected here"
    assert refused(tree, [output_dir("--out", tree / "out.txt")], overwrite=True) == \
        f"--out {tree / 'out.txt'} exists and is not a directory"
    assert refused(tree, [output_file("--json", tree / "out.txt" / "r.json")]) == \
        f"--json {tree / 'out.txt' / 'r.json'}: {tree / 'out.txt'} is not a directory"


def test_two_outputs_on_one_path(tree):
    message = refused(tree, [output_file("--gold-props", tree / "p.props"),
                             output_file("--pred-props", tree / "." / "p.props")])
    assert message == (f"--gold-props {tree / 'p.props'} and --pred-props "
                       f"{tree / '.' / 'p.props'} are the same path; give each output its own")


def test_missing_parents_are_created_only_when_every_check_passed(tree):
    deep = tree / "new" / "deeper" / "r.json"
    refused(tree, [output_file("--json", deep), output_file("--md", tree / "out.txt")])
    assert not (tree / "new").exists()
    assert guard_outputs([output_file("--json", deep)]) == [deep]
    assert deep.parent.is_dir() and not deep.exists()
    folder = tree / "made" / "dest"
    guard_outputs([output_dir("--dest", folder)])
    assert folder.parent.is_dir() and not folder.exists()  # the command makes its own folder
    other = tree / "later" / "r.json"
    guard_outputs([output_file("--json", other)], create_parents=False)
    assert not other.parent.exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_parent_is_refused(tree):
    locked = tree / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert refused(tree, [output_file("--json", locked / "a" / "r.json")]) == \
            f"--json {locked / 'a' / 'r.json'}: directory {locked} is not writable"
    finally:
        locked.chmod(0o700)


def test_none_outputs_and_inputs_are_skipped(tree):
    assert guard_outputs([None, output_file("--json", tree / "r.json")], [None]) == \
        [tree / "r.json"]


def test_writes_forms(tmp_path):
    assert Output("--d", tmp_path, "dir").replaces("anything")
    assert Output("--d", tmp_path, "dir", writes={"text/a"}).replaces("text/a")
    assert not Output("--d", tmp_path, "dir", writes=["text/a"]).replaces("b")
    assert Output("--d", tmp_path, "dir", writes=lambda r: r.endswith(".json")).replaces("x.json")
    with pytest.raises(ValueError):
        Output("--d", tmp_path, "link")


# ---------------------------------------------------------------- remove_own_files

def test_remove_own_files_removes_those_and_nothing_else(tmp_path):
    (tmp_path / "text").mkdir()
    for name in ("text/a", "text/b", "dict.en.txt", "mine.txt", "text/keep"):
        (tmp_path / name).write_text("x")
    (tmp_path / "only").mkdir()
    (tmp_path / "only" / "f").write_text("x")
    removed = remove_own_files(tmp_path, ["text/a", "text/b", "dict.en.txt", "only/f", "gone"])
    assert sorted(p.relative_to(tmp_path).as_posix() for p in removed) == \
        ["dict.en.txt", "only/f", "text/a", "text/b"]
    assert (tmp_path / "mine.txt").is_file() and (tmp_path / "text" / "keep").is_file()
    assert not (tmp_path / "only").exists()  # left empty: removed; text/ still holds a file
    for bad in ("../x", "/etc/passwd", "text/../../x"):
        with pytest.raises(InputError, match="not a path inside the folder"):
            remove_own_files(tmp_path, [bad])


# ---------------------------------------------------------------- decoding limits

@pytest.mark.parametrize("a,b,ok", [(0.0, 0, False), (0.5, 0, False), (0.0, 1, True),
                                    (1.0, 0, True), (1.2, 0, True), (0.0, 200, True)])
def test_decoding_limits_fairseq_asserts_on(a, b, ok, capsys):
    parser = ArgumentParser(prog="translate.py")
    if ok:
        check_decoding_limits(parser, a, b)
        return
    with pytest.raises(SystemExit) as info:
        check_decoding_limits(parser, a, b)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        "translate.py: error: argument --max-len-b: must be >= 1 when --max-len-a is below 1")
