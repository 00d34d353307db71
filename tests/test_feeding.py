import warnings

import pytest
import torch
from torch.utils.data import TensorDataset
from torchvision.transforms import v2

import colab_gpu as cg
from colab_gpu.data import loaders


@pytest.mark.parametrize(
    ("cores", "workers", "phrase"),
    [
        (1, 0, "one CPU core"),
        (2, 2, "Colab's 2 vCPUs"),
        (4, 4, "4 CPU cores"),
        (32, 8, "up to 8"),
    ],
)
def test_suggest_num_workers_says_why(cores, workers, phrase):
    advice = cg.suggest_num_workers(cores)
    assert advice.num_workers == workers and phrase in advice.reason
    assert str(advice).startswith(f"num_workers={workers}: ")


def test_suggest_num_workers_defaults_to_this_machine(monkeypatch):
    monkeypatch.setattr(loaders, "cpu_count", lambda: 2)
    assert cg.suggest_num_workers().num_workers == 2
    with pytest.raises(ValueError, match="cores must be at least 1, got 0"):
        cg.suggest_num_workers(0)


def dataset(n=64):
    return TensorDataset(torch.randn(n, 3), torch.arange(n))


def test_worker_loader_bad_input_is_explained():
    with pytest.raises(ValueError, match=r"num_workers must be 0 .* got -1\. num_workers="):
        cg.worker_loader(dataset(), 8, device="cpu", num_workers=-1)
    with pytest.raises(ValueError, match="batch_size=100 but the data set has 64 samples"):
        cg.worker_loader(dataset(), 100, device="cpu")
    with pytest.raises(ValueError, match="empty"):
        cg.worker_loader(dataset(0), 1, device="cpu")
    with pytest.raises(ValueError, match="prefetch_factor needs num_workers > 0"):
        cg.worker_loader(dataset(), 8, device="cpu", prefetch_factor=4)


def test_worker_loader_settings(fake_gpus):
    fake_gpus()
    loader = cg.worker_loader(dataset(), 8, device="cuda", num_workers=2, prefetch_factor=4)
    assert loader.pin_memory and loader.persistent_workers and loader.prefetch_factor == 4
    assert not cg.worker_loader(dataset(), 8, device="cpu").pin_memory


def test_worker_loader_with_workers_delivers_everything():
    loader = cg.worker_loader(dataset(), 16, device="cpu", num_workers=1, shuffle=False)
    labels = torch.cat([y for _, y in loader])
    assert labels.tolist() == list(range(64))


def test_encoded_images_decode_and_transform():
    images = torch.randint(0, 256, (4, 3, 16, 16), dtype=torch.uint8)
    augment = v2.Compose([v2.RandomResizedCrop(8, antialias=True), v2.ToDtype(torch.float32, scale=True)])
    ds = cg.EncodedImages(images, torch.arange(4), augment)
    x, y = ds[1]
    assert len(ds) == 4 and x.shape == (3, 8, 8) and x.dtype == torch.float32 and 0 <= x.min() and x.max() <= 1
    raw, _ = cg.EncodedImages(images, torch.arange(4))[0]
    assert raw.dtype == torch.uint8 and raw.shape == (3, 16, 16)
    with pytest.raises(ValueError, match=r"uint8 \(N, 1 or 3, H, W\)"):
        cg.EncodedImages(images.float(), torch.arange(4))
    with pytest.raises(ValueError, match="4 images but 3 labels"):
        cg.EncodedImages(images, torch.arange(3))


def test_device_loader_batches_every_sample_once():
    loader = cg.DeviceLoader(torch.arange(10.0).view(10, 1), torch.arange(10), batch_size=4, device="cpu")
    batches = list(loader)
    assert len(loader) == 3 and [len(y) for _, y in batches] == [4, 4, 2]
    assert sorted(torch.cat([y for _, y in batches]).tolist()) == list(range(10))
    assert len(loader.dataset) == 10


