"""The regime rule (colab_gpu.measure.regimes) on synthetic profiles of every regime, on the course's H100 steps
recomputed, and on a simulated GPU stream whose host and GPU costs are known."""

import dataclasses
import json
import re
import types
from pathlib import Path

import pytest
import torch

import colab_gpu as cg
from colab_gpu.measure.profile_events import COPIES, ELEMENTWISE, HOST_READ, MATMUL, TINY, Span, kernel_category
from colab_gpu.measure.profile_summary import ProfileSummary, summarize_spans

from .test_profiling import CONVOLUTION, synthetic_steps

ROOT = Path(__file__).resolve().parents[1]


def test_a_gpu_idle_a_fifth_of_the_step_is_launch_bound_and_the_host_levers_come_first():
    summary = synthetic_steps(step_us=820, busy=0.12, launches=40, reads=1)
    regime = summary.regime
    assert regime.name == "launch-bound" and summary.gpu_busy == pytest.approx(0.12)
    assert (
        "busy 12% of each 820 µs step: the host's work, 40 kernel launches per step (20 µs of step per launch), "
        "takes longer than the kernels; its 1 host read(s) per step stop the CPU" in regime.reason
    )
    assert [lever.split(":")[0] for lever in regime.levers] == [
        "fewer host syncs",
        "a bigger batch",
        "a fused or foreach optimizer, e.g. torch.optim.Adam(..., fused=True)",
    ]
    for useless in ("default torch.compile", "AMP", "TF32", "channels_last", "cudnn.benchmark"):
        assert useless in regime.useless[0]
    # 60% busy: under the old rule (50%) GPU-bound; in a queued loop the host is already 1.7x the GPU's part
    assert synthetic_steps(busy=0.6).regime.name == "launch-bound"
    assert synthetic_steps(busy=0.79).regime.name == "launch-bound"


def test_cuda_graphs_are_no_lever_where_they_were_not_measured_to_pay():
    # Issue 64: "CUDA graphs" was a launch-bound lever whose own text said it measured 1.00x.
    training = synthetic_steps(busy=0.05, launches=23).regime
    assert "CUDA graphs" not in training.lever_names
    graphs = training.why_useless("CUDA graphs")
    assert "forward and backward as one launch each" in graphs and "the rest of the step stay eager" in graphs
    assert "gained nothing" in graphs and "11.graphs_speedup_mlp" in graphs and 'mode="reduce-overhead"' in graphs
    # an inference step (no optimizer): reduce-overhead would graph all of it, and the course has not measured that
    inference = synthetic_steps(busy=0.05, launches=23, ops=()).regime
    assert "CUDA graphs" not in inference.lever_names and inference.why_useless("CUDA graphs") is None
    tiny = synthetic_steps(step_us=1600, busy=0.88, launches=300, kernel="sgemm", ops=()).regime
    assert tiny.kernels == TINY and "CUDA graphs" not in tiny.lever_names + tiny.useless_names


@pytest.mark.parametrize(
    ("kernel", "microseconds", "kind"),
    [
        ("ampere_sgemm_128x64_nn", 300, MATMUL),
        ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", 90, MATMUL),
        ("void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 8, 3, 3, 5, false, 512>", 40, MATMUL),
        ("sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw", 40, MATMUL),
        ("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>", 40, ELEMENTWISE),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", 40, ELEMENTWISE),
        ("triton_poi_fused_add_gelu_native_layer_norm_0", 25, ELEMENTWISE),
        ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>", 12, ELEMENTWISE),
        ("volta_scudnn_128x64_relu_interior_nn_v1", 60, MATMUL),  # a T4's fp32 convolution (issue 64)
        ("turing_fp16_s1688cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc_tn_v1", 60, MATMUL),  # its fp16 one
        ("volta_h884cudnn_256x64_ldg8_relu_exp_small_nhwc_tn_v1", 60, MATMUL),  # a V100's
        ("ampere_sgemm_32x32_sliced1x4_tn", 6, TINY),
        ("Memcpy HtoD (Pinned -> Device)", 3, COPIES),
    ],
)
def test_each_kernel_is_named_by_what_it_is_busy_with(kernel, microseconds, kind):
    assert kernel_category(kernel, microseconds) == kind


