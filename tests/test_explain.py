"""The error atlas and its recogniser (lesson 09): every heading recognised, unrelated errors left alone."""

import re
from pathlib import Path

import pytest
import torch
from torch import nn

import colab_gpu as cg
from colab_gpu.errors.atlas import ENTRIES, GROUPS
from colab_gpu.errors.explain import find_entry

LESSON_09 = Path(__file__).resolve().parents[1] / "notebooks" / "09_troubleshooting.py"


def test_the_atlas_covers_at_least_25_errors_in_every_group():
    assert len(ENTRIES) >= 25 and len({e.key for e in ENTRIES}) == len(ENTRIES)
    assert {e.group for e in ENTRIES} == set(GROUPS)
    assert all(e.cause and e.fix and re.search(r"lesson \d\d", e.read) for e in ENTRIES)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.key)
def test_every_message_is_recognised_as_its_own_entry(entry):
    assert find_entry(entry.message) is entry
    assert find_entry(f"RuntimeError: {entry.message}") is entry  # as an exception prints it


@pytest.mark.parametrize(
    "error",
    [
        ValueError("invalid literal for int() with base 10: 'abc'"),
        KeyError("label"),
        ZeroDivisionError("division"),
        RuntimeError("The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 0"),
        TypeError("unsupported operand type(s) for +: 'int' and 'str'"),
        FileNotFoundError("data/train.csv"),
        AttributeError("'Tensor' object has no attribute 'append'"),
        IndexError("list index out of range"),
        ImportError("cannot import name 'x' from 'y'"),
        AssertionError("shapes differ"),
    ],
)
def test_unrelated_errors_pass_through(error, capsys):
    assert cg.explain(error) is None and capsys.readouterr().out == ""
    assert cg.explain(error, show=False) is None


def test_explain_prints_the_cause_and_fix_of_a_real_error(capsys):
    with pytest.raises(RuntimeError) as caught:
        nn.Linear(784, 10)(torch.randn(4, 3072))
    assert cg.explain(caught.value) is None  # a cell that ends with it shows the explanation, then no value
    out = capsys.readouterr().out
    assert "Cause:" in out and "Fix:" in out and "lesson 03" in out and "AtlasEntry" not in out
    assert cg.explain(caught.value, show=False).key == "shapes-multiplied" and capsys.readouterr().out == ""


def test_an_error_raised_from_a_known_one_is_explained_by_its_cause():
    try:
        try:
            torch.ones(2, requires_grad=True).numpy()
        except RuntimeError as inner:
            raise ValueError("preprocessing failed") from inner
    except ValueError as outer:
        assert find_entry(outer).key == "numpy-grad"


def test_shows_error_checks_the_atlas_entry_and_prints_it(capsys):
    with cg.shows_error(RuntimeError, atlas="numpy-grad"):
        torch.ones(2, requires_grad=True).numpy()
    assert "colab_gpu explains: Can't call numpy()" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="does not recognise.*Has PyTorch changed the message"):
        with cg.shows_error(RuntimeError, atlas="no-grad-fn"):
            torch.ones(2, requires_grad=True).numpy()
    with pytest.raises(AssertionError, match="No such entry"):
        with cg.shows_error(RuntimeError, atlas="nope"):
            torch.ones(2, requires_grad=True).numpy()


class FakeShell:
    """The two methods of IPython's InteractiveShell the extension uses."""

    def __init__(self):
        self.custom, self.handler, self.shown = (), None, []

    def set_custom_exc(self, exc_tuple, handler):
        self.custom, self.handler = exc_tuple, handler

    def showtraceback(self, exc_tuple=None, tb_offset=None):
        self.shown.append(exc_tuple[1])


def test_the_extension_shows_the_traceback_then_the_explanation(capsys):
    shell = FakeShell()
    cg.load_ipython_extension(shell)
    try:
        assert shell.custom == (Exception,) and cg.explain.__module__ == "colab_gpu.errors.explain"
        known, unknown = RuntimeError("CUDA error: device-side assert triggered"), KeyError("x")
        for error in (known, unknown):
            shell.handler(shell, type(error), error, None)
        assert shell.shown == [known, unknown]  # IPython's traceback, always
        assert capsys.readouterr().out.count("colab_gpu explains:") == 1  # the explanation, only when known
        with cg.shows_error(RuntimeError):  # while loaded, shows_error explains known errors too
            torch.ones(2, requires_grad=True).numpy()
        assert "colab_gpu explains: Can't call numpy()" in capsys.readouterr().out
    finally:
        cg.unload_ipython_extension(shell)
    assert shell.custom == () and shell.handler is None


def test_lesson_09_shows_every_entry_under_its_message():
    text = LESSON_09.read_text()
    sections = re.split(r"^# ### (?=[\"'])", text, flags=re.M)[1:]  # a quoted heading: a message
    by_message = {section.splitlines()[0].strip()[1:-1]: section for section in sections}
    assert sorted(by_message) == sorted(e.message for e in ENTRIES)
    for entry in ENTRIES:  # reproduced: raised and checked against the entry; quoted: explained from its text
        shown = by_message[entry.message]
        checked = f'atlas="{entry.key}"' in shown or f'.key == "{entry.key}"' in shown
        assert checked if entry.reproduced else "cg.explain(" in shown, entry.key


