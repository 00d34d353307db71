"""Levers for the step at hand (issue 64): the input wait against the step timed without the profiler, the input
levers' order on a host of few cores, and each lever offered only to a step that has what it needs (an optimizer's
step, convolutions, augmentation), each found in a real CPU profile too."""

import json

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import colab_gpu as cg
from colab_gpu.measure import levers
from colab_gpu.measure.profile_events import AUGMENTATION, CONVOLUTIONS, GROWN, HIDDEN_INPUT, OPTIMIZER, Span
from colab_gpu.measure.profile_summary import summarize_spans

from .test_profiling import CONVOLUTION, OPTIMIZER_STEP, synthetic_steps


def loader_steps(profiled_us, wait_us, kernel_us, unprofiled_us, count=3, loader="_SingleProcessDataLoaderIter"):
    """``count`` unlabelled steps of ``profiled_us``: the DataLoader's own span over the first ``wait_us`` (the GPU
    idle), then ``kernel_us`` of kernels, summarized against the step timed without the profiler."""
    spans = []
    for i in range(count):
        t0 = i * profiled_us
        spans += [
            Span("ProfilerStep*", False, t0, t0 + profiled_us),
            Span(f"enumerate(DataLoader)#{loader}.__next__", False, t0, t0 + wait_us),
            Span("cudaLaunchKernel", False, t0 + wait_us, t0 + wait_us + 1),
            Span("sgemm", True, t0 + wait_us + 1, t0 + wait_us + 1 + kernel_us),
            Span(OPTIMIZER_STEP, False, t0 + wait_us + 2, t0 + wait_us + 3),
        ]
    return summarize_spans(spans, unprofiled_step_ms=unprofiled_us / 1e3)


def test_the_input_wait_is_against_the_unprofiled_step_and_never_longer_than_the_gpu_idles():
    # Issue 64: "input-bound: waits 30% ... busy 98% of it". The profiler stretched the fetching, not the kernels.
    stretched = loader_steps(profiled_us=1000, wait_us=300, kernel_us=700, unprofiled_us=714)
    assert stretched.gpu_busy == pytest.approx(0.98, abs=0.01)
    assert stretched.input_wait == pytest.approx(1 - stretched.gpu_busy) and stretched.regime.name == "GPU-bound"
    waiting = loader_steps(profiled_us=1000, wait_us=450, kernel_us=300, unprofiled_us=800)
    assert waiting.input_wait == pytest.approx(450 / 800) and waiting.gpu_busy == pytest.approx(300 / 800)
    regime = waiting.regime
    assert regime.name == "input-bound" and "waits 56% of each 800 µs step for the next batch (busy 37%" in str(regime)
    assert "(read from the DataLoader's own span)" in waiting.measurements()


def test_a_step_with_no_data_phase_says_its_wait_for_data_was_not_measured():
    summary = synthetic_steps(busy=0.5)
    assert summary.input_from is None
    assert "no 'data' label and no DataLoader in the step: its wait for data was not measured" in str(summary)
    assert "read from the 'data' label" in str(synthetic_steps(busy=0.5, data=0.2))


@pytest.mark.parametrize(("cores", "first"), [(1, "data on the GPU"), (2, "data on the GPU"), (8, "workers")])
def test_with_two_cores_or_fewer_the_data_on_the_gpu_comes_before_more_workers(cores, first):
    regime = synthetic_steps(data=0.45, busy=0.3, host_cores=cores).regime
    assert regime.name == "input-bound" and regime.lever_names[0] == first
    assert (f"more workers gain at most {cores}x (on Colab's 2 vCPUs" in regime.reason) == (cores <= 2)
    assert synthetic_steps(data=0.45, busy=0.3).regime.lever_names[0] == "workers"  # cores not recorded


def test_no_optimizer_lever_without_an_optimizer_step():
    # Issue 64: a decode step (inference) was told "fused optimizer".
    training = synthetic_steps(busy=0.3, launches=40).regime
    assert "fused optimizer" in training.lever_names
    inference = synthetic_steps(busy=0.3, launches=40, ops=()).regime
    assert inference.name == "launch-bound" and "fused optimizer" not in inference.lever_names
    assert inference.why_useless("fused optimizer") == "a fused or foreach optimizer: this step runs no optimizer step"
    chain = synthetic_steps(busy=0.95, kernel="vectorized_elementwise_kernel", ops=()).regime
    assert chain.kernels == cg.measure.profile_events.ELEMENTWISE and "fused optimizer" not in chain.lever_names