def test_a_busy_gpu_in_matmuls_gets_precision_and_layouts_not_fusion():
    # 40 GFLOP in a 1 ms step: 40 TFLOP/s against a measured fp32 peak of 51 (the H100's)
    summary = synthetic_steps(
        busy=0.95, kernel="sgemm", flops_per_step=40e9, peak_tflops=51.0, peak_precision="fp32", ops=(CONVOLUTION,)
    )
    assert summary.achieved_tflops == pytest.approx(40) and summary.share_of_peak == pytest.approx(40 / 51)
    regime = summary.regime
    assert regime.name == "GPU-bound" and regime.kernels == MATMUL
    assert (
        "100% of the kernels' time in matmuls and convolutions, at 40 TFLOP/s, 78% of this GPU's fp32" in regime.reason
    )
    assert any("AMP" in lever for lever in regime.levers) and any("channels_last" in lever for lever in regime.levers)
    assert not any("fusion" in lever for lever in regime.levers) and any("fusion" in u for u in regime.useless)
    assert "40 TFLOP/s, 78% of this GPU's measured fp32 matmul peak" in str(summary)
    synced = synthetic_steps(busy=0.95, reads=1, kernel="sgemm").regime
    assert synced.name == "GPU-bound" and "1 host read(s) per step leave the GPU idle" in synced.reason
    assert synced.levers[-1].startswith("fewer host syncs")


def test_far_below_the_peak_is_not_by_itself_element_wise_a_conv_net_stays_a_conv_net():
    # Lesson 04's CNN in fp32: cuDNN convolutions far below the matmul peak. Compile gave 0.98-1.05x on it.
    conv = synthetic_steps(busy=0.95, kernel="cudnn::cnn::wgrad_alg0_engine", flops_per_step=2e9, peak_tflops=51.0)
    assert conv.regime.kernels == MATMUL and "at only 2 TFLOP/s, 4% of this GPU's matmul peak" in conv.regime.reason
    assert not any("fusion" in lever for lever in conv.regime.levers)
    chain = synthetic_steps(busy=0.9, launches=60, kernel="vectorized_elementwise_kernel", flops_per_step=2e9)
    assert chain.regime.kernels == ELEMENTWISE and chain.regime.levers[0].startswith("fusion: default torch.compile")
    assert any("fused=True" in lever for lever in chain.regime.levers)  # one kernel for all parameters' updates
    assert not any("fused optimizers" in u for u in chain.regime.useless)


def test_hundreds_of_tiny_kernels_want_more_work_per_kernel_and_the_host_is_close_behind():
    decode = synthetic_steps(step_us=1600, busy=0.88, launches=300, kernel="sgemm")  # 4.7 µs each
    regime = decode.regime
    assert regime.name == "GPU-bound" and regime.kernels == TINY and "each under 10 µs" in regime.reason
    assert regime.levers[0].startswith("more work per kernel") and "the host is close behind" in regime.reason
    assert "the kernels' time: tiny kernels 100%" in str(decode)


def h100_step(profiled_ms, kernel_ms, unprofiled_ms, kernel="sgemm", launches=40, count=3):
    """Spans of ``count`` steps as profiled (``profiled_ms`` each, ``kernel_ms`` of kernels), summarized against the
    step timed without the profiler (``unprofiled_ms``; None: against the profiled step)."""
    spans = []
    for i in range(count):
        t0 = i * profiled_ms * 1e3
        spans.append(Span("ProfilerStep*", False, t0, t0 + profiled_ms * 1e3))
        each = kernel_ms * 1e3 / launches
        for k in range(launches):
            spans.append(Span("cudaLaunchKernel", False, t0 + k, t0 + k + 1))
            spans.append(Span(kernel, True, t0 + k * each, t0 + (k + 1) * each))
    return summarize_spans(spans, unprofiled_step_ms=unprofiled_ms)


