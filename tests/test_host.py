"""The host beside the GPU (issue 50): recorded with every GPU run, and compared with a learner's for the launch-bound
figures, which follow the CPU that launches the kernels (lesson 12's rung 4: 0.37 s an epoch on one H100 node,
0.58 s on another)."""

import json

import torch

import colab_gpu as cg
from colab_gpu.measure import host, references

CPU = torch.device("cpu")


def test_the_host_record_names_the_cpu_and_measures_dispatch():
    record = host.host_record(CPU)
    assert record["cpu_model"] and record["cores"] == cg.cpu_count() and record["device"] == "cpu"
    assert 0 < record["empty_op_us"] < record["linear_step_us"]  # a training step costs more than an empty op


def test_compare_hosts_says_slower_faster_or_about_the_same():
    reference = {"linear_step_us": 40.0, "cpu_model": "Intel Xeon Platinum 8480+"}
    assert "2.0x slower than the H100 run's host (40 µs, Intel Xeon" in host.compare_hosts(
        {"linear_step_us": 80.0}, reference, "H100"
    )
    assert "2.0x faster than" in host.compare_hosts({"linear_step_us": 20.0}, reference, "H100")
    assert "about as fast as" in host.compare_hosts({"linear_step_us": 45.0}, reference, "H100")


def test_a_host_bound_figure_compares_this_host_with_each_reference_runs_host(monkeypatch):
    shipped = {
        "figures": {"04.x": {"H100": 24.6, "T4": 9.0}},
        "sources": {"04.x": {"H100": "2026-12-02-h100", "T4": "2026-12-03-t4"}},
        "hosts": {"2026-12-02-h100": {"linear_step_us": 1.0, "cpu_model": "Xeon"}},  # the T4 run recorded none
    }
    monkeypatch.setattr(references, "_shipped", lambda: json.loads(json.dumps(shipped)))
    notes = references.host_notes("04.x", CPU)
    assert "slower than the H100 run's host (1 µs, Xeon)" in notes[0]
    assert notes[1].startswith("the T4 run's host was not recorded")
    assert references.host_notes("05.not_shipped", CPU) == []


def test_doctor_json_records_the_host(capsys):
    from colab_gpu import cli

    assert cli.doctor(as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["host"]["device"] == "cpu" and report["host"]["linear_step_us"] > 0
    assert report["cpu_model"] == report["host"]["cpu_model"]


def test_a_gpu_that_cannot_run_the_probe_leaves_a_record_that_says_why(monkeypatch, fake_gpus):
    fake_gpus()

    def broken(device):
        raise RuntimeError("CUDA error: no kernel image is available for execution on the device\nmore")

    monkeypatch.setattr(host, "dispatch_probe", broken)
    record = host.host_record("cuda:0")
    assert record["probe_error"] == "CUDA error: no kernel image is available for execution on the device"
    assert "linear_step_us" not in record and record["cpu_model"]
