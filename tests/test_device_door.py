"""One door for ``device``: every public function that takes a device gives each mistake the same words.

The words are `checked_device`'s, with the helper's own name: "gpu" (PyTorch says "cuda"), "cuda" on a runtime
without a GPU, "cuda:3" on a machine with one GPU (as a string or a torch.device), a device the course does not use
("mps") and a number instead of a name. The table below must name every public function with a ``device``
parameter (a new one fails `test_every_public_function_that_takes_a_device_is_in_the_table`).
"""

from __future__ import annotations

import inspect

import pytest
import torch
from torch import nn

import colab_gpu as cg
from colab_gpu.checks.core import HINT, CheckResult
from colab_gpu.data.datasets import ImageData
from colab_gpu.experiments import workloads
from colab_gpu.hardware.device import DEVICE_MISTAKES, DeviceNotAvailableError, checked_device
from colab_gpu.llm import tiny_lm
from colab_gpu.measure import host


def _model():
    return nn.Linear(4, 2)


def _batches():
    return [(torch.randn(8, 4), torch.randint(0, 2, (8,)))]


def _data():
    images = torch.zeros(8, 1, 8, 8, dtype=torch.uint8)
    labels = torch.zeros(8, dtype=torch.long)
    return ImageData("tiny", images, labels, images, labels, ("a", "b"))


def _sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def _dataset():
    return torch.utils.data.TensorDataset(torch.randn(8, 4), torch.zeros(8, dtype=torch.long))


def _step():
    return torch.ones(2) + 1


def _fit(device):
    model = _model()
    return cg.fit(model, _batches(), None, _sgd(model), device, epochs=1, progress=False, verbose=False)


def _train_epoch(device):
    model = _model()
    return cg.train_epoch(model, _batches(), _sgd(model), device, progress=False)


def _profile_training_steps(device):
    model = _model()
    return cg.profile_training_steps(model, _batches(), _sgd(model), device, steps=1)


def _train_loop_check(device):
    return cg.checks.train_loop(lambda *a: None, _model(), _batches(), device)


#: helper's name in its messages -> a call of it with everything right except ``device``.
CALLS = {
    "cg.get_device": lambda d: cg.get_device(d),
    "cg.DeviceLoader": lambda d: cg.DeviceLoader(torch.randn(8, 4), torch.zeros(8), 4, device=d),
    "cg.allocator_settings": lambda d: cg.allocator_settings(d),
    "cg.benchmark": lambda d: cg.benchmark(_step, device=d),
    "cg.choose_precision": lambda d: cg.choose_precision(d),
    "cg.cleanup": lambda d: cg.cleanup(d, notebook=False),
    "cg.compare_steps": lambda d: cg.compare_steps({"a": _step}, device=d),
    "cg.compare_with_references": lambda d: cg.compare_with_references("gpu_vs_cpu", 2.0, d, what="a speed-up"),
    "cg.compile_model": lambda d: cg.compile_model(_model(), d, verbose=False),
    "cg.compile_support": lambda d: cg.compile_support(d),
    "cg.copy_bandwidth": lambda d: cg.copy_bandwidth(1, d, pinned=False, repeat=1),
    "cg.copy_gbps": lambda d: cg.copy_gbps(d, megabytes=1, repeat=1),
    "cg.decode_jpegs": lambda d: cg.decode_jpegs([], d),
    "cg.evaluate": lambda d: cg.evaluate(_model(), _batches(), d),
    "cg.find_max_batch_size": lambda d: cg.find_max_batch_size(lambda n: torch.randn(n), d, limit=4),
    "cg.fit": _fit,
    "cg.format_memory": lambda d: cg.format_memory(d),
    "cg.load_language_model": lambda d: cg.load_language_model("tiny", dtype=torch.float32, device=d),
    "cg.make_loaders": lambda d: cg.make_loaders(_data(), 4, device=d),
    "cg.measure_loader": lambda d: cg.measure_loader(_batches(), d),
    "cg.measure_peak": lambda d: cg.measure_peak(d).__enter__(),
    "cg.predict": lambda d: cg.predict(_model(), _batches(), d),
    "cg.profile_step": lambda d: cg.profile_step(_step, d, steps=1),
    "cg.profile_training_steps": _profile_training_steps,
    "cg.run_ladder": lambda d: cg.run_ladder(_data(), d, epochs=1, verbose=False),
    "cg.speedrun": lambda d: cg.speedrun(_data(), d, epochs=1, verbose=False),
    "cg.sweep_workers": lambda d: cg.sweep_workers(_dataset(), d, [0]),
    "cg.synchronize": lambda d: cg.synchronize(d),
    "cg.time_conv_step_fresh": lambda d: cg.time_conv_step_fresh(d, width=2, shape=(1, 1, 8, 8), repeat=1),
    "cg.time_loader_epochs": lambda d: cg.time_loader_epochs({"a": _batches()}, d, rounds=1),
    "cg.time_train_epoch": lambda d: cg.time_train_epoch(_model(), _batches(), d, repeat=1),
    "cg.train_epoch": _train_epoch,
    "cg.worker_loader": lambda d: cg.worker_loader(_dataset(), 4, device=d),
    "colab_gpu.measure.host.host_record": lambda d: host.host_record(d),
    "colab_gpu.llm.tiny_lm.sdpa_groups_heads": lambda d: tiny_lm.sdpa_groups_heads(d, torch.float32, 8),
    "cg.workloads.matmul_peak": lambda d: workloads.matmul_peak(d),
    "cg.checks.amp_step": lambda d: cg.checks.amp_step(lambda: None, d),
    "cg.checks.bottleneck_fix": lambda d: cg.checks.bottleneck_fix(_step, _step, d),
    "cg.checks.compiles_once": lambda d: cg.checks.compiles_once(_model(), _batches(), d),
    "cg.checks.fast_loop": lambda d: cg.checks.fast_loop(lambda *a: None, _data(), d),
    "cg.checks.loader_settings": lambda d: cg.checks.loader_settings(_batches(), d),
    "cg.checks.loader_speed": lambda d: cg.checks.loader_speed(_batches(), _batches(), d, samples=8),
    "cg.checks.lora_linear": lambda d: cg.checks.lora_linear(nn.Linear, d),
    "cg.checks.on_device": lambda d: cg.checks.on_device(torch.ones(1), d),
    "cg.checks.prediction_speed": lambda d: cg.checks.prediction_speed(
        lambda *a: None, lambda *a: None, _model(), torch.randn(8, 4), d
    ),
    "cg.checks.regime": lambda d: cg.checks.regime(None, "GPU-bound", "fewer syncs", None, d),
    "cg.checks.timer": lambda d: cg.checks.timer(lambda *a: 0.0, _step, 0.001, d),
    "cg.checks.train_loop": _train_loop_check,
}