@pytest.mark.parametrize(
    ("step", "profiled", "kernels", "unprofiled", "launches", "busy", "regime"),
    [  # the committed H100 outputs (reports/gpu/2026-11-26-*): profiled step, kernel time, unprofiled step
        ("lesson 04 CNN, channels_last", 6.6, 1.12, 2.59, 40, 0.43, "launch-bound"),
        ("lesson 10 section 7 busy MLP", 3.89, 2.84, 3.04, 40, 0.93, "GPU-bound"),
        ("lesson 12 rung 6, eager fp32", 7.32, 5.34, 5.15, 40, 1.0, "GPU-bound"),
        ("lesson 14 decode, 16 x 1 token", 3.28, 1.41, 1.6, 300, 0.88, "GPU-bound"),
    ],
)
def test_the_h100_steps_busy_share_is_against_the_unprofiled_step(
    step, profiled, kernels, unprofiled, launches, busy, regime
):
    stretched = h100_step(profiled, kernels, None, launches=launches)
    assert stretched.gpu_busy == pytest.approx(kernels / profiled, abs=0.01)  # what the lessons printed
    summary = h100_step(profiled, kernels, unprofiled, launches=launches)
    assert summary.gpu_busy == pytest.approx(busy, abs=0.01) and summary.regime.name == regime, step
    assert summary.profiled_step_ms == pytest.approx(profiled) and summary.step_ms == unprofiled
    assert summary.busy_clamped == (kernels > unprofiled) and ("clamped" in str(summary)) == (kernels > unprofiled)


class SimulatedStream:
    """A GPU stand-in on a simulated clock, as a CUDA stream behaves: the host's work advances the host's clock, a
    launched kernel runs once the stream is free (one after another), and a synchronize waits for the last one.
    No thread and no sleep: the figures are the same on an idle, a busy or a slow machine (issue 63: the sleeps
    overshot on a busy host, and a cost of 1.29 became 1.72)."""

    def __init__(self):
        self.now = 0.0  # the host's clock, in seconds
        self.free_at = 0.0  # when the stream finishes what is queued
        self.kernels: list[tuple[float, float]] = []

    def perf_counter(self) -> float:
        return self.now

    def launch(self, seconds):
        start = max(self.now, self.free_at)
        self.free_at = start + seconds
        self.kernels.append((start * 1e6, self.free_at * 1e6))

    def synchronize(self, device=None):
        self.now = max(self.now, self.free_at)

    def step(self, host, gpu, read=False, kernels=1):
        """One training step: the host's part (Python, launches, the batch) spread over ``kernels`` launches of
        equal kernels, and maybe a .item() at the end."""

        def run():
            for _ in range(kernels):
                self.now += host / kernels
                self.launch(gpu / kernels)
            if read:
                self.synchronize()  # .item(): the CPU waits for everything queued

        return run

    def profile(self, host, gpu, steps=3, read=False, kernels=1):
        """The spans of ``steps`` steps as profile_step records them: synchronized after the last one."""
        self.synchronize()
        self.kernels.clear()
        spans, run = [], self.step(host, gpu, read, kernels)
        for i in range(steps):
            start = self.now * 1e6
            run()
            spans += [Span("cudaLaunchKernel", False, start, start + 1)] * kernels
            if read:
                spans.append(Span(HOST_READ, False, self.now * 1e6 - 1, self.now * 1e6, True, synchronizes=True))
            if i == steps - 1:
                self.synchronize()
            spans.append(Span("ProfilerStep*", False, start, self.now * 1e6))
        return spans + [Span("sgemm", True, start, end) for start, end in self.kernels]

    def summary(self, host, gpu, stretched_host, read=False, kernels=1):
        """The step timed without the profiler (`compare_steps`), then profiled with its host part stretched, as
        `profile_step` measures it."""
        timed = cg.compare_steps({"step": self.step(host, gpu, read, kernels)}, device="cuda")["step"]
        spans = self.profile(stretched_host, gpu, read=read, kernels=kernels)
        return summarize_spans(
            spans,
            unprofiled_step_ms=timed.median * 1e3,
            steps_per_sample=timed.steps_per_sample,
            unprofiled_host_ms=timed.host_median * 1e3,
        )


@pytest.fixture
def stream(monkeypatch):
    stream = SimulatedStream()
    monkeypatch.setattr(cg.measure.timing, "synchronize", stream.synchronize)
    monkeypatch.setattr(cg.measure.timing, "time", types.SimpleNamespace(perf_counter=stream.perf_counter))  # its clock
    monkeypatch.setattr(cg.hardware.device, "cuda_device_count", lambda: 1)  # "cuda" is the simulated stream
    monkeypatch.setattr(torch.cuda, "init", lambda: None)  # the device door starts CUDA: nothing to start
    return stream