def test_layouts_only_for_a_step_with_convolutions():
    # Issue 64: the check accepted "layouts" for a pure-matmul MLP.
    mlp = synthetic_steps(busy=0.95, kernel="sgemm").regime
    assert mlp.name == "GPU-bound" and mlp.lever_names == ("16-bit",)
    assert mlp.why_useless("layouts") == "channels_last and cudnn.benchmark: this step runs no convolution"
    cnn = synthetic_steps(busy=0.95, kernel="sgemm", ops=(OPTIMIZER_STEP, CONVOLUTION)).regime
    assert cnn.lever_names == ("16-bit", "layouts")


def test_augmentation_on_the_gpu_only_where_the_data_phase_augments_or_workers_hide_it():
    # Issue 64: the check accepted "augment on the GPU" for a step with no augmentation.
    plain = synthetic_steps(data=0.45, busy=0.3).regime
    assert "augment on the GPU" not in plain.lever_names
    assert plain.why_useless("augment on the GPU") == "augmentation on the GPU: this step's data phase augments nothing"
    flipped = synthetic_steps(data=0.45, busy=0.3, ops=(OPTIMIZER_STEP, "augment")).regime
    assert "augment on the GPU" in flipped.lever_names
    hidden = loader_steps(1000, 600, 200, 1000, loader="_MultiProcessingDataLoaderIter")
    assert hidden.found == (OPTIMIZER, HIDDEN_INPUT) and "augment on the GPU" in hidden.regime.lever_names


def test_a_recorded_step_without_its_parts_keeps_every_lever():
    dataloader, cnn, mlp = cg.recorded_steps()
    assert dataloader.summary.found is None and "augment on the GPU" in dataloader.summary.regime.lever_names
    assert "layouts" in mlp.summary.regime.lever_names


