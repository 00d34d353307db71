import json

import pytest
import torch

import colab_gpu as cg
from colab_gpu import bench
from colab_gpu.bench import experiments, hardware
from colab_gpu.cli import main
from colab_gpu.experiments import workloads

CPU = torch.device("cpu")


def test_fit_vs_hand_loop_measures_both_on_the_same_work():
    row = experiments.fit_vs_hand_loop(CPU, samples=512, epochs=2)
    assert row.key == "fit" and row.status == "ok" and row.ratio > 0
    assert row.details["fit_s"] > 0 and row.details["hand_loop_s"] > 0 and row.details["samples"] == 512
    assert "per epoch vs the hand loop" in row.note


def test_gpu_rows_are_skipped_on_cpu_with_the_reason():
    rows = hardware.cpu_vs_gpu_rows(CPU) + hardware.amp_rows(CPU) + [hardware.host_to_device(CPU)]
    assert [r.key for r in rows] == ["mlp_cpu_gpu", "mlp_big_cpu_gpu", "cnn_cpu_gpu", "amp", "amp_peak", "h2d"]
    assert all(r.status == "skipped" and "needs a CUDA GPU" in r.note and r.ratio is None for r in rows)


def test_matmul_rows_on_cpu(monkeypatch):
    monkeypatch.setattr(hardware, "matmul_tflops", lambda n, dtype, device, repeat=10: n / 1000)
    rows = hardware.matmul_rows(CPU)
    assert rows[0].key == "matmul_fp32" and rows[0].ratio == 1.024 and rows[0].status == "ok"
    assert [r.status for r in rows[1:]] == ["skipped", "skipped"]


def test_matmul_tflops_is_measured():
    assert cg.measure.timing.matmul_tflops(64, torch.float32, CPU, repeat=2) > 0


def test_time_train_step_on_cpu():
    model = cg.mlp(16, hidden=8)
    timing, peak = cg.time_train_step(model, torch.randn(4, 16), torch.randint(0, 10, (4,)), precision="bf16", repeat=2)
    assert timing.median > 0 and peak is None and not cg.tf32_enabled()


def test_conv_step_is_timed_in_a_fresh_process_with_the_asked_settings():
    before = torch.backends.cudnn.benchmark
    timing = cg.time_conv_step_fresh(
        CPU, width=4, shape=(4, 3, 16, 16), channels_last=True, cudnn_benchmark=True, repeat=3
    )
    assert len(timing.steady.times) == 7 and timing.steady.median > 0 and timing.first_step_s > 0  # 7 at least
    assert timing.steady.steps_per_sample >= 1  # K steps between two synchronizations, as compare_steps times
    assert torch.backends.cudnn.benchmark == before  # the flag was set in the child, not here


def test_conv_step_child_applies_layout_and_flag(monkeypatch):
    # The child's body, run here: cuDNN flag set, model and inputs in channels_last.
    seen = {}
    real_step = workloads.train_step

    def spy(model, inputs, labels, optimizer, **kwargs):
        seen.update(flag=torch.backends.cudnn.benchmark, last=inputs.is_contiguous(memory_format=torch.channels_last))
        return real_step(model, inputs, labels, optimizer, **kwargs)

    monkeypatch.setattr(workloads, "train_step", spy)
    with cg.restored_backend_settings():
        first, times, k = workloads._conv_step_child("cpu", 4, (2, 3, 16, 16), 10, True, True, 2)
    assert seen == {"flag": True, "last": True} and first > 0 and len(times) == 7 and k >= 1


def test_targets_judge_the_measured_value_and_say_why():
    at_least, at_most = bench.Target("x", "y", at_least=2), bench.Target("x", "y", at_most=1.1)
    assert at_least.met(2) and not at_least.met(1.99) and at_most.met(1.1) and not at_most.met(1.2)
    experiment_rows = {
        "cpu_gpu": ["mlp_cpu_gpu", "mlp_big_cpu_gpu", "cnn_cpu_gpu"],
        "amp": ["amp", "amp_peak"],
        "resident": ["resident", "resident_epoch"],
        "fit": ["fit"],
        "speedrun": ["speedrun"],
        "compile": ["compile", "compile_graphs"],
        "attention": ["attention", "attention_memory"],
        "fsdp_memory": ["fsdp_memory"],
        "qlora_memory": ["qlora_memory"],
    }
    for name, experiment in bench.EXPERIMENTS.items():  # a target names a row its own experiment makes
        assert set(experiment.targets) <= set(experiment_rows.get(name, [])), name
        for key in experiment.targets:
            assert all(t.reason and (t.at_least is not None or t.at_most is not None) for t in bench.TARGETS[key])