@pytest.mark.parametrize(
    ("gpu", "host", "kernel", "stretched_host"),
    [  # seconds per step: the host's part, the GPU's, the host's part under the profiler
        ("H100-like, lesson 10's busy MLP", 0.8e-3, 3e-3, 4e-3),
        ("T4-like, lesson 10's busy MLP on 2 vCPUs", 4e-3, 20e-3, 10e-3),
    ],
)
def test_on_a_simulated_stream_the_item_cost_and_the_verdict_come_out_right(stream, gpu, host, kernel, stretched_host):
    timings = cg.compare_steps(
        {"item": stream.step(host, kernel, read=True), "queued": stream.step(host, kernel)}, device="cuda"
    )
    cost = timings["item"].median / timings["queued"].median
    true_cost = (host + kernel) / kernel  # taking turns costs both parts; queued ahead, the larger one
    assert timings["queued"].steps_per_sample >= 8
    assert 1.08 < cost < true_cost + 0.08, (gpu, cost)  # K=8 hides all but the first step's host part
    unprofiled = timings["queued"].median * 1e3
    summary = summarize_spans(stream.profile(stretched_host, kernel), unprofiled_step_ms=unprofiled)
    assert summary.regime.name == "GPU-bound" and summary.gpu_busy > 0.85, (gpu, str(summary))


def test_on_a_simulated_stream_one_step_per_sample_hides_the_reads_cost_and_the_profiled_step_misleads(
    stream, monkeypatch
):
    host, kernel = 4e-3, 20e-3  # a 20 ms step as predicted for a T4 (no T4 has run it), timed as before the floor of 8
    monkeypatch.setattr(cg.measure.timing, "MIN_QUEUED_STEPS", 1)
    timings = cg.compare_steps(
        {"item": stream.step(host, kernel, read=True), "queued": stream.step(host, kernel)}, device="cuda"
    )
    assert timings["queued"].steps_per_sample == 1
    assert timings["item"].median / timings["queued"].median < 1.05  # 1.00x by construction: no queue to lose
    # A borderline step (host 6 ms, GPU 9 ms) whose host the profiler stretches past the GPU's part
    spans = stream.profile(12e-3, 9e-3)
    assert summarize_spans(spans).regime.name == "launch-bound"  # against the stretched step: the wrong lever
    monkeypatch.setattr(cg.measure.timing, "MIN_QUEUED_STEPS", 8)  # as compare_steps times it now: queued 8 at a time
    unprofiled = cg.compare_steps({"step": stream.step(6e-3, 9e-3)}, device="cuda")["step"].median * 1e3
    assert summarize_spans(spans, unprofiled_step_ms=unprofiled).regime.name == "GPU-bound"


def test_the_recorded_h100_steps_get_the_verdict_their_numbers_give():
    steps = {step.name.split(":")[0]: step for step in cg.recorded_steps()}
    assert [s.summary.regime.name for s in steps.values()] == ["input-bound", "launch-bound", "GPU-bound"]
    assert all(s.gpu == "NVIDIA H100 80GB HBM3" and s.source for s in steps.values())
    cnn = steps["lesson 04"].summary
    assert cnn.gpu_busy == pytest.approx(0.433, abs=0.002) and cnn.profiled_step_ms == 6.6  # 17% when profiled
    mlp = steps["lesson 10"].summary
    assert mlp.gpu_busy == pytest.approx(0.934, abs=0.002) and mlp.share_of_peak == pytest.approx(0.506, abs=0.002)
    # its kinds were not recorded; the work done at the peak rate fills at least 54% of its kernels' time
    assert mlp.regime.kernels == MATMUL and "at least 54% of the kernels' time in matmuls" in mlp.regime.reason
    assert "regime" not in steps["lesson 04"].summary.measurements() and "43%" in str(steps["lesson 04"])


def test_a_summary_survives_its_record():
    summary = synthetic_steps(busy=0.9, reads=2, scaler_reads=1, kernel="sgemm", flops_per_step=4e9, peak_tflops=8.0)
    again = ProfileSummary.from_record(json.loads(json.dumps(summary.to_record())))
    assert again == summary and str(again) == str(summary)