#: Public functions with a ``device`` parameter that are not a door: they take a device the package already checked.
NOT_A_DOOR = {
    "DistInfo": "a record of what init_distributed chose, built by the package",
}


def _public_functions_with_a_device():
    names = {}
    for prefix, module in (("cg", cg), ("cg.checks", cg.checks)):
        for name in module.__all__:
            obj = getattr(module, name)
            try:
                parameters = inspect.signature(obj).parameters
            except (TypeError, ValueError):
                continue
            if "device" in parameters and name not in NOT_A_DOOR:
                names[f"{prefix}.{name}"] = obj
    return names


def test_every_public_function_that_takes_a_device_is_in_the_table():
    missing = sorted(set(_public_functions_with_a_device()) - set(CALLS))
    assert not missing, f"add these to CALLS (or NOT_A_DOOR with the reason): {missing}"


def _words(call, device) -> tuple[type, str]:
    """The error ``call(device)`` raises, as (type, message); a self-check's hint instead (a check never raises:
    it shows the door's words after its mark), as (the door's type, the hint without the mark)."""
    try:
        result = call(device)
    except Exception as err:  # noqa: BLE001 - the type is compared with the door's
        return type(err), str(err)
    assert isinstance(result, CheckResult) and not result, f"{call} accepted device={device!r}"
    assert result.message.startswith(HINT + " ")
    return _door_type_of(device), result.message[len(HINT) + 1 :]


def _door(helper, device) -> tuple[type, str]:
    with pytest.raises(DEVICE_MISTAKES) as caught:
        checked_device(device, helper)
    return caught.type, str(caught.value)


def _door_type_of(device) -> type:
    return _door("a helper", device)[0]


MISTAKES = {
    "gpu for cuda": "gpu",
    "a device the course does not use": "mps",
    "a number for a name": 0,
}


@pytest.mark.parametrize("helper", sorted(CALLS))
@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_a_wrong_device_name_gets_the_doors_words_in_every_helper(helper, mistake):
    assert _words(CALLS[helper], MISTAKES[mistake]) == _door(helper, MISTAKES[mistake])


@pytest.mark.parametrize("helper", sorted(CALLS))
def test_cuda_on_a_runtime_without_a_gpu_gets_the_doors_words_in_every_helper(helper, no_gpu):
    expected = _door(helper, "cuda")
    assert expected[0] is DeviceNotAvailableError and "has no GPU" in expected[1]
    assert _words(CALLS[helper], "cuda") == expected


@pytest.mark.parametrize("helper", sorted(CALLS))
@pytest.mark.parametrize("device", ["cuda:3", torch.device("cuda", 3)], ids=["string", "torch.device"])
def test_a_gpu_index_this_machine_lacks_gets_the_doors_words_in_every_helper(helper, device, fake_gpus):
    fake_gpus()  # one T4
    expected = _door(helper, "cuda:3")
    assert expected[0] is DeviceNotAvailableError and "only has 1 GPU" in expected[1]
    assert _words(CALLS[helper], device) == expected


def test_the_doors_words_say_what_was_asked_what_exists_and_how_to_fix_it(no_gpu):
    kind, words = _door("cg.benchmark", "gpu")
    assert issubclass(kind, ValueError)
    assert "cg.benchmark was given the device name 'gpu'" in words and "PyTorch calls an NVIDIA GPU 'cuda'" in words
    assert "available here: cpu" in words
    kind, words = _door("cg.fit", "cuda")
    assert "cg.fit was asked for cuda, but this runtime has no GPU" in words
    assert "Runtime > Change runtime type" in words
    kind, words = _door("cg.fit", 0)
    assert issubclass(kind, TypeError) and "For GPU number 0, use 'cuda:0'" in words


def test_the_door_gives_a_gpu_its_index_and_the_cpu_as_it_is(fake_gpus):
    fake_gpus()
    assert checked_device("cuda", "cg.fit") == torch.device("cuda", 0)
    assert checked_device(torch.device("cuda", 0), "cg.fit") == torch.device("cuda", 0)
    assert checked_device(" CPU ", "cg.fit") == torch.device("cpu")
