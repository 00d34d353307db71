"""Issue 62: each hole a learner's mistake found in a self-check, as a test named after the mistake. The mutation
harness (scripts/course/check_mutants.py) finds such holes by the hundred; these keep the ones it found fixed."""

import math

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import colab_gpu as cg
from colab_gpu.llm.lora import LoRALinear


def test_lesson_01_a_copy_made_with_to_is_seen_even_on_the_meta_device():
    copied = cg.checks.created_on(lambda where: torch.ones(1000).to(where), "meta")
    assert not copied and ".to() from cpu to meta" in copied.message
    assert "create it on `where` directly" in copied.message  # the hint agrees with the instruction: no .to()
    assert "made a tensor on cpu" in cg.checks.created_on(lambda where: torch.ones(1000), "meta").message


def test_lesson_01_wrong_content_dtype_or_rank_fails():
    for make, hint in (
        (lambda where: torch.zeros(1000, device=where), "values other than 1"),
        (lambda where: torch.ones(1000, device=where, dtype=torch.float64), "holds torch.float64"),
        (lambda where: torch.ones(10, 100, device=where), "shape (10, 100)"),
        (lambda where: None, "not a tensor"),
    ):
        result = cg.checks.created_on(make, "meta")
        assert not result and hint in result.message, result.message
    assert cg.checks.created_on(lambda where: torch.ones(1000, device=where), "meta")


def test_lesson_01_gpu_count_set_to_is_available_fails():
    result = cg.checks.gpu_count(torch.cuda.is_available())
    assert not result and "torch.cuda.device_count() how many" in result.message
    assert cg.checks.gpu_count(torch.cuda.device_count())
    assert not cg.checks.gpu_count(None) and not cg.checks.gpu_count(torch.cuda.device_count() + 1)


def _timer(warm=True, sync_before=True, sync_after=True, median=True):
    def my_timer(fn, device, repeat=10):
        import statistics
        import time

        wait = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        if warm:
            fn()
        seconds = []
        for _ in range(repeat):
            if sync_before:
                wait()
            start = time.perf_counter()
            fn()
            if sync_after:
                wait()
            seconds.append(time.perf_counter() - start)
        return statistics.median(seconds) if median else statistics.mean(seconds)

    return my_timer


def test_lesson_02_a_timer_that_skips_a_sync_the_warm_up_or_the_median_fails_on_any_runtime():
    work = lambda: torch.ones(64, 64) @ torch.ones(64, 64)  # noqa: E731
    reference = cg.benchmark(work, device="cpu").median
    assert cg.checks.timer(_timer(), work, reference, "cpu")
    for timer, hint in (
        (_timer(sync_after=False), "the clock stopped before the GPU finished"),
        (_timer(sync_before=False), "the warm-up's queued work landed in the first timed call"),
        (_timer(warm=False), "call it once more before timing (the warm-up)"),
        (_timer(median=False), "return the median"),
    ):
        result = cg.checks.timer(timer, work, reference, "cpu")
        assert not result and hint in result.message, result.message


def test_lesson_02_a_timing_of_nan_or_inf_seconds_fails():
    assert not cg.checks.speed.timing(math.nan, 0.01) and not cg.checks.speed.timing(math.inf, 0.01)


def _loader():
    torch.manual_seed(0)
    inputs = torch.randn(640, 1, 8, 8)
    return DataLoader(TensorDataset(inputs, inputs.flatten(1)[:, :10].argmax(1)), batch_size=64)


def _loop(order=("zero_grad", "backward", "step"), detach=True, train=True, globals_model=None):
    def epoch(model, loader, optimizer, device):
        if train:
            model.train()
        used = globals_model or model
        losses = []
        for inputs, labels in loader:
            loss = nn.functional.cross_entropy(used(inputs.to(device)), labels.to(device))
            for call in order:
                {"zero_grad": optimizer.zero_grad, "backward": loss.backward, "step": optimizer.step}[call]()
            losses.append(loss.detach() if detach else loss)
        return torch.stack(losses)

    return epoch


def test_lesson_03_loops_that_never_update_the_weights_fail_with_the_order_they_got_wrong():
    model = cg.mlp(64, hidden=32)
    cases = {
        ("zero_grad", "backward", "step"): None,
        ("backward", "zero_grad", "step"): "zero_grad() comes between backward() and step()",
        ("zero_grad", "step", "backward"): "optimizer.step() comes before loss.backward()",
        ("zero_grad", "backward"): "call optimizer.step() after loss.backward()",
        ("zero_grad", "step"): "no gradient was computed",
    }
    for order, hint in cases.items():
        result = cg.checks.train_loop(_loop(order), model, _loader(), "cpu")
        assert bool(result) == (hint is None) and (hint is None or hint in result.message), (order, result.message)


def test_lesson_03_losses_kept_with_their_graphs_or_a_loop_left_in_eval_mode_fail():
    model = cg.mlp(64, hidden=32)
    kept = cg.checks.train_loop(_loop(detach=False), model, _loader(), "cpu")
    assert not kept and "keep loss.detach()" in kept.message
    eval_mode = cg.checks.train_loop(_loop(train=False), model, _loader(), "cpu")
    assert not eval_mode and "call model.train()" in eval_mode.message