def test_a_target_judges_the_gpus_it_names_and_a_t4_prediction_says_so():
    """Issue 50: the speedrun's 20x is an H100/A100 figure; a T4 run is judged against the T4's prediction."""
    from colab_gpu.bench.rows import target_for

    h100 = target_for(bench.TARGETS["speedrun"], "NVIDIA H100 80GB HBM3")
    t4 = target_for(bench.TARGETS["speedrun"], "Tesla T4")
    assert h100.at_least == 20 and "prediction" not in h100.promise
    assert t4.at_least == 5 and "(prediction: t4 12.ladder_gain)" in t4.promise
    assert target_for(bench.TARGETS["speedrun"], "NVIDIA L4") is None  # no promise the course has not reasoned
    assert target_for(bench.TARGETS["fit"], "NVIDIA L4").at_most == 1.10  # a target for every GPU


def test_run_benchmarks_judges_targets_only_on_a_gpu(monkeypatch):
    row = bench.Row("fit", "fit", "cpu", "ok", 1.5, "x")
    monkeypatch.setitem(
        bench.EXPERIMENTS,
        "fit",
        bench.Experiment(lambda device: bench.Row(**vars(row)), bench.EXPERIMENTS["fit"].targets),
    )
    on_cpu = bench.run_benchmarks(CPU, ["fit"])[0]
    assert on_cpu.target and on_cpu.met is None
    on_gpu = bench.run_benchmarks(torch.device("cuda"), ["fit"])[0]  # the row is canned: nothing runs on cuda
    assert on_gpu.met is False  # 1.5x is more than 10% over the hand loop


def test_lessons_and_bench_share_the_experiment_functions():
    rates = cg.sweep_workers(cg.data.datasets.fake_image_data(64, (1, 8, 8)), CPU, [0], batch_size=16)
    assert set(rates) == {0} and rates[0] > 0
    loader = cg.DeviceLoader(torch.randn(64, 784), torch.randint(0, 10, (64,)), batch_size=32, device="cpu")
    assert cg.time_loader_epochs({"resident": loader}, CPU)["resident"].median > 0
    timing, peak = workloads.time_step(workloads.amp_workloads(CPU)["CNN"], CPU, "fp32", channels_last=True)
    assert timing.median > 0 and peak is None  # the allocator peak is a GPU figure
    assert workloads.amp_workloads(torch.device("cuda"))["MLP"].shape == (8192, 1024)  # the AMP row's workload


def test_the_workers_row_reports_the_advice_it_measured(monkeypatch):
    monkeypatch.setattr(experiments, "cpu_count", lambda: 1)
    row = experiments.workers_sweep(CPU, images=128, batch_size=8)
    assert row.key == "workers" and set(row.details["samples_per_s"]) == {0, 1, 2}
    rates, best = row.details["samples_per_s"], row.details["best_workers"]
    assert row.note.startswith(f"num_workers={best}: measured here") and row.ratio == round(rates[best] / rates[0], 2)
    assert row.details["batches_timed"] == {0: 20, 1: 20, 2: 20}  # ten per worker, at least 20


def test_the_resident_rows_put_the_target_on_delivery_and_bound_the_epoch(monkeypatch):
    monkeypatch.setattr(experiments, "fake_image_data", lambda n, shape: cg.data.datasets.fake_image_data(512, shape))
    delivery, epoch = experiments.resident_vs_dataloader(CPU)
    assert delivery.key == "resident" and delivery.status == "ok" and delivery.ratio > 0
    assert delivery.details["DeviceLoader_batches_per_s"] > 0 and bench.TARGETS["resident"][0].at_least == 5
    assert epoch.key == "resident_epoch" and epoch.key not in bench.TARGETS and epoch.details["dataloader_s"] > 0
    details = epoch.details
    assert details["bound"] == round(details["dataloader_s"] / details["steps_alone_s"], 2)  # (load + train) / train
    assert details["spread"] >= 0 and "medians of 7 interleaved epochs each" in epoch.note
    assert f"(load + train) / train = {details['bound']:.2f}x" in epoch.note