def test_check_regime_passes_a_right_reading_of_a_recorded_step(capsys):
    dataloader, cnn, mlp = cg.recorded_steps()
    assert cg.checks.regime(dataloader, "input-bound", "workers")
    assert cg.checks.regime(cnn, "launch-bound", "bigger batch")
    assert cg.checks.regime(mlp, "GPU-bound", "layouts")
    assert "(the first one to try here: '16-bit')" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("step", "my_regime", "my_lever", "hint"),
    [
        (
            1,
            "GPU-bound",
            "16-bit",
            "not GPU-bound: the GPU is busy 43% of the step timed without the profiler, under 80%",
        ),
        (1, "launch-bound", "fusion", "cannot help this step: default torch.compile, AMP, TF32"),  # the usual confusion
        (2, "launch-bound", "bigger batch", "not launch-bound: the GPU is busy 93% of the step timed without"),
        (2, "GPU-bound", "workers", "cannot help this step: more DataLoader workers: the data is not what"),
        (0, "launch-bound", "bigger batch", "not launch-bound: the step waits for its data 61% of its time"),
        (0, "input-bound", "fewer syncs", "is not among the levers for what this step waits on"),
        (0, "input", "workers", "answer one of 'input-bound', 'launch-bound'"),
        (0, "input-bound", "compile", "answer one of 'workers', 'data on the GPU'"),
        (0, None, None, "set my_regime and my_lever"),
    ],
)
def test_check_regime_hints_name_the_rule_the_numbers_fall_under(capsys, step, my_regime, my_lever, hint):
    assert not cg.checks.regime(cg.recorded_steps()[step], my_regime, my_lever)
    assert hint in capsys.readouterr().out


def test_check_regime_a_conv_net_gets_the_conv_hint_for_fusion(capsys):
    conv = synthetic_steps(busy=0.95, kernel="cudnn::cnn::wgrad_alg0_engine")
    assert not cg.checks.regime(conv, "GPU-bound", "fusion")
    assert "matmuls and convolutions already run in cuBLAS and cuDNN" in capsys.readouterr().out


def test_check_regime_on_a_cpu_runtime_names_the_regime_and_says_the_gpu_levers_need_a_gpu(capsys):
    layer = torch.nn.Linear(32, 32)

    def step() -> int:
        layer(torch.randn(16, 32)).sum().backward()
        return 16

    assert cg.checks.regime(step, "CPU-bound", "GPU runtime", step, "cpu")
    assert "A GPU runtime cannot be measured from this one: rerun there, or apply a lever that pays here" in (
        capsys.readouterr().out
    )
    assert not cg.checks.regime(step, "launch-bound", "bigger batch", step, "cpu")
    assert "it ran on a CPU runtime" in capsys.readouterr().out


def test_check_regime_on_a_cpu_runtime_still_wants_my_step_to_return_its_samples(capsys):
    # Issue 62: on a CPU runtime the check never called my_step, so one that returned nothing passed.
    layer = torch.nn.Linear(32, 32)

    def step() -> int:
        layer(torch.randn(16, 32)).sum().backward()
        return 16

    def my_step_returns_nothing():
        step()

    assert not cg.checks.regime(step, "CPU-bound", "GPU runtime", my_step_returns_nothing, "cpu")
    assert "my_step() returned None: return how many samples it trained on" in capsys.readouterr().out
    assert not cg.checks.regime(step, "CPU-bound", "GPU runtime", lambda: 1 / 0, "cpu")
    assert "my_step() raised ZeroDivisionError" in capsys.readouterr().out


def test_check_regime_wants_the_lever_to_move_the_step_per_sample(monkeypatch, capsys):
    launch_bound = synthetic_steps(busy=0.3, launches=40)
    monkeypatch.setattr(cg.checks.regimes, "profile_step", lambda step, device: launch_bound)

    clock = types.SimpleNamespace(now=0.0)  # a simulated clock: a busy host's sleeps overshot (1.18x for no change)
    monkeypatch.setattr(cg.measure.timing, "time", types.SimpleNamespace(perf_counter=lambda: clock.now))

    def step(batch=64):
        clock.now += 2e-3  # the host's launches: the same whatever the batch
        return batch

    assert cg.checks.regime(step, "launch-bound", "bigger batch", lambda: step(256), "cpu")
    gain = float(re.search(r"'bigger batch' applied: ([\d.]+)x", capsys.readouterr().out).group(1))
    assert 3 < gain < 5  # about four times the samples in the same time
    assert not cg.checks.regime(step, "launch-bound", "bigger batch", step, "cpu")
    assert "under 1.1x. Is the lever applied? Now: launch-bound" in capsys.readouterr().out
    assert not cg.checks.regime(step, "launch-bound", "bigger batch", None, "cpu")
    assert "now write my_step" in capsys.readouterr().out


