"""Issue 49: the mistakes learners really make with the timing, profiling and batch-size helpers get a clear answer
that says what was asked, what exists and how to fix it, never a raw internals message."""

import pytest
import torch
from torch import nn

import colab_gpu as cg
from colab_gpu.hardware.device import DeviceNotAvailableError
from colab_gpu.measure.regimes import regime_of
from colab_gpu.measure.timing import BenchResult

NO_GPU = r"this runtime has no GPU .*Runtime > Change runtime type > T4 GPU"
x = torch.randn(8, 8)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: cg.benchmark(x @ x, device="cpu"), TypeError, r"needs the work as a function.*Wrap it"),
        (lambda: cg.compare_steps({"a": x @ x}, device="cpu"), TypeError, r"step 'a' needs the work as a function"),
        (lambda: cg.compare_steps([lambda: x], device="cpu"), TypeError, r"takes a dict of named steps, got list"),
        (lambda: cg.profile_step(x.sum(), "cpu"), TypeError, r"needs the step as a function to call"),
        (lambda: regime_of(object()), TypeError, r"regime_of reads a profile's summary.*summarize_profile"),
        (lambda: cg.speedup(2.0, 1.0), TypeError, r"its slow argument is float 2.0.*slow_seconds / fast_seconds"),
        (lambda: cg.format_seconds(torch.tensor(1.0)), TypeError, r"takes a number of seconds"),
    ],
)
def test_a_result_where_a_function_or_a_timing_is_expected_says_what_to_pass(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_format_seconds_reads_a_benchmark_result_as_its_median():
    assert cg.format_seconds(BenchResult((0.001, 0.002, 0.003))) == "2 ms"


@pytest.mark.skipif(torch.cuda.is_available(), reason="the message of a runtime without a GPU")
@pytest.mark.parametrize(
    ("helper", "call"),
    [
        ("benchmark", lambda: cg.benchmark(lambda: x @ x, device="cuda")),
        ("compare_steps", lambda: cg.compare_steps({"a": lambda: x @ x}, device="cuda")),
        ("profile_step", lambda: cg.profile_step(lambda: x @ x, "cuda")),
        ("find_max_batch_size", lambda: cg.find_max_batch_size(lambda n: torch.randn(n), "cuda")),
    ],
)
def test_cuda_on_a_runtime_without_a_gpu_gets_one_clear_message(helper, call):
    with pytest.raises(DeviceNotAvailableError, match=rf"{helper} was asked for cuda.*{NO_GPU}"):
        call()


def test_find_max_batch_size_wants_a_step_not_a_model():
    with pytest.raises(TypeError, match=r"needs try_batch, a function of the batch size .* not a Linear"):
        cg.find_max_batch_size(torch.nn.Linear(4, 4), "cpu")


def test_a_step_that_runs_out_of_cpu_memory_is_an_edge_and_the_cpu_is_named():
    def step(batch_size):
        if batch_size > 1000:  # what PyTorch's CPU allocator raises
            raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory")

    found = cg.find_max_batch_size(step, "cpu", start=64)
    assert 1000 * 15 / 16 <= found.largest_fit <= 1000 and found.on_cpu
    assert "On a CPU the batch shares the machine's RAM" in str(found) and "not a GPU's limit" in str(found)
    with pytest.raises(RuntimeError, match="a bug in the step"):  # any other error is the learner's to see
        cg.find_max_batch_size(lambda n: (_ for _ in ()).throw(RuntimeError("a bug in the step")), "cpu")


def test_generate_says_what_a_prompt_is():
    from colab_gpu.llm import llm_memory as mem

    shape = mem.ModelShape("tiny", vocab=64, hidden=32, intermediate=48, layers=1, heads=2, kv_heads=1, head_dim=16)
    model = cg.TinyDecoder(shape)
    with pytest.raises(TypeError, match=r"got a list: torch.tensor\(\[ids\], device='cpu'\) makes one"):
        cg.generate(model, [1, 2, 3], 4)
    with pytest.raises(ValueError, match=r"the prompt has no tokens \(shape \(1, 0\)\)"):
        cg.generate(model, torch.zeros(1, 0, dtype=torch.long), 4)


def test_attention_backend_wants_the_capability_as_a_pair():
    with pytest.raises(TypeError, match=r"capability='7.5': give it as \(major, minor\), e.g. \(7, 5\)"):
        cg.attention_backend("7.5", torch.float16, 64)


def test_decode_jpegs_names_the_file_that_is_not_a_jpeg():
    from colab_gpu.data.image_folders import decode_jpegs

    png = torch.tensor([0x89, 0x50, 0x4E, 0x47, 0x0D], dtype=torch.uint8)
    with pytest.raises(ValueError, match=r"image 0 is not a JPEG file \(it starts with 89 50 4e 47, a JPEG with ff d8"):
        decode_jpegs([png], "cpu")
    with pytest.raises(TypeError, match=r"image 0 is not a file's bytes as a 1-D uint8 tensor \(got bytes\)"):
        decode_jpegs([b"\xff\xd8"], "cpu")


def test_measure_loader_wants_at_least_one_pass_and_names_a_spent_generator():
    loader = [(torch.zeros(4, 2), torch.zeros(4))]
    with pytest.raises(ValueError, match=r"needs epochs >= 1 passes over the loader, got epochs=0"):
        cg.feeding.measure_loader(loader, "cpu", epochs=0)
    spent = iter(loader)
    list(spent)
    with pytest.raises(ValueError, match=r"a generator that ran once already"):
        cg.feeding.measure_loader(spent, "cpu")


def test_check_amp_step_turns_any_error_of_the_learners_step_into_a_hint(capsys):
    def step(model, inputs, labels, optimizer, scaler, max_norm):
        raise KeyError("scaler")

    assert not cg.checks.amp_step(step, "cpu")
    assert "your step raised KeyError: 'scaler'" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (
            "RuntimeError: Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same "
            "or input should be a MKLDNN tensor and weight is a dense tensor",
            "input-weight-type",
        ),
        (
            "You are connected to a GPU runtime, but not utilizing the GPU. Change to a standard runtime",
            "colab-gpu-unused",
        ),
    ],
)
def test_the_two_errors_learners_met_that_the_atlas_did_not_know(text, key):
    entry = cg.explain(text, show=False)
    assert entry is not None and entry.key == key
    assert "batch was not moved" in entry.cause or "Runtime > Change runtime type" in entry.fix


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        ([0.5, 0.25, 1.0], "is a Python list of 3 numbers: the right length, in the wrong type"),
        (torch.tensor([50.0, 25.0, 100.0]), "is 100 times the right values: give fractions"),
        (torch.tensor([2.0, 1.0, 4.0]), "holds whole numbers up to 4: counts, it seems"),
        (torch.tensor([0.4, 0.25, 1.0]), "has the right shape but wrong values"),
    ],
)
def test_check_close_hints_by_the_symptom_of_the_answer(capsys, answer, hint):
    assert not cg.checks.core.close(answer, torch.tensor([0.5, 0.25, 1.0]), name="class_acc")
    assert hint in capsys.readouterr().out