def test_the_readme_counts_the_atlas_as_it_is():
    readme = (LESSON_09.parents[1] / "README.md").read_text()
    counts = re.findall(r"atlas of (\d+) errors|\((\d+) messages, grouped", readme)
    assert counts and {int(a or b) for a, b in counts} == {len(ENTRIES)}


@pytest.mark.parametrize(
    ("text", "key"),
    [  # as the threads about Colab and Kaggle quote them, 2024-2026 (issue 63)
        (
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
            "1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
            "ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\n"
            "Cuda failure 217 'peer access is not supported between these two devices'",
            "nccl-peer-access",
        ),
        ("RuntimeError: NCCL Error 1: unhandled cuda error", "nccl-unhandled-cuda"),
        (
            "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, "
            "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600005 milliseconds before timing out.",
            "nccl-watchdog-timeout",
        ),
        (
            "ValueError: Your setup doesn't support bf16/gpu. You need to install the appropriate version of torch",
            "bf16-unsupported-setup",
        ),
        (
            "UserWarning: Tesla T4 does not support bfloat16 compilation natively, skipping",
            "bf16-compile-skipped",
        ),
        (
            "RuntimeError: Internal Triton PTX codegen error: ptxas /tmp/tmp.ptx, line 62; error   : Feature "
            "'.bf16' requires .target sm_80 or higher",
            "triton-bf16-sm80",
        ),
        ("RuntimeError: operator torchvision::nms does not exist", "torchvision-nms-missing"),
        (
            "ValueError: numpy.dtype size changed, may indicate binary incompatibility. Expected 96 from C header, "
            "got 88 from PyObject",
            "numpy-abi",
        ),
        (
            "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that "
            "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
            "worker-bus-error",
        ),
        ("OSError: [Errno 28] No space left on device: '/root/.cache/huggingface/hub/models--gpt2'", "disk-full"),
        (
            "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\nCUDA kernel errors might "
            "be asynchronously reported at some other API call",
            "illegal-memory-access",
        ),
        # issue 66: the first errors' other forms, on a GPU, on a CPU runtime, in older releases
        ("RuntimeError: expected target dtype to be Long or Byte, but got Int", "target-dtype"),
        ("RuntimeError: expected target dtype to be Long or Byte, but got Double", "target-dtype"),
        ("RuntimeError: expected scalar type Long but found Float", "target-dtype"),
        ("RuntimeError: \"nll_loss_forward_reduce_cuda_kernel_2d_index\" not implemented for 'Int'", "target-dtype"),
        ("RuntimeError: \"nll_loss_forward_reduce_cuda_kernel_2d_index\" not implemented for 'Double'", "target-dtype"),
        ("RuntimeError: Tensor on device cpu is not on the expected device meta!", "same-device"),
        (
            "RuntimeError: Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the "
            "same or input should be a MKLDNN tensor and weight is a dense tensor",
            "input-weight-type",
        ),
    ],
)
def test_the_errors_learners_report_and_their_other_forms_are_explained(text, key):
    entry = find_entry(text)
    assert entry is not None and entry.key == key, (key, entry)


def test_an_int32_label_is_not_explained_as_a_float_one():
    with pytest.raises(RuntimeError) as caught:
        torch.nn.functional.cross_entropy(torch.randn(4, 10), torch.tensor([1, 2, 3, 4], dtype=torch.int32))
    entry = cg.explain(caught.value, show=False)
    assert entry.key == "target-dtype" and "Int (int32" in entry.cause


def test_an_unflattened_image_batch_is_told_to_flatten():
    with pytest.raises(RuntimeError) as caught:
        nn.Linear(784, 10)(torch.randn(4, 1, 28, 28))
    assert "nn.Flatten()" in cg.explain(caught.value, show=False).fix


def test_every_lesson_section_the_atlas_points_to_exists():
    # Six entries pointed to "lesson 09, devices", a heading lesson 09 does not have.
    lessons = {path.name[:2]: path.read_text() for path in LESSON_09.parent.glob("[0-9][0-9]_*.py")}
    for entry in ENTRIES:
        for place in entry.read.split(";"):
            match = re.fullmatch(
                r"lesson (\d\d)(?:, (?:the setup cell|sections? (\d+)(?:-(\d+))?)| \(.*\))?", place.strip()
            )
            assert match, f"{entry.key}: 'read' says {place.strip()!r}: 'lesson NN' or 'lesson NN, section K'"
            number, first, last = match.groups()
            for section in range(int(first or 0), int(last or first or 0) + 1) if first else ():
                assert re.search(rf"^# ## {section}\. ", lessons[number], re.M), f"{entry.key}: {place.strip()}"