def test_profile_step_keeps_each_record_where_the_gpu_suite_asks(tmp_path, monkeypatch):
    kept = tmp_path / "profiles" / "10_profiler.jsonl"
    kept.parent.mkdir()
    monkeypatch.setenv(cg.measure.profiling.PROFILES_ENV, str(kept))
    layer = torch.nn.Linear(16, 16)

    def tiny_step():
        layer(torch.randn(4, 16)).sum().backward()

    summaries = [cg.profile_step(tiny_step, "cpu", steps=2) for _ in range(2)]
    entries = [json.loads(line) for line in kept.read_text().splitlines()]
    assert [e["step"] for e in entries] == [tiny_step.__qualname__] * 2 and entries[0]["device"] == "cpu"
    for entry, summary in zip(entries, summaries, strict=True):
        assert entry["regime"] == "CPU-bound" and ProfileSummary.from_record(entry["record"]) == summary


def gpu_run_profiles():
    """Every step a GPU run profiled, as imported with the run (reports/gpu/<run>/profiles/<lesson>.jsonl)."""
    for path in sorted(ROOT.glob("reports/gpu/*/profiles/*.jsonl")):
        for number, line in enumerate(path.read_text().splitlines()):
            yield pytest.param(json.loads(line), id=f"{path.parent.parent.name}/{path.stem}#{number}")


@pytest.mark.parametrize(
    "entry", list(gpu_run_profiles()) or [pytest.param(None, marks=pytest.mark.skip(reason="no GPU run profiles yet"))]
)
def test_every_step_a_gpu_run_profiled_gets_the_verdict_it_got_there(entry):
    """The regime rule replayed on real GPU profiles: a change of the rule that moves a verdict shows here."""
    summary = ProfileSummary.from_record(entry["record"])
    assert (summary.regime.name, summary.regime.kernels) == (entry["regime"], entry["kernels"]), entry["step"]


@pytest.mark.parametrize(
    ("gpu", "host", "kernel_ms", "kernels"),
    [  # the host's part longer than the GPU's, with the kernels the course's steps run (15-230 us each)
        ("issue 64's step: 3.6 ms of host, 30 kernels of 100 us", 3.6e-3, 3.0e-3, 30),
        ("T4-like, 200 kernels of 15 us", 3.6e-3, 3e-3, 200),
        ("H100-like, 10 kernels of 230 us", 2.5e-3, 2.3e-3, 10),
    ],
)
def test_a_host_limited_step_reads_launch_bound_whatever_its_busy_share(stream, gpu, host, kernel_ms, kernels):
    summary = stream.summary(host, kernel_ms, stretched_host=2 * host, kernels=kernels)
    assert summary.host_ms == pytest.approx(host * 1e3) and summary.kernel_ms == pytest.approx(kernel_ms * 1e3)
    assert summary.gpu_busy >= 0.8, gpu  # the fixed busy cut called these GPU-bound: a kernel lever measured 1.00x
    regime = summary.regime
    assert regime.name == "launch-bound", (gpu, str(regime))
    assert regime.lever_names[0] == "bigger batch" and "16-bit" in regime.useless_names
    assert f"host {cg.format_seconds(host)}" in regime.reason and "a kernel lever nothing" in regime.reason


def test_a_gpu_limited_step_reads_gpu_bound_and_says_when_the_host_is_close_behind(stream):
    far = stream.summary(1e-3, 5e-3, stretched_host=3e-3, kernels=20).regime
    assert far.name == "GPU-bound" and "close behind" not in far.reason
    close = stream.summary(4.4e-3, 5e-3, stretched_host=9e-3, kernels=20).regime
    assert close.name == "GPU-bound" and "the host is close behind: a faster kernel pays at most 1.14x" in close.reason


