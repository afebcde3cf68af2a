"""The error contract: a user's error (NcipError) is one line and exit code 2; anything else is a
bug and keeps its traceback, in the stages and in the CLI alike."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ncip.core.errors import InputError, MissingEntryError, NcipError, user_errors
from ncip.study.stage import stage_main

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("wrap", [user_errors, stage_main])
def test_a_user_error_is_one_line_and_exit_2(wrap, capsys):
    @wrap
    def cmd():
        raise InputError("k must be positive; pass --k 30")

    with pytest.raises(SystemExit) as e:
        cmd()
    assert e.value.code == 2
    assert capsys.readouterr().err.strip() == "error: k must be positive; pass --k 30"


@pytest.mark.parametrize("wrap", [user_errors, stage_main])
@pytest.mark.parametrize("bug", [ValueError, KeyError, FileNotFoundError, TypeError])
def test_a_bug_keeps_its_traceback(wrap, bug):
    @wrap
    def cmd():
        raise bug("a programming error")

    with pytest.raises(bug):
        cmd()


def test_lookups_print_their_message_unquoted(capsys):
    @user_errors
    def cmd():
        raise MissingEntryError("no split 'adv'; run generate-adversarial")

    with pytest.raises(SystemExit):
        cmd()
    assert capsys.readouterr().err.strip() == "error: no split 'adv'; run generate-adversarial"


def test_every_error_class_a_user_can_cause_is_an_ncip_error():
    from ncip.core.checkpoints import CheckpointError
    from ncip.core.factory import ModelSourceError
    from ncip.study.data import DataFormatError, DatasetNotFoundError
    from ncip.study.external import ExternalError
    from ncip.study.launch import LaunchError
    from ncip.study.stage import StageError
    from ncip.study.training import TrainingDiverged
    from ncip.tool.inputs import InputError as ToolInputError
    from ncip.tool.prune import PruneError

    for cls in (
        CheckpointError,
        ModelSourceError,
        DataFormatError,
        DatasetNotFoundError,
        ExternalError,
        LaunchError,
        StageError,
        TrainingDiverged,
        ToolInputError,
        PruneError,
    ):
        assert issubclass(cls, NcipError), cls


def _run(args, cwd):
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_a_stage_with_bad_input_says_one_line(tmp_path):
    r = _run(
        [
            str(ROOT / "stages" / "select_checkpoints.py"),
            "--checkpoints",
            "nowhere",
            "--out",
            "s.json",
            "--plot-out",
            "s.csv",
        ],
        tmp_path,
    )
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1].startswith("error: checkpoint directory nowhere")
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "s.json").exists()


def test_a_stage_with_a_bug_shows_its_traceback(tmp_path):
    """A bug inside a stage (here: a library function given a wrong type by code, not by the
    user) is not dressed up as bad input."""
    code = (
        "import sys; sys.argv = ['x']\n"
        "from ncip.study.stage import stage_main\n"
        "@stage_main\n"
        "def main():\n"
        "    {}['missing']\n"
        "main()\n"
    )
    r = _run(["-c", code], tmp_path)
    assert r.returncode == 1
    assert "Traceback" in r.stderr and "KeyError: 'missing'" in r.stderr


def test_a_library_error_is_cut_to_its_first_sentence_for_one_line():
    """ncip.tool.messages.reason: what a wrapped exception contributes to a one-line error is
    its first sentence (torch's zip reader appends a paragraph), cut at a word within the limit,
    and the type's name, or what the caller gives, where the exception says nothing."""
    from ncip.tool.messages import reason

    torch_says = RuntimeError(
        "PytorchStreamReader failed reading zip archive: failed finding central directory. "
        "This is an internal miniz error. If you are seeing this error, there is a high chance"
    )
    assert reason(torch_says) == (
        "PytorchStreamReader failed reading zip archive: failed finding central directory."
    )
    long = reason(ValueError("word " * 60), limit=40)
    assert len(long) <= 40 and long.endswith("word...")
    assert reason(ValueError("first line\nsecond line")) == "first line"
    assert reason(KeyError()) == "KeyError"
    assert reason(OSError(""), empty="a panic") == "a panic"


def test_a_truncated_checkpoint_says_so_in_one_sentence(tmp_path):
    import torch

    from ncip.tool.formats import CheckpointError
    from ncip.tool.unpickle import torch_load

    torch.save({"w": torch.zeros(3)}, tmp_path / "a.pt")
    (tmp_path / "b.pt").write_bytes((tmp_path / "a.pt").read_bytes()[:200])
    with pytest.raises(CheckpointError) as e:
        torch_load(tmp_path / "b.pt")
    msg = str(e.value)
    assert "is not a readable PyTorch checkpoint" in msg and "write it again" in msg
    assert "If you are seeing this error" not in msg