# Lesson 04's class_acc: 10 test images of 3 classes, the model right on 6.
TRUTH = torch.tensor([0, 0, 0, 0, 1, 1, 1, 2, 2, 2])
PREDICTED = torch.tensor([0, 0, 1, 2, 1, 1, 0, 2, 2, 1])
RECALL = torch.tensor([2 / 4, 2 / 3, 2 / 3])  # of the images labelled c, the fraction predicted c
PRECISION = torch.tensor([2 / 3, 2 / 4, 2 / 3])  # of the images predicted c, the fraction labelled c


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (RECALL, "✅ Correct: class_acc has the right values; the hardest class is 0 (50% right)"),
        (RECALL.tolist(), "is a Python list of 3 numbers: the right length, in the wrong type"),
        (100 * RECALL, "is 100 times the right values: give fractions"),
        (torch.tensor([2.0, 2.0, 2.0]), "holds whole numbers up to 2: counts, it seems"),
        (PRECISION, "holds each class's precision: of the images the model *predicted* as c"),
        (torch.full((3,), 0.6), "every entry is the overall accuracy (60.0%)"),
        (torch.tensor([0.1, 0.2, 0.3]), "has the right shape but wrong values"),
        (torch.zeros(10), "has shape (10,), expected (3,)"),
    ],
    ids=["right", "list", "percent", "counts", "precision", "overall", "other", "per image"],
)
def test_class_accuracy_hints_by_the_symptom_of_the_answer(capsys, answer, hint):
    result = cg.checks.class_accuracy(answer, PREDICTED, TRUTH, classes=3)
    assert bool(result) == hint.startswith("✅") and hint in capsys.readouterr().out


