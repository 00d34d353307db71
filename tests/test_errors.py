import sys

import pytest
import torch

import colab_gpu as cg
from colab_gpu.errors.showing import raising_line


def failing_step():
    return torch.nn.Linear(4, 2)(torch.randn(3, 4, device="meta"))  # the learner's line


def test_expected_error_is_shown_with_the_learners_line_and_the_fix(capsys, monkeypatch):
    for name in ("last_type", "last_value", "last_traceback"):
        monkeypatch.setattr(sys, name, None, raising=False)
    with cg.shows_error(RuntimeError, match="device", fix="move the batch to the model's device") as shown:
        failing_step()
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("RuntimeError: ") and "device" in out[0]
    learner_line = 'return torch.nn.Linear(4, 2)(torch.randn(3, 4, device="meta"))  # the learner\'s line'
    assert out[1] == f"    raised by: {learner_line}"
    assert out[2] == "Fix: move the batch to the model's device"
    assert out[-1] == "(an expected error: the notebook goes on)"
    assert isinstance(shown.error, RuntimeError)
    assert sys.last_value is shown.error and sys.last_traceback is shown.error.__traceback__  # as if uncaught


def test_no_error_where_one_is_expected_fails_the_cell():
    with pytest.raises(AssertionError, match="ran without error"):
        with cg.shows_error(RuntimeError, match="device"):
            torch.ones(2)


def test_a_different_message_fails_the_cell():
    with pytest.raises(AssertionError, match="expected RuntimeError matching 'out of memory', got RuntimeError"):
        with cg.shows_error(RuntimeError, match="out of memory"):
            raise RuntimeError("something else")


def test_an_unexpected_error_type_passes_through_untouched():
    with pytest.raises(KeyError):
        with cg.shows_error(RuntimeError):
            raise KeyError("k")


def test_an_error_this_runtime_does_not_raise_must_not_happen(capsys):
    with cg.shows_error(RuntimeError, match="CUDA", raises=False) as shown:
        torch.ones(2)
    assert shown.error is None and "No RuntimeError on this runtime" in capsys.readouterr().out
    with pytest.raises(RuntimeError, match="boom"):  # raised anyway: the lesson is wrong here, the cell fails
        with cg.shows_error(RuntimeError, raises=False):
            raise RuntimeError("boom")


def test_several_expected_types_and_long_messages_are_cut(capsys):
    with cg.shows_error((KeyError, ValueError)):
        raise ValueError("\n".join(f"line {i}" for i in range(20)))
    out = capsys.readouterr().out
    assert "line 5" in out and "line 6" not in out and "..." in out


def test_raising_line_skips_library_frames():
    try:
        failing_step()
    except RuntimeError as err:
        assert raising_line(err.__traceback__).startswith("return torch.nn.Linear(4, 2)")
    assert raising_line(None) is None


def test_quiet_children_summarises_what_child_processes_printed(capsys):
    import subprocess

    with cg.shows_error(subprocess.CalledProcessError, quiet_children=True):
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; print('noise'); print('ChildError: it broke', file=sys.stderr); sys.exit('a last line')",
            ],
            check=True,
        )
    out = capsys.readouterr().out
    assert "noise" not in out.splitlines()  # the child's own line is not shown...
    assert "printed 3 lines; the error: ChildError: it broke" in out  # ...only summarised
    print("after")  # output flows normally again
    assert capsys.readouterr().out == "after\n"


def test_quiet_children_captures_torch_log_lines_written_to_the_notebook_stream(monkeypatch, capsys):
    import logging

    import torch.multiprocessing as mp

    # torch 2.11's "torch" logger writes to the sys.stderr of its import, in a notebook the kernel's stream: no
    # file-descriptor redirect reaches it. mp.spawn logs through it when it ends the children still running.
    monkeypatch.setattr(logging.getLogger("torch"), "handlers", [logging.StreamHandler(sys.stderr)])
    with cg.shows_error(mp.ProcessExitedException, quiet_children=True):
        logging.getLogger("torch.multiprocessing.spawn").warning("Terminating process 3735 via signal SIGTERM")
        raise mp.ProcessExitedException("process 0 terminated with exit code 1", 0, 1, 1)
    out, err = capsys.readouterr()
    assert err == "" and not any(line.startswith("Terminating") for line in out.splitlines())  # summarised only
    assert "printed 1 lines; the last: Terminating process 3735 via signal SIGTERM" in out
    logging.getLogger("torch.multiprocessing.spawn").warning("after the block")  # the handler's stream is back
    assert capsys.readouterr().err == "after the block\n"


def test_quiet_children_gives_the_output_back_when_the_block_fails_otherwise(capsys):
    import subprocess

    with pytest.raises(AssertionError, match="ran without error"):
        with cg.shows_error(RuntimeError, quiet_children=True):
            subprocess.run([sys.executable, "-c", "print('child says why')"], check=True)
    assert "child says why" in capsys.readouterr().err
    with pytest.raises(KeyError):
        with cg.shows_error(RuntimeError, quiet_children=True):
            subprocess.run([sys.executable, "-c", "print('context of the real error')"], check=True)
            raise KeyError("k")
    assert "context of the real error" in capsys.readouterr().err