def test_loader_epochs_take_turns_and_give_each_loader_seven_epochs(monkeypatch):
    """Issue 50: the bound took the smaller of two noisy timings of the same cost; now the epochs interleave."""
    from colab_gpu.experiments import feeding

    order = []
    monkeypatch.setattr(feeding, "_one_epoch", lambda model, loader, optimizer, device: order.append(loader[0]))
    timings = cg.time_loader_epochs({"a": ["a"], "b": ["b"]}, CPU)
    assert [len(t.times) for t in timings.values()] == [7, 7]
    assert order[:6] == ["a", "b", "a", "b", "b", "a"]  # a warm-up epoch each, then turns, reversed every other round


def test_gpu_rows_time_a_short_step_k_at_a_time_and_name_its_regime():
    timing, summary = hardware.timed_step(workloads.TINY_STEP, CPU)
    assert len(timing.times) >= 7 and timing.steps_per_sample >= 1 and summary is None  # no regime without a GPU
    assert hardware.BIG_MLP_STEP.shape == (2048, 1024)
    params = sum(p.numel() for p in hardware.BIG_MLP_STEP.make_model().parameters())
    assert 6 * params * 2048 > 50e9  # compute-bound: tens of GFLOP per step, against lesson 03's MLP's 1
    assert bench.TARGETS["mlp_big_cpu_gpu"][0].at_least == 10 and "mlp_cpu_gpu" not in bench.TARGETS


def test_unknown_benchmark_names_what_exists():
    said = r"Unknown benchmark\(s\) \['nope'\]; available: \['amp', 'attention', 'compile'"
    with pytest.raises(ValueError, match=said):
        bench.run_benchmarks(CPU, ["nope"])