def test_device_loader_shuffles_differently_each_epoch_and_reproducibly():
    def orders(seed):
        loader = cg.DeviceLoader(torch.zeros(50, 1), torch.arange(50), batch_size=50, device="cpu", seed=seed)
        return [next(iter(loader))[1].tolist() for _ in range(2)]

    first, second = orders(0)
    assert first != second and orders(0) == [first, second]
    fixed = cg.DeviceLoader(
        torch.zeros(5, 1), torch.arange(5), batch_size=2, device="cpu", shuffle=False, drop_last=True
    )
    assert [y.tolist() for _, y in fixed] == [[0, 1], [2, 3]]


def test_device_loader_bad_input():
    with pytest.raises(ValueError, match="inputs are on meta but labels on cpu"):
        cg.DeviceLoader(torch.zeros(4, 1, device="meta"), torch.zeros(4), batch_size=2, device="cpu")
    with pytest.raises(ValueError, match="batch_size=8 but the data set has 4 samples"):
        cg.DeviceLoader(torch.zeros(4, 1), torch.zeros(4), batch_size=8, device="cpu")
    with pytest.raises(ValueError, match="4 inputs but 3 labels"):
        cg.DeviceLoader(torch.zeros(4, 1), torch.zeros(3), batch_size=2, device="cpu")
    with pytest.raises(ValueError, match="empty"):
        cg.DeviceLoader(torch.zeros(0, 1), torch.zeros(0), batch_size=1, device="cpu")


def test_device_loader_trains_with_fit():
    loader = cg.DeviceLoader(torch.randn(64, 2), torch.randint(0, 2, (64,)), batch_size=16, device="cpu")
    model = torch.nn.Linear(2, 2)
    history = cg.fit(
        model, loader, loader, torch.optim.SGD(model.parameters(), 0.1), "cpu", epochs=1, progress=False, verbose=False
    )
    assert history.last["samples_per_s"] > 0


def test_measure_loader_counts_samples():
    loader = cg.DeviceLoader(torch.zeros(30, 2), torch.zeros(30), batch_size=10, device="cpu")
    assert cg.measure_loader(loader, "cpu", epochs=2) > 0
    with pytest.raises(ValueError, match="no samples"):
        cg.measure_loader([], "cpu")


def test_copy_bandwidth_needs_a_gpu():
    with pytest.raises(ValueError, match="cpu is not a GPU"):
        cg.copy_bandwidth(1, "cpu", pinned=True)


def test_per_sample_flip_decides_per_image():
    images = torch.arange(4.0).view(1, 1, 1, 4).repeat(64, 1, 1, 1)
    flipped = cg.per_sample_flip(images, p=0.5, generator=torch.Generator().manual_seed(0))
    was_flipped = flipped[:, 0, 0, 0] == 3
    assert 0 < was_flipped.sum() < 64  # some images flipped, some not
    assert torch.equal(cg.per_sample_flip(images, p=0.0), images)
    assert torch.equal(cg.per_sample_flip(images, p=1.0), images.flip(-1))
    with pytest.raises(ValueError, match="between 0 and 1, got 2"):
        cg.per_sample_flip(images, p=2)


def test_v2_random_transform_draws_once_per_batch():
    # The caveat the lesson teaches: one parameter draw per call, so a batch flips together.
    images = torch.arange(4, dtype=torch.uint8).view(1, 1, 1, 4).repeat(8, 1, 1, 1)
    for _ in range(10):
        out = v2.RandomHorizontalFlip(p=0.5)(images)
        assert len(set(out[:, 0, 0, 0].tolist())) == 1


