"""`gpuscale completion bash|zsh`: the script completes the commands, each command's flags and the values an
enum flag allows, read from the binary itself, in a real bash."""
import shutil
import subprocess

import pytest

import helpers


def complete(words):
    """COMPREPLY for the words typed so far (the last one is being completed)."""
    script = subprocess.run([helpers.binary(), "completion", "bash"], capture_output=True, text=True,
                            timeout=30, check=True).stdout
    arr = " ".join("'%s'" % w for w in [helpers.binary()] + words)
    prog = script + "\nCOMP_WORDS=(%s); COMP_CWORD=%d; _gpuscale; printf '%%s\\n' \"${COMPREPLY[@]}\"\n" % (
        arr, len(words))
    p = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return [ln for ln in p.stdout.splitlines() if ln]


@pytest.mark.skipif(not shutil.which("bash"), reason="no bash")
def test_bash_completes_commands_flags_and_values():
    assert complete(["li"]) == ["lint"]
    assert set(complete([""])) >= {"agent", "gateway", "query", "lint", "rightsize", "simulate",
                                   "completion"}
    assert "--format" in complete(["query", "--fo"])
    assert set(complete(["agent", "--coll"])) == {"--collector", "--collectors"}
    assert complete(["query", "--format", ""]) == ["text", "json"]
    assert complete(["query", "-o", "j"]) == ["json"]
    assert complete(["agent", "--collector", ""]) == ["nvml", "rocm", "auto", "mock"]
    assert complete(["completion", ""]) == ["bash", "zsh"]


def test_zsh_script_uses_bashcompinit_and_usage_errors():
    p = subprocess.run([helpers.binary(), "completion", "zsh"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0
    assert p.stdout.startswith("#compdef gpuscale\n")
    assert "bashcompinit" in p.stdout and "complete -o filenames -F _gpuscale gpuscale" in p.stdout
    for args in ([], ["fish"], ["bash", "zsh"]):
        p = subprocess.run([helpers.binary(), "completion"] + args, capture_output=True, text=True,
                           timeout=30)
        assert p.returncode == 2 and "bash or zsh" in p.stderr, (args, p.stderr)