def test_a_synced_loop_is_named_by_the_host_work_its_reads_expose(stream):
    # Lesson 10 section 7's .item() loop on the H100: 2.83 ms of kernels in a 3.81 ms step. The host's 0.98 ms is
    # what the read exposes, not "the host's work takes longer than the kernels".
    item = stream.summary(0.98e-3, 2.83e-3, stretched_host=2e-3, read=True)
    assert item.step_ms == pytest.approx(3.81, abs=0.01) and item.host_reads_per_step == 1
    regime = item.regime
    assert regime.name == "GPU-bound", str(regime)
    assert "plus 980 µs of host work they expose" in regime.reason and "up to 1.3" in regime.reason
    assert regime.lever_names[0] == "fewer syncs"  # 1.35x to gain: worth trying first
    # a read per step after a long host part: the host's part is the larger, and the reads still come first
    launchy = stream.summary(5e-3, 1e-3, stretched_host=9e-3, read=True, kernels=20).regime
    assert launchy.name == "launch-bound" and launchy.lever_names[:2] == ("fewer syncs", "bigger batch")
    # a read that exposes little: removing it cannot pay, the kernel levers come first
    cheap = stream.summary(0.1e-3, 5e-3, stretched_host=0.3e-3, read=True, kernels=20).regime
    assert cheap.name == "GPU-bound" and cheap.lever_names[-1] == "fewer syncs"


def test_a_full_launch_queue_leaves_the_verdict_to_the_busy_share():
    # 300 launches x K=8 queued: past CUDA's queue the host waits for the GPU, and its time is the GPU's.
    summary = synthetic_steps(busy=0.97, launches=300, kernel="sgemm")
    filled = dataclasses.replace(summary, host_ms=summary.step_ms, steps_per_sample=8)
    assert filled.regime.name == "GPU-bound" and "the launch queue filled" in filled.regime.reason


def test_check_regime_takes_an_answer_whatever_its_case_spaces_and_hyphens(capsys):
    dataloader, cnn, _ = cg.recorded_steps()
    assert cg.checks.regime(dataloader, "Input bound", "Workers")
    assert cg.checks.regime(cnn, " launch_bound ", "Bigger-Batch")
    assert not cg.checks.regime(cnn, "launch-bound", 3)
    assert "my_lever is 3; answer one of 'workers'" in capsys.readouterr().out


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_a_step_already_in_16_bits_is_not_told_to_use_16_bits(precision):
    # Issue 64: an fp16 step was told "16-bit" first.
    step = synthetic_steps(
        busy=0.97, kernel="sgemm", flops_per_step=4e9, peak_tflops=60.0, peak_precision=precision, ops=(CONVOLUTION,)
    )
    regime = step.regime
    assert regime.name == "GPU-bound" and "16-bit" not in regime.lever_names and regime.lever_names[0] == "layouts"
    assert regime.why_useless("16-bit") == f"16-bit precision: the step already runs in {precision}"
    fp32 = synthetic_steps(busy=0.97, kernel="sgemm", flops_per_step=4e9, peak_tflops=60.0, peak_precision="fp32")
    assert fp32.regime.lever_names[0] == "16-bit"


def test_check_regime_wants_a_sample_count_from_both_sides_or_neither(monkeypatch, capsys):
    # Issue 64: a side that returned a count beat one that did not (its samples per second against calls per second).
    launch_bound = synthetic_steps(busy=0.3, launches=40)
    monkeypatch.setattr(cg.checks.regimes, "profile_step", lambda step, device: launch_bound)
    clock = types.SimpleNamespace(now=0.0)
    monkeypatch.setattr(cg.measure.timing, "time", types.SimpleNamespace(perf_counter=lambda: clock.now))

    def step(batch=64, count=True):
        clock.now += 2e-3
        return batch if count else None

    assert not cg.checks.regime(lambda: step(count=False), "launch-bound", "bigger batch", lambda: step(256), "cpu")
    out = capsys.readouterr().out
    assert "my_step returns how many samples it trained on, the step you improve returns None" in out
    assert not cg.checks.regime(step, "launch-bound", "bigger batch", lambda: step(256, count=False), "cpu")
    assert (
        "the step you improve returns how many samples it trained on, my_step returns None" in capsys.readouterr().out
    )
    assert cg.checks.regime(
        lambda: step(count=False),
        "launch-bound",
        "fused optimizer",
        lambda: clock.__setattr__("now", clock.now + 1e-3),
        "cpu",
    )


@pytest.fixture
def cpu_clock(monkeypatch):
    """compare_steps' clock made a simulated one (a busy host's sleeps overshoot): each step advances it."""
    clock = types.SimpleNamespace(now=0.0)
    monkeypatch.setattr(cg.measure.timing, "time", types.SimpleNamespace(perf_counter=lambda: clock.now))
    return clock