def test_too_many_workers_warns(monkeypatch):
    monkeypatch.setattr(torch.utils.data.dataloader.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        iter(cg.worker_loader(dataset(), 8, device="cpu", num_workers=4, persistent_workers=False))
    assert any("suggested max number of worker" in str(w.message) for w in caught)


@pytest.mark.gpu
def test_pinned_copies_beat_pageable_on_a_real_gpu():
    device = cg.get_device("cuda")
    assert cg.copy_bandwidth(64, device, pinned=True) > cg.copy_bandwidth(64, device, pinned=False)


def test_a_sweep_goes_past_the_cores_and_times_ten_batches_per_worker():
    assert cg.feeding.worker_counts(1) == [0, 1, 2] and cg.feeding.worker_counts(2) == [0, 1, 2, 4]
    assert cg.feeding.worker_counts(16) == [0, 1, 2, 4, 8, 16, 32] and cg.feeding.worker_counts(48)[-1] == 64
    assert [cg.feeding.sweep_batches(n) for n in (0, 1, 2, 4, 32)] == [20, 20, 20, 40, 320]


class Counted(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n, self.calls = n, 0

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        self.calls += 1
        return torch.zeros(3), index


def test_a_sweep_repeats_a_small_data_set_instead_of_timing_its_batch_count():
    # 12 batches of a small data set would take 2 rounds of 8 workers but 1 of 16: the sweep draws its own count.
    small = Counted(40)
    rates = cg.sweep_workers(small, "cpu", [0], batch_size=4)
    assert rates[0] > 0 and small.calls == (1 + 20) * 4  # one warm-up batch, then 20 timed, from 40 samples


def test_a_sweep_past_the_cores_says_nothing_on_stderr(monkeypatch):
    monkeypatch.setattr(torch.utils.data.dataloader.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rates = cg.sweep_workers(dataset(), "cpu", [2], batch_size=8)
    assert rates[2] > 0 and not [w for w in caught if "worker" in str(w.message)]


def test_measured_advice_is_where_the_plateau_starts():
    rates = {0: 1000.0, 1: 1050.0, 2: 1950.0, 4: 2000.0, 8: 2010.0}
    advice = cg.suggest_num_workers(8, measured=rates)
    assert advice.num_workers == 2 and "within 10% of the fastest (8 workers, 2,010)" in advice.reason
    steep = cg.suggest_num_workers(4, measured={0: 100.0, 2: 300.0, 4: 250.0})
    assert steep.num_workers == 2 and "the fastest rate of the sweep" in steep.reason
    assert str(steep).startswith("num_workers=2: measured here, 300 samples/s")


def test_measured_advice_never_exceeds_the_cores_and_says_when_the_sweep_has_no_plateau():
    """Issue 50: on 2 cores the sweep's fastest was 4 workers, and the advice was 4, two cells before the lesson's
    "Mistake: more workers than cores" (and PyTorch's warning in the exercise's output)."""
    capped = cg.suggest_num_workers(2, measured={0: 1420.0, 1: 1380.0, 2: 2066.0, 4: 2521.0})
    assert capped.num_workers == 2
    assert "4 workers measured faster (2,521), but more workers than the 2 cores" in capped.reason
    rising = cg.suggest_num_workers(16, measured={0: 1245.0, 1: 946.0, 8: 9000.0, 16: 11439.0})
    assert rising.num_workers == 16 and "no plateau within the sweep" in rising.reason


def test_worker_loader_draws_as_many_samples_as_asked():
    loader = cg.worker_loader(dataset(10), 4, device="cpu", samples=24)
    labels = torch.cat([y for _, y in loader])
    assert len(loader) == 6 and len(labels) == 24 and set(labels.tolist()) == set(range(10))
    with pytest.raises(ValueError, match=r"samples=2 asks for a random draw of at least one batch"):
        cg.worker_loader(dataset(10), 4, device="cpu", samples=2)


def test_the_training_step_a_lesson_profiles_labels_its_data():
    loader = cg.DeviceLoader(torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,)), batch_size=16, device="cpu")
    summary = cg.profile_step(cg.feeding.training_step(loader, "cpu"), "cpu", steps=6)  # more steps than batches
    assert summary.steps == 6 and "data" in summary.shares and summary.regime.name in ("CPU-bound", "input-bound")