def test_cli_bench_writes_json_markdown_and_plot(tmp_path, monkeypatch, capsys):
    fast = bench.EXPERIMENTS["fit"]
    quick = bench.Experiment(lambda device: fast.run(device, samples=256, epochs=1), fast.targets)
    monkeypatch.setitem(bench.EXPERIMENTS, "fit", quick)
    assert main(["bench", "--device", "cpu", "--only", "fit", "amp", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "bench.json").read_text())
    assert [r["key"] for r in result["rows"]] == ["fit", "amp", "amp_peak"] and "runtime" in result
    assert result["rows"][1]["status"] == "skipped" and result["rows"][1]["note"]
    markdown = (tmp_path / "bench.md").read_text()
    assert "| fit vs hand loop" in markdown and "skipped" in markdown
    # The target travels with its row; a CPU run shows the promise but does not judge it
    assert result["rows"][0]["target"] == bench.TARGETS["fit"][0].promise and result["rows"][0]["met"] is None
    assert "| fit within 10% of a minimal hand loop |" in markdown
    assert (tmp_path / "bench.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_bench_bad_input_is_a_clear_error(tmp_path, capsys):
    assert main(["bench", "--device", "gpu", "--out", str(tmp_path)]) == 2
    assert "given the device name 'gpu', which PyTorch does not know" in capsys.readouterr().err
    assert main(["bench", "--only", "nope", "--out", str(tmp_path)]) == 2


@pytest.mark.gpu
def test_gpu_rows_measure_on_a_real_gpu():
    device = cg.get_device("cuda")
    rows = hardware.cpu_vs_gpu_rows(device) + [hardware.host_to_device(device)]
    assert all(r.status == "ok" and r.ratio > 0 for r in rows)
    assert all(r.details["gpu_regime"] in r.note for r in rows[:3])  # each GPU-vs-CPU row names its regime


def test_time_train_epoch_trains_and_times():
    loader = cg.DeviceLoader(torch.randn(64, 8), torch.randint(0, 10, (64,)), batch_size=16, device="cpu")
    model = cg.mlp(8, hidden=8)
    before = [p.detach().clone() for p in model.parameters()]
    result = cg.time_train_epoch(model, loader, "cpu", repeat=2)
    assert len(result.times) == 2 and result.median > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_the_attention_rows_compare_the_same_output_by_hand_and_fused():
    from colab_gpu.bench import transformers

    time_row, memory_row = transformers.attention_rows(CPU)
    assert time_row.key == "attention" and time_row.status == "ok" and time_row.ratio > 0
    assert time_row.details["length"] == 1024 and time_row.details["backend"] == "flash"  # the CPU's flash kernel
    assert time_row.details["steps_per_sample"] >= 1  # timed K calls at a time, the two sides interleaved
    assert memory_row.key == "attention_memory" and memory_row.status == "skipped"  # peak memory: a GPU's figure
    assert bench.TARGETS["attention_memory"][0].at_least == 8


def test_the_generation_row_generates_the_same_tokens_both_ways():
    from colab_gpu.bench import transformers

    row = transformers.generation_row(CPU)
    assert row.key == "generation" and row.status == "ok" and row.details["same_tokens"] and not row.note
    assert row.details["cached_tokens_per_s"] > 0 and row.details["new_tokens"] == 16
    # each step without the cache runs the model on the whole sequence so far: 128 to 143 tokens, 135.5 on average
    assert row.details["work_ratio"] == 135.5 and row.details["batch"] == 4
    assert "generation" in bench.EXPERIMENTS


def test_compile_targets_name_the_regime_their_mechanism_needs():
    fusion, graphs = bench.TARGETS["compile"][0], bench.TARGETS["compile_graphs"][0]
    assert "GPU-bound" in fusion.promise and "fuses" in fusion.reason and fusion.at_least == 1.3
    assert "launch-bound" in graphs.promise and "one launch" in graphs.reason and graphs.at_least == 0.95
    assert "stay eager" in graphs.reason and "11.graphs_speedup_mlp" in graphs.reason  # the measured reason: no 2x


def test_the_fsdp_row_finds_each_process_holding_half_of_what_ddp_holds():
    from colab_gpu.bench import sharding

    row = sharding.fsdp_memory_row(CPU)  # two CPU processes over gloo
    assert row.key == "fsdp_memory" and row.status == "ok" and row.details["backend"] == "gloo"
    assert 1.8 <= row.ratio <= 2.0  # half of every weight, gradient and moment, less the shards' padding
    assert bench.TARGETS["fsdp_memory"][0].met(row.ratio)


def test_the_fsdp_row_trains_the_decoder_lesson_15_writes():
    # The bench's row stands for lesson 15's measurement: the same decoder, whose shape the lesson writes out for the
    # learner in its script (decoder_task.py). A changed shape on one side fails here until the other follows.
    import dataclasses
    import re
    from pathlib import Path

    from colab_gpu.bench import sharding_worker
    from colab_gpu.llm.llm_memory import ModelShape

    lesson = (Path(__file__).resolve().parents[1] / "notebooks" / "15_past_one_gpu.py").read_text()
    written = re.search(r'^SHAPE = ModelShape\("small decoder", (.*?)\)$', lesson, re.MULTILINE | re.DOTALL)
    assert written, 'lesson 15 no longer writes SHAPE = ModelShape("small decoder", ...)'
    fields = {name: int(value) for name, value in re.findall(r"(\w+)=(\d+)", written.group(1))}
    assert dataclasses.replace(sharding_worker.SHAPE, name="small decoder") == ModelShape("small decoder", **fields)


def test_the_qlora_row_compares_the_ledgers_of_the_same_model():
    from colab_gpu.bench import sharding

    row = sharding.qlora_memory_row(CPU)
    assert row.key == "qlora_memory" and row.status == "ok", row.note
    full, qlora = row.details["full_parts_mib"], row.details["qlora_parts_mib"]
    assert full["gradients"] == full["weights"] and qlora["gradients"] < full["gradients"] / 50  # adapters only
    assert row.ratio >= bench.TARGETS["qlora_memory"][0].at_least and "full_peak_mib" not in row.details
