"""ssan_plugin/commands/ and the package root's registration: every command is installed as a
console script, answers --help, and the commands that only read and score files start without
importing fairseq or torch; registration happens when fairseq is imported (or on request)."""

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BIN, ROOT, cli_env

from ssan_plugin.commands import console_name, module_command, program_name

COMMANDS = sorted(p.stem for p in (ROOT / "ssan_plugin" / "commands").glob("*.py")
                  if p.stem != "__init__")

#: commands whose import (and whose work on text files) needs neither fairseq nor torch
LIGHT = ("analysis_report", "average_checkpoints", "evaluate_bleu", "evaluate_pairs",
         "evaluate_srl", "make_probing_data", "prepare_pairs", "prepare_translation",
         "run_experiments", "translate", "warm_start")


def console_scripts():
    """{name: "module:function"} of setup.py's console_scripts, read without running setup.py."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "entry_points":
            entries = ast.literal_eval(node.value)["console_scripts"]
            return dict(tuple(part.strip() for part in e.split("=")) for e in entries)
    raise AssertionError("setup.py declares no entry_points")


def run_python(code):
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=cli_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_command_is_a_console_script_and_nothing_else_is():
    assert console_scripts() == {console_name(c): f"ssan_plugin.commands.{c}:main"
                                 for c in COMMANDS}
    assert console_name("ssan_plugin.commands.evaluate_bleu") == "ssan-evaluate-bleu"
    assert module_command("translate") == ["-m", "ssan_plugin.commands.translate"]


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_answers_help(name, capsys):
    module = importlib.import_module(f"ssan_plugin.commands.{name}")
    with pytest.raises(SystemExit) as info:
        module.main(["--help"])
    assert info.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_light_commands_import_neither_fairseq_nor_torch():
    code = ("import json, sys\n"
            + "".join(f"import ssan_plugin.commands.{name}\n" for name in LIGHT)
            + "print(json.dumps(sorted(m for m in ('fairseq', 'torch') if m in sys.modules)))")
    assert run_python(code) == []


def test_installed_command_scores_two_hypothesis_files_without_fairseq(tmp_path):
    ref = tmp_path / "ref.de"
    ref.write_text("ein Haus .\nzwei Katzen schlafen .\n", encoding="utf-8")
    (tmp_path / "a.de").write_text("ein Haus .\nzwei Katzen schlafen .\n", encoding="utf-8")
    (tmp_path / "b.de").write_text("ein Hund .\nzwei Katzen .\n", encoding="utf-8")
    proc = subprocess.run([str(BIN / "ssan-evaluate-bleu"), "--ref", ref, "--hyp",
                           f"a={tmp_path / 'a.de'}", "--hyp", f"b={tmp_path / 'b.de'}",
                           "--json", tmp_path / "out.json"],
                          capture_output=True, text=True, env=cli_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    a, b = json.loads((tmp_path / "out.json").read_text())["systems"]
    assert (a["name"], b["name"]) == ("a", "b")
    assert a["bleu"] == pytest.approx(100.0) and b["bleu"] < 100.0
    assert "p_value" in b


def test_installed_command_names_itself_as_started(monkeypatch):
    """The console script's messages start with its own name, not its module's file name;
    ``python -m`` gives the module's file name, and so does a main called in-process by
    another program."""
    script = Path(sys.executable).parent / "ssan-evaluate-bleu"
    proc = subprocess.run([str(script), "--ref", "ref.de", "--beam", "0"], capture_output=True,
                          text=True, env=cli_env(), timeout=300)
    assert proc.returncode == 2
    assert proc.stderr == ("ssan-evaluate-bleu: error: argument --beam: must be an integer "
                           ">= 1, got '0' (see --help)\n")
    command = ROOT / "ssan_plugin" / "commands" / "evaluate_bleu.py"
    for argv0, name in ((script, "ssan-evaluate-bleu"), (command, "evaluate_bleu.py"),
                        ("pytest", "evaluate_bleu.py"), ("", "evaluate_bleu.py")):
        monkeypatch.setattr(sys, "argv", [str(argv0)])
        assert program_name(str(command)) == name


def test_every_command_prog_names_its_own_module(monkeypatch):
    """Each command's module-level ``prog`` (commands.command_prog) is asked at call time and
    names that command: no command took another's file, none froze the name at import."""
    assert len(COMMANDS) == 17
    for stem in COMMANDS:
        module = importlib.import_module(f"ssan_plugin.commands.{stem}")
        monkeypatch.setattr(sys, "argv", ["pytest"])
        assert module.prog() == f"{stem}.py"
        monkeypatch.setattr(sys, "argv", [f"/some/bin/{console_name(stem)}"])
        assert module.prog() == console_name(stem)


def test_plugin_registers_when_fairseq_is_imported_after_it():
    code = """
import json, sys
import ssan_plugin
before = 'fairseq' in sys.modules
import fairseq
from fairseq.criterions import CRITERION_REGISTRY
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.tasks import TASK_REGISTRY
import torch
print(json.dumps([before, 'ssan_transformer' in ARCH_MODEL_REGISTRY, 'srl' in TASK_REGISTRY,
                  'sentence_pair' in TASK_REGISTRY,
                  'selective_label_smoothed_cross_entropy' in CRITERION_REGISTRY,
                  any('Namespace' in str(g) for g in torch.serialization.get_safe_globals())]))
"""
    assert run_python(code) == [False, True, True, True, True, True]


def test_register_completes_what_a_half_imported_module_left_out():
    """A plugin module that imports fairseq while it is itself being imported cannot trigger
    the registration (it would import that module again, half made); register() finishes it."""
    code = """
import json
import ssan_plugin.modules.selective_weights
import ssan_plugin
ssan_plugin.register()
ssan_plugin.register()  # idempotent
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.tasks import TASK_REGISTRY
print(json.dumps(['ssan_transformer' in ARCH_MODEL_REGISTRY, 'srl' in TASK_REGISTRY]))
"""
    assert run_python(code) == [True, True]
