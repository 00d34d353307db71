import json

import pytest
import torch

from colab_gpu import bench
from colab_gpu.cli import main


def test_fit_vs_hand_loop_measures_both_on_the_same_work():
    row = bench.fit_vs_hand_loop(torch.device("cpu"), samples=512, epochs=2)
    assert row.status == "ok" and row.ratio > 0
    assert row.details["fit_s"] > 0 and row.details["hand_loop_s"] > 0 and row.details["samples"] == 512
    assert "per epoch vs the hand loop" in row.note


def test_unknown_benchmark_names_what_exists():
    with pytest.raises(ValueError, match=r"Unknown benchmark\(s\) \['nope'\]; available: \['fit'\]"):
        bench.run_benchmarks(torch.device("cpu"), ["nope"])


def test_cli_bench_writes_json_and_markdown(tmp_path, monkeypatch, capsys):
    fast = bench.BENCHMARKS["fit"]
    monkeypatch.setitem(bench.BENCHMARKS, "fit", lambda device: fast(device, samples=256, epochs=1))
    assert main(["bench", "--device", "cpu", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "bench.json").read_text())
    assert result["rows"][0]["name"].startswith("fit vs hand loop") and "runtime" in result
    assert "| fit vs hand loop" in (tmp_path / "bench.md").read_text()


def test_cli_bench_bad_input_is_a_clear_error(tmp_path, capsys):
    assert main(["bench", "--device", "gpu", "--out", str(tmp_path)]) == 2
    assert "Unknown device name 'gpu'" in capsys.readouterr().err
    assert main(["bench", "--only", "nope", "--out", str(tmp_path)]) == 2