def cpu_training(clock, per_call=2e-3, per_sample=2e-6):
    """A step on a CPU runtime that really trains (its FLOPs are counted) and costs ``per_call`` plus ``per_sample``
    per sample on the simulated clock: Python's and the operators' fixed cost, and the math."""
    layer = torch.nn.Linear(16, 16)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.01)

    def step(batch=64):
        layer(torch.randn(batch, 16)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
        clock.now += per_call + batch * per_sample
        return batch

    return step


def test_on_a_cpu_runtime_a_bigger_batch_is_a_lever_and_my_step_is_measured(cpu_clock, capsys):
    # Issue 64: on a CPU runtime my_step never ran, and "bigger batch" was rejected though it trained 2-5x the
    # samples per second there.
    step = cpu_training(cpu_clock)
    assert cg.checks.regime(step, "CPU-bound", "bigger batch", lambda: step(1024), "cpu")
    out = capsys.readouterr().out
    gain = float(re.search(r"'bigger batch' applied: ([\d.]+)x", out).group(1))
    assert 8.3 < gain < 8.5 and "the same work per sample, measured on cpu" in out  # (1024 / 4.048) / (64 / 2.128)
    assert not cg.checks.regime(step, "CPU-bound", "bigger batch", step, "cpu")
    assert "under 1.1x. Is the lever applied? Now: CPU-bound" in capsys.readouterr().out
    assert "fused optimizer" in cg.profile_step(step, "cpu", steps=2).regime.lever_names


@pytest.mark.parametrize(
    ("fooling", "hint"),
    [  # issue 64: each of these passed
        ("does nothing", "my_step does 0 floating-point operations per sample, the step you improve 1,024"),
        ("trains every other call", "my_step does 512 floating-point operations per sample"),
        ("claims a bigger batch", "my_step does 64 floating-point operations per sample"),
        ("is 1000x faster", "no lever of lesson 10 makes this step 100 times faster. Does it skip the work"),
    ],
)
def test_check_regime_fails_a_my_step_that_does_not_do_the_work(cpu_clock, capsys, fooling, hint):
    step = cpu_training(cpu_clock)
    calls = []

    def my_step():
        calls.append(1)
        if fooling == "does nothing":
            cpu_clock.now += 1e-6
        elif fooling == "trains every other call" and len(calls) % 2:
            cpu_clock.now += 1e-6
        elif fooling == "claims a bigger batch":
            step(64)
            return 1024
        elif fooling == "is 1000x faster":
            step(64)
            cpu_clock.now -= (2e-3 + 64 * 2e-6) * 0.999
        else:
            step(64)
        return 64

    assert not cg.checks.regime(step, "CPU-bound", "bigger batch", my_step, "cpu")
    assert hint in capsys.readouterr().out, fooling


def test_the_thresholds_lesson_10_and_the_kit_retype_are_the_rules():
    # The rule's numbers live in the package (issue 68: one home); lesson 10 derives the regime by hand with them,
    # its summary table and the workshop kit quote them. A changed constant fails here until the texts follow.
    from colab_gpu.measure.profile_events import TINY_KERNEL_US
    from colab_gpu.measure.regimes import INPUT_BOUND_SHARE
    from colab_gpu.measure.step_parts import HOST_CLOSE, KERNEL_GAP_US

    lesson = (ROOT / "notebooks" / "10_profiler.py").read_text()
    kit = (ROOT / "docs" / "workshop.md").read_text()
    share, tiny = f"{INPUT_BOUND_SHARE:.0%}", f"{TINY_KERNEL_US:g} µs"
    for text, where in (
        (f'"data" takes >= {share} of the step', lesson),
        (f"if data_share >= {INPUT_BOUND_SHARE:g}:", lesson),  # the hand derivation's cell
        (f'"data" >= {share} of the step, GPU idle', lesson),  # the summary's table
        (f"from a host part at {HOST_CLOSE:.0%} of it", lesson),
        (f"about {KERNEL_GAP_US:g} µs between two queued kernels", lesson),
        (f"tiny kernels** under {tiny} each", lesson),
        (f"mostly kernels under {tiny}", lesson),
        (f"input-bound (data >= {share} while no kernel runs)", kit),
    ):
        assert text in where, f"{text!r} is not in {'lesson 10' if where is lesson else 'docs/workshop.md'}"