def test_lesson_03_a_loop_that_trains_the_notebooks_model_instead_of_its_argument_fails():
    notebook_model = cg.mlp(64, hidden=32)
    result = cg.checks.train_loop(_loop(globals_model=notebook_model), cg.mlp(64, hidden=32), _loader(), "cpu")
    assert not result  # the meta dry run mixes devices, or the model passed in did not change
    assert "move each batch" in result.message or "did not change" in result.message


def test_lesson_05_a_loader_of_another_batch_size_fails():
    images, labels = torch.randn(512, 4), torch.arange(512)
    batches = DataLoader(TensorDataset(images, labels), batch_size=128)
    result = cg.checks.loader_speed(batches, batches, "cpu", samples=512, labels=labels, batch_size=256)
    assert not result and "your batches hold 128 samples; the exercise asks for 256" in result.message


def _amp(dtype=torch.float16, returned="detached", unscale_twice=False):
    def step(model, inputs, labels, optimizer, scaler, max_norm):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(inputs.device.type, dtype=dtype):
            loss = nn.functional.cross_entropy(model(inputs), labels)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        if unscale_twice:
            scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()
        return {"detached": loss.detach(), "graph": loss, "none": None}[returned]

    return step


def test_lesson_06_a_bf16_step_a_kept_graph_and_a_second_unscale_get_their_own_hints():
    assert cg.checks.amp_step(_amp(), "cpu")
    for step, hint in (
        (_amp(dtype=torch.bfloat16), "the forward pass ran in bfloat16"),
        (_amp(returned="graph"), "return loss.detach()"),
        (_amp(returned="none"), "return the step's loss"),
        (_amp(unscale_twice=True), "call scaler.unscale_(optimizer) once per step"),
    ):
        result = cg.checks.amp_step(step, "cpu")
        assert not result and hint in result.message, result.message


def test_lesson_08_the_shard_hint_names_no_variable_the_lesson_lacks():
    assert "rank1_indices" not in cg.checks.shard(None, dataset_size=10, world_size=4, rank=3).message


def test_lesson_09_an_unbatched_prediction_fails():
    model, images = cg.mlp(64, hidden=32), torch.randn(512, 64)

    def leaky(m, x):
        return torch.cat([m(batch.to(device)) for batch in x.split(64)])

    def all_at_once(m, x):
        with torch.inference_mode():
            return m(x.to(device))

    result = cg.checks.evaluation_memory(all_at_once, leaky, model, images)
    assert not result and "keep the batches" in result.message


device = torch.device("cpu")  # the notebook's global, as lessons 04 and 09 read it


def _predict(move: bool):
    def predict(model, images, batch_size=64):
        model.eval()
        with torch.inference_mode():
            outputs = [model(batch.to(device) if move else batch) for batch in images.split(batch_size)]
        return torch.cat(outputs).argmax(dim=1).cpu()

    return predict


def _one_at_a_time(model, images):
    model.eval()
    with torch.inference_mode():
        return torch.cat([model(image.unsqueeze(0).to(device)).argmax(dim=1) for image in images])


def test_lessons_04_and_09_batches_never_moved_to_the_device_fail_on_a_cpu_runtime_too():
    # Issue 62: on a CPU runtime a forgotten .to(device) passed (the batches were where the model was); the checks
    # now run the function once with the model and the notebook's `device` on the meta device.
    model, images = cg.mlp(64, hidden=32), torch.randn(256, 64)
    result = cg.checks.prediction_speed(_predict(move=False), _one_at_a_time, model, images, "cpu", at_least=1.0)
    assert not result and "your batches stay on the CPU: move each one to `device`" in result.message
    assert device.type == "cpu"  # the notebook's global is put back
    result = cg.checks.evaluation_memory(_predict(move=False), _predict(move=True), model, images)
    assert not result and "your batches stay on the CPU" in result.message
    assert (
        "batches stay"
        not in cg.checks.prediction_speed(
            _predict(move=True), _one_at_a_time, model, images, "cpu", at_least=1.0
        ).message
    )


def test_lesson_14_an_adapter_left_uninitialized_fails():
    class Garbage(LoRALinear):
        def __init__(self, base, rank, alpha):
            super().__init__(base, rank, alpha)
            with torch.no_grad():
                self.A.fill_(1e30)  # what torch.empty may leave in memory

    result = cg.checks.lora_linear(Garbage)
    assert not result and "torch.empty left in memory" in result.message

    class Reused(LoRALinear):  # memory a freed tensor left: finite, small, spread out, and the same whatever the seed
        def __init__(self, base, rank, alpha):
            super().__init__(base, rank, alpha)
            with torch.no_grad():
                self.A.copy_(torch.linspace(-0.1, 0.1, self.A.numel()).view_as(self.A))

    result = cg.checks.lora_linear(Reused)
    assert not result and "torch.empty left in memory" in result.message