def test_a_real_profile_finds_the_optimizer_the_convolutions_and_the_augmentation():
    torch.manual_seed(0)
    images = TensorDataset(torch.randn(32, 3, 8, 8), torch.randint(0, 4, (32,)))
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.LazyLinear(4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(images, batch_size=4, collate_fn=flipped_batch)

    def forever():  # a new pass over the loader each time (itertools.cycle would replay the first one's batches)
        while True:
            yield from loader

    batches = forever()

    def step():
        inputs, targets = next(batches)
        torch.nn.functional.cross_entropy(model(inputs), targets).backward()
        optimizer.step()
        optimizer.zero_grad()

    step()  # the lazy layer takes its shape
    found = cg.profile_step(step, "cpu", steps=2).found
    assert found == (OPTIMIZER, CONVOLUTIONS, AUGMENTATION)
    plain = torch.nn.Linear(8, 8)
    assert cg.profile_step(lambda: plain(torch.randn(4, 8)).sum().backward(), "cpu", steps=2).found == ()


def flipped_batch(rows):
    """A collate function that augments: the batch mirrored, as torchvision's RandomHorizontalFlip does."""
    inputs, targets = torch.utils.data.default_collate(rows)
    return inputs.flip(-1), targets


def test_the_sync_lever_of_a_step_without_an_optimizer_speaks_of_its_reads_not_a_training_loss():
    training = synthetic_steps(busy=0.3, launches=40, reads=1).regime
    assert "sum the loss on the device" in training.levers[0]
    generation = synthetic_steps(busy=0.3, launches=40, reads=1, ops=()).regime
    assert generation.lever_names[0] == "fewer syncs" and "generate()'s end-of-sequence test" in generation.levers[0]


def test_each_recorded_step_says_which_figures_come_from_the_profile():
    # Issue 64: recorded_steps.json says which figures are profiled; every one it names is in its record.
    dataloader, cnn, mlp = cg.recorded_steps()
    assert dataloader.profiled == ("step_ms", "kernel_ms", "input_wait")  # that run timed nothing without it
    assert dataloader.summary.profiled_step_ms is None and "(under the profiler, which stretches it)" in str(dataloader)
    assert "step_ms" not in cnn.profiled and "step_ms" not in mlp.profiled
    assert "read from the profile: profiled_step_ms, kernel_ms, launches_per_step;" in str(cnn)


def test_a_memory_bound_step_gets_its_achieved_bandwidth_against_the_measured_copy_bandwidth():
    # Issue 64: element-wise and decode steps had no gauge. 1.2 GB per 1 ms step: 1,200 GB/s of an H100's ~3,000.
    chain = synthetic_steps(busy=0.95, kernel="vectorized_elementwise_kernel", bytes_per_step=1.2e9, peak_gbps=3000)
    assert chain.achieved_gbps == pytest.approx(1200) and chain.share_of_bandwidth == pytest.approx(0.4)
    assert "moving 1.2e+03 GB/s, 40% of this GPU's measured copy bandwidth" in chain.regime.reason
    assert "1.2e+03 GB/s moved, 40% of this device's measured copy bandwidth" in chain.measurements()
    matmuls = synthetic_steps(busy=0.95, kernel="sgemm", bytes_per_step=1.2e9, peak_gbps=3000)
    assert "GB/s" not in matmuls.regime.reason  # FLOP/s say how near its limit a matmul runs
    again = cg.ProfileSummary.from_record(json.loads(json.dumps(chain.to_record())))
    assert again == chain


def test_a_decode_step_gets_the_levers_that_move_fewer_bytes_first():
    decode = synthetic_steps(step_us=1600, busy=0.95, launches=300, kernel="sgemm", ops=("aten::cat",)).regime
    assert decode.kernels == cg.measure.profile_events.TINY
    assert decode.lever_names[:2] == ("cache in place", "16-bit") and "SDPA heads" in decode.useless_names
    assert decode.why_useless("SDPA heads").endswith("this step repeats no key/value heads (repeat_interleave)")
    repeated = synthetic_steps(step_us=1600, busy=0.95, launches=300, ops=("aten::repeat_interleave",)).regime
    assert repeated.lever_names[0] == "SDPA heads" and "cache in place" in repeated.useless_names
    training = synthetic_steps(step_us=1600, busy=0.95, launches=300, ops=(OPTIMIZER_STEP, "aten::cat")).regime
    assert "cache in place" not in training.lever_names + training.useless_names


def test_copy_gbps_measures_a_copy_within_the_devices_memory():
    assert cg.copy_gbps("cpu", megabytes=8, repeat=3) > 0


def test_a_real_decode_step_is_seen_growing_its_cache_with_cat_and_not_repeating_heads():
    from colab_gpu.llm import llm_memory as mem

    shape = mem.ModelShape("tiny", vocab=64, hidden=32, intermediate=48, layers=1, heads=4, kv_heads=2, head_dim=8)
    model = cg.TinyDecoder(shape).eval()
    with torch.inference_mode():
        _, cache = model(torch.zeros(2, 8, dtype=torch.long))
        token = torch.zeros(2, 1, dtype=torch.long)
        found = cg.profile_step(lambda: model(token, cache, last_only=True), "cpu", steps=2).found
    assert found == (GROWN,)  # one new token pairs the heads itself (tiny_lm), and no optimizer: inference


def _every_lever() -> list[tuple[str, tuple[str, ...], str]]:
    """(the constant it is in, its short names, its text) for every lever the module defines."""
    found = []

    def walk(value, where):
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str) and isinstance(value[0], tuple):
            found.append((where, value[0], value[1]))
        elif isinstance(value, (tuple, list)):
            for item in value:
                walk(item, where)
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{where}[{key}]")

    for name in dir(levers):
        if name.isupper() and name not in ("LEVER_MEANINGS", "LEVER_NAMES", "NEEDS"):
            walk(getattr(levers, name), name)
    return found


def test_the_glossary_names_every_lever_and_every_lever_it_names_is_offered():
    # LEVER_MEANINGS is the one list of lever names (lesson 10's exercise answers with one): a text that speaks of a
    # lever the glossary lacks, or a glossary line no text offers, is a second wording drifting from the first.
    offered = _every_lever()
    assert len(offered) > 20
    named = {name for _, names, _ in offered for name in names}
    assert named <= set(levers.LEVER_NAMES), sorted(named - set(levers.LEVER_NAMES))
    assert set(levers.LEVER_NAMES) <= named, sorted(set(levers.LEVER_NAMES) - named)
    assert set(levers.NEEDS) <= set(levers.LEVER_NAMES)
    assert all(names and text for _, names, text in offered)