def test_loader_settings_checks_the_data_set_the_batch_size_and_the_measured_workers(monkeypatch, capsys):
    from torch.utils.data import DataLoader, TensorDataset

    from colab_gpu.data import loaders

    monkeypatch.setattr(loaders, "cpu_count", lambda: 2)  # the rule says 2 workers
    asked, other = TensorDataset(torch.zeros(8, 1)), TensorDataset(torch.zeros(5, 1))
    sweep = {0: 100.0, 1: 180.0, 2: 185.0}  # the measured advice: 1 worker (within 10% of the fastest)

    def check(loader):
        result = cg.checks.loader_settings(loader, "cpu", dataset=asked, batch_size=4, measured=sweep)
        return result, capsys.readouterr().out

    result, out = check(DataLoader(other, batch_size=4, num_workers=1, persistent_workers=True))
    assert not result and "not the data set the exercise names (TensorDataset, 8 samples)" in out
    result, out = check(DataLoader(asked, batch_size=2, num_workers=1, persistent_workers=True))
    assert not result and "batch size is 2; the exercise asks for batch_size=4" in out
    result, out = check(DataLoader(asked, batch_size=4, num_workers=2, persistent_workers=True))
    assert not result and "num_workers=2 is the rule's guess" in out and "measured here" in out
    result, out = check(DataLoader(asked, batch_size=4, num_workers=1, persistent_workers=True))
    assert result and "1 worker (as your sweep measured), persistent" in out


def test_a_timed_check_says_rerun_when_its_runs_were_erratic():
    from colab_gpu.checks.timed import busy_note

    assert busy_note({"yours": [1.0, 1.1, 1.2], "theirs": [2.0, 2.1, 2.0]}) == ""
    note = busy_note({"yours": [1.0, 3.1, 1.2], "theirs": [2.0, 2.1, 2.0]})
    assert "up to 3.1x slower in one run" in note and "Rerun the check when it is quiet" in note


def test_prediction_speed_takes_the_best_runs_and_says_rerun_when_they_were_erratic(monkeypatch, capsys):
    from colab_gpu.checks import speed

    samples = {"fast": [0.9, 0.5, 0.5], "slow": [0.5, 0.55, 0.5]}  # the fast one disturbed once, still no faster
    monkeypatch.setattr(
        speed,
        "best_of",
        lambda runs, repeat: ({name: min(values) for name, values in samples.items()}, speed.busy_note(samples)),
    )

    def predict(m, x):
        m.eval()
        with torch.inference_mode():
            return m(x.to(next(m.parameters()).device)).argmax(1)  # the batch goes where the model is

    model = nn.Linear(4, 2)
    assert not cg.checks.prediction_speed(predict, predict, model, torch.randn(8, 4), "cpu")
    out = capsys.readouterr().out
    assert "in 500.0 ms instead of 500.0 ms" in out and "ran up to 1.8x slower" in out


def test_a_gpu_index_this_machine_lacks_gets_the_same_answer_as_get_device(fake_gpus):
    """Issue 49's last item: the timing helpers checked that a GPU exists, not that the asked index does."""
    fake_gpus()  # one T4
    with pytest.raises(DeviceNotAvailableError, match=r"cg.benchmark was asked for cuda:3, but this machine"):
        cg.benchmark(lambda: None, device="cuda:3")
