"""torch.compile support, the eager fallback, graph counting and fit(compile=True) (lesson 11), on the CPU."""

import contextlib
import io

import pytest
import torch
from torch import nn
from torch._inductor import config as inductor_config
from torch.utils.data import DataLoader, TensorDataset

import colab_gpu as cg
from colab_gpu.bench import experiments
from colab_gpu.experiments import workloads
from colab_gpu.hardware.capability import GpuCapability
from colab_gpu.train import compiling
from colab_gpu.train.models import residual_mlp
from colab_gpu.train.precision import resolve_precision

CPU = torch.device("cpu")
NO_COMPILER = {"cpp.cxx": ("no-such-compiler++",)}


class DebugPrint(nn.Module):
    """A debugging print of a tensor's value in forward: the classic graph break."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(12, 8), nn.ReLU())
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        hidden = self.body(x)
        print("mean activation:", hidden.mean().item())
        return self.head(hidden)


class Clean(DebugPrint):
    def forward(self, x):
        return self.head(self.body(x))


def loader(samples=50, batch_size=16, **kwargs):
    data = TensorDataset(torch.randn(samples, 3, 4), torch.randint(0, 3, (samples,)))
    return DataLoader(data, batch_size=batch_size, **kwargs)


def quietly(fn, *args, **kwargs):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        return fn(*args, **kwargs), out.getvalue()


def test_this_cpu_compiles_and_says_with_what():
    support = cg.compile_support("cpu")
    assert support and support.device == "cpu" and "C++" in support.reason


def test_a_missing_cxx_compiler_is_named_before_any_compiling(monkeypatch):
    monkeypatch.setattr(compiling, "_smoke_test", lambda device: pytest.fail("no compile may be tried"))
    with inductor_config.patch(NO_COMPILER):
        support = cg.compile_support("cpu")
    assert not support and "no C++ compiler" in support.reason and "g++" in support.reason


def test_a_toolchain_that_fails_anyway_is_caught_by_the_smoke_test(monkeypatch):
    monkeypatch.setattr(compiling, "cxx_compilers", lambda: ["g++"])  # looks fine, but is not there
    with inductor_config.patch(NO_COMPILER):
        support = cg.compile_support("cpu")
    assert not support and "did not compile" in support.reason and "C++ compiler" in support.reason


def test_the_smoke_test_compiles_in_the_precision_the_lessons_compile_in():
    # Issue 65: a float32 smoke test passed on a T4, which compiles the lessons in fp16.
    assert compiling.smoke_dtype(torch.device("cuda")) == torch.float16
    assert compiling.smoke_dtype(torch.device("cpu")) == torch.float32


@pytest.mark.parametrize(
    "gpu,has_triton,expected",
    [
        (GpuCapability("Tesla P100-PCIE-16GB", (6, 0)), True, "too old for Triton"),
        (GpuCapability("Tesla T4", (7, 5)), False, "Triton is not installed"),
    ],
)
def test_gpu_rules_come_from_the_capability(monkeypatch, gpu, has_triton, expected):
    monkeypatch.setattr(compiling, "gpu_capability", lambda device: gpu)
    monkeypatch.setattr(compiling.importlib.util, "find_spec", lambda name: object() if has_triton else None)
    reason = compiling._missing_piece(torch.device("cuda"))
    assert expected in reason and (gpu.triton or "CC 6.0" in reason and "T4 x2" in reason)


def test_gpus_triton_supports_from_t4():
    assert GpuCapability("T4", (7, 5)).triton and GpuCapability("V100", (7, 0)).triton
    assert not GpuCapability("P100", (6, 0)).triton


def test_a_python_dynamo_does_not_support_says_to_upgrade(monkeypatch):
    monkeypatch.setattr(torch._dynamo, "is_dynamo_supported", lambda: False)
    assert "upgrade torch" in cg.compile_support("cpu").reason


def test_compile_model_falls_back_to_the_eager_model_with_the_reason():
    model = nn.Linear(4, 2)
    with inductor_config.patch(NO_COMPILER):
        same, printed = quietly(cg.compile_model, model, "cpu")
    assert same is model and "training in eager mode" in printed and "no C++ compiler" in printed
    compiled = cg.compile_model(model, "cpu")
    assert compiled is not model and compiled._orig_mod is model


def test_graph_counter_sees_a_recompile_for_a_smaller_last_batch_and_none_when_dynamic():
    torch._dynamo.reset()
    counter = cg.GraphCounter()
    model = torch.compile(Clean(), backend=counter)
    for inputs, _ in loader(50, 16):  # 16, 16, 16, 2
        model(inputs)
    assert counter.compiles == 2 and counter.input_shapes()[0][0] == (16, 3, 4)
    torch._dynamo.reset()
    counter = cg.GraphCounter()
    model = torch.compile(Clean(), backend=counter, dynamic=True)
    for inputs, _ in loader(50, 16):
        model(inputs)
    assert counter.compiles == 1


def test_check_compiles_once_names_the_break_then_the_recompile_then_passes():
    broken, _ = quietly(cg.checks.compiles_once, DebugPrint(), loader())
    assert not broken and "breaks into 2 graphs" in broken.message and "explain" in broken.message
    recompiled, _ = quietly(cg.checks.compiles_once, Clean(), loader())
    assert not recompiled and "[16, 2]" in recompiled.message and "drop_last=True" in recompiled.message
    assert quietly(cg.checks.compiles_once, Clean(), loader(drop_last=True))[0]
    assert quietly(cg.checks.compiles_once, Clean(), loader(), dynamic=True)[0]
    assert not quietly(cg.checks.compiles_once, "model", loader())[0]


def test_fit_compiled_trains_like_eager_and_checkpoints_the_plain_keys(tmp_path):
    histories, models = {}, {}
    for compiled in (False, True):
        torch.manual_seed(0)
        models[compiled] = Clean()
        histories[compiled] = cg.fit(
            models[compiled],
            loader(64, 16),
            loader(32, 16),
            torch.optim.SGD(models[compiled].parameters(), 0.1),
            "cpu",
            epochs=2,
            progress=False,
            verbose=False,
            compile=compiled,
            checkpoint=tmp_path / f"run{compiled}.pt",
        )
    eager, compiled = histories[False], histories[True]
    assert [r["train_loss"] for r in compiled.rows] == pytest.approx([r["train_loss"] for r in eager.rows], rel=1e-4)
    for a, b in zip(models[False].parameters(), models[True].parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    saved = torch.load(tmp_path / "runTrue.pt", weights_only=False)
    assert not any(key.startswith("_orig_mod.") for key in saved["model"])


def test_fit_without_a_compiler_trains_in_eager_mode_and_says_why():
    torch.manual_seed(0)
    model = Clean()
    with inductor_config.patch(NO_COMPILER):
        history, printed = quietly(
            cg.fit,
            model,
            loader(),
            None,
            torch.optim.SGD(model.parameters(), 0.1),
            "cpu",
            epochs=1,
            progress=False,
            verbose=False,
            compile=True,
        )
    assert len(history) == 1 and "no C++ compiler" in printed


TINY_RESIDUAL = workloads.Workload("residual MLP, 1 block of width 8, batch 16", lambda: residual_mlp(8, 1), (16, 8))


def linear_weights(model):
    return sum(m.in_features * m.out_features for m in model.modules() if isinstance(m, nn.Linear))


def test_the_fusion_workload_is_small_on_a_cpu_and_sized_from_the_gpus_memory(monkeypatch):
    on_cpu = workloads.fusion_workload(CPU)
    assert on_cpu.shape[0] <= 256 and "1 block" in on_cpu.name
    for gib, rows in ((80, 2**20), (15, 2**19), (8, 2**17)):  # an H100, a T4, a small laptop GPU
        props = type("Props", (), {"total_memory": gib * 2**30})()
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device, props=props: props)
        workload = workloads.fusion_workload(torch.device("cuda"))
        assert workload.shape == (rows, 64) and f"batch {rows:,}" in workload.name


def test_the_fusion_workload_builds_and_trains_on_the_cpu():
    workload = workloads.fusion_workload(CPU)
    torch.manual_seed(0)
    model = workload.make_model()
    inputs, labels = torch.randn(workload.shape), torch.randint(0, 10, workload.shape[:1])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(30):
        loss = nn.functional.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert model(inputs).shape == (workload.shape[0], 10) and losses[-1] < 0.5 * losses[0]
    kinds = {type(m) for m in model.modules()}
    assert {nn.LayerNorm, nn.Linear, nn.Dropout} <= kinds  # the element-wise chains compile fuses


def test_training_flops_are_six_per_weight_per_row_and_four_where_the_input_needs_no_gradient(monkeypatch):
    props = type("Props", (), {"total_memory": 80 * 2**30})()  # an H100: 2^20 rows, counted on the meta device
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)
    for workload in (workloads.fusion_workload(CPU), workloads.fusion_workload(torch.device("cuda"))):
        rows = workload.shape[0]
        assert workloads.training_flops(workload) == 6 * rows * linear_weights(workload.make_model())
    # lesson 03's MLP: its first layer's input is the data, so backward skips that layer's input gradient
    mlp_flops = 6 * 256 * (512 * 512 + 512 * 10) + 4 * 256 * 784 * 512
    assert workloads.training_flops(workloads.MLP_STEP) == mlp_flops


def test_compare_compiled_times_eager_and_compiled_against_each_other_k_steps_per_sample():
    before = cg.tf32_enabled()
    compared = workloads.compare_compiled(TINY_RESIDUAL, CPU, ("default", "reduce-overhead"))
    eager, compiled = compared.steps["eager"], compared.steps["default"]
    assert set(compared.steps) == {"eager", "default"} and compared.precision == "fp32"
    assert len(eager.times) == len(compiled.times) == 7 and min(eager.steps_per_sample, compiled.steps_per_sample) >= 1
    assert compared.first_call_s["default"] > compiled.median  # the first call captured and compiled the step
    assert compared.speedup() == eager.median / compiled.median and compared.peak_mib == {
        "eager": None,
        "default": None,
    }
    assert "CUDA graphs" in compared.failed["reduce-overhead"] and compared.speedup("reduce-overhead") is None
    shown = str(compared)
    ks = f"K per side: {eager.steps_per_sample}, {compiled.steps_per_sample} steps per sample"  # each its own K
    assert ks in shown and "x eager; first call" in shown
    assert "reduce-overhead: not run, eager only: CUDA graphs" in shown
    assert cg.tf32_enabled() == before  # TF32 was set for the comparison only


def test_a_compile_that_fails_at_its_first_call_leaves_eager_and_says_why(monkeypatch):
    class Broken(nn.Module):  # what Triton's failure on a T4 looks like from the learner's side: the first call raises
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, x):
            raise RuntimeError("PassManager::run failed\n(the rest of Triton's report)")

    def broken_compile(model, **options):
        return Broken(model)

    monkeypatch.setattr(torch, "compile", broken_compile)
    compared = workloads.compare_compiled(TINY_RESIDUAL, CPU)
    assert set(compared.steps) == {"eager"} and compared.speedup() is None
    assert compared.failed == {"default": "it failed at its first call (RuntimeError: PassManager::run failed)"}


def test_without_a_compiler_only_eager_is_timed_and_the_reason_is_given():
    with inductor_config.patch(NO_COMPILER):
        compared = workloads.compare_compiled(TINY_RESIDUAL, CPU)
    assert set(compared.steps) == {"eager"} and "no C++ compiler" in compared.failed["default"]


def test_compile_rows_on_cpu_carry_the_regime_and_skip_cuda_graphs(monkeypatch):
    monkeypatch.setattr(experiments, "fusion_workload", lambda device: TINY_RESIDUAL)  # the row's logic, not its figure
    monkeypatch.setattr(experiments, "choose_precision", lambda device: resolve_precision("fp32", device))
    rows = experiments.compile_rows(CPU)
    assert [(r.key, r.status) for r in rows] == [("compile", "ok"), ("compile_graphs", "skipped")]
    fused, graphs = rows
    assert "GPU-bound" in fused.name and "launch-bound" in graphs.name  # the regime each row's claim needs
    assert fused.details["regime"] == "CPU-bound" and "CPU-bound" in fused.note  # and the one measured here
    assert fused.ratio > 0 and fused.details["first_call_s"] > 0 and fused.details["steps_per_sample"] >= 1
    assert "CUDA graphs" in graphs.note and "needs a CUDA GPU" in graphs.note
    with inductor_config.patch(NO_COMPILER):
        rows = experiments.compile_rows(CPU)
    assert rows[0].status == "skipped" and "no C++ compiler" in rows[0].note and rows[1].status == "skipped"


def test_a_compile_error_is_shown_at_the_learners_line_not_in_generated_code():
    def scaled_sine(x):
        return torch.sin(x) * 3

    with inductor_config.patch(NO_COMPILER):
        (_, printed) = quietly(_show_compile_error, scaled_sine)
    assert "raised by: torch.compile(fn)(torch.ones(4))" in printed and "async_compile" not in printed


def _show_compile_error(fn):
    with cg.shows_error(RuntimeError, match="C\\+\\+ compiler"):
        torch.compile(fn)(torch.ones(4))
    return None


@pytest.mark.gpu
def test_on_a_gpu_compile_and_reduce_overhead_train_and_the_rows_are_measured():
    device = cg.get_device("cuda")
    support = cg.compile_support(device)
    if not support:  # a GPU Triton does not support (a P100) must be said, not crash
        assert "Triton" in support.reason
        return
    assert "Triton kernels" in support.reason
    compared = workloads.compare_compiled(workloads.TINY_STEP, device, ("default", "reduce-overhead"))
    if compared.failed:  # Triton on a T4 may fail on some kernels: said, and eager goes on
        assert all("first call" in why for why in compared.failed.values()), compared.failed
    for mode in set(compared.steps) - {"eager"}:
        assert compared.first_call_s[mode] > compared.steps[mode].median > 0 and compared.peak_mib[mode] is not None
    rows = experiments.compile_rows(device)
    assert [r.key for r in rows] == ["compile", "compile_graphs"]
    assert all(r.details["regime"] in ("GPU-bound", "launch-bound") for r in rows if r.status == "ok")
    torch.manual_seed(0)
    model = Clean().to(device)
    history = cg.fit(
        model,
        loader(64, 16),
        loader(32, 16),
        torch.optim.SGD(model.parameters(), 0.1),
        device,
        epochs=2,
        progress=False,
        verbose=False,
        compile=True,
    )
    assert len(history) == 2 and next(model.parameters()).device.type == "cuda"


def test_lesson_11s_exercise_fails_as_it_starts_and_passes_solved():
    from pathlib import Path

    import jupytext

    cells = jupytext.read(Path(__file__).resolve().parents[1] / "notebooks" / "11_torch_compile.py").cells
    solution = next(i for i, c in enumerate(cells) if "solution" in c.metadata.get("tags", []))
    data = TensorDataset(torch.randn(1000, 1, 28, 28), torch.randint(0, 10, (1000,)))
    nets = {}
    for name, cell in (("starting", cells[solution - 1]), ("solved", cells[solution])):
        namespace = {"torch": torch, "nn": nn, "DataLoader": DataLoader, "samples": data}
        exec(compile(cell.source, "11_torch_compile.py", "exec"), namespace)
        torch.manual_seed(0)
        nets[name] = namespace["ExerciseNet"](), namespace["exercise_loader"]
    broken, _ = quietly(cg.checks.compiles_once, *nets["starting"])
    assert not broken and "breaks into 2 graphs" in broken.message and "an if on a tensor's value" in broken.message
    still_recompiling, _ = quietly(cg.checks.compiles_once, nets["solved"][0], nets["starting"][1])
    assert not still_recompiling and "drop_last=True" in still_recompiling.message
    assert quietly(cg.checks.compiles_once, *nets["solved"])[0]
    large = 10 * torch.randn(8, 1, 28, 28)  # activations above 6: the clamp is at work in both
    with torch.no_grad():
        torch.testing.assert_close(nets["solved"][0](large), nets["starting"][0](large))


def test_a_first_call_says_whether_the_compile_cache_was_warm():
    """Issue 50: lesson 11 printed first calls of 0.4-0.9 s, warm caches; a fresh runtime's cold one took 9.5 s."""
    from colab_gpu.measure.timing import BenchResult
    from colab_gpu.train.compiling import CompileComparison

    steps = {"eager": BenchResult((0.002,) * 7), "default": BenchResult((0.001,) * 7)}
    text = str(CompileComparison("w", "fp32", steps, {"default": 12.1}, {}, {}, {"default": 0}))
    assert "first call 12.1 s, cold cache)" in text
    text = str(CompileComparison("w", "fp32", steps, {"default": 1.3}, {}, {}, {"default": 2}))
    assert "first call 1.3 s, warm cache: 2 graph(s) from it)" in text
    seconds, hits = cg.train.compiling.first_call(lambda: torch.ones(2).sum(), torch.device("cpu"))
    assert seconds > 0 and hits == 0  # nothing compiled, nothing read from the cache


def test_fit_compiled_says_when_a_smaller_last_batch_compiles_one_more_graph():
    from torch.utils.data import DataLoader, TensorDataset

    from colab_gpu.train.fit import _last_batch_note

    ten = TensorDataset(torch.zeros(10, 1), torch.zeros(10))
    assert "last batch holds 2 samples, not 4" in _last_batch_note("training", DataLoader(ten, batch_size=4))
    assert _last_batch_note("training", DataLoader(ten, batch_size=4, drop_last=True)) is None
    assert _last_batch_note("training", DataLoader(ten, batch_size=5)) is None
    assert _last_batch_note("test", None) is None and _last_batch_note("test", [(1, 2)]) is None
