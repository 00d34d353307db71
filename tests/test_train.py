import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import colab_gpu as cg


def separable(n=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=g)
    return TensorDataset(x, (x[:, 0] + x[:, 1] > 0).long())


def loader(n=256, batch=32):
    return DataLoader(separable(n), batch_size=batch, shuffle=True, generator=torch.Generator().manual_seed(0))


def test_fit_learns_and_records_history(capsys):
    cg.seed_everything(0)
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2))
    history = cg.fit(
        model, loader(), loader(128), torch.optim.Adam(model.parameters(), 1e-2), "cpu", epochs=5, progress=False
    )
    losses = history.column("train_loss")
    assert len(history) == 5 and losses[-1] < losses[0]
    assert history.last["test_acc"] > 0.9
    expected = {"epoch", "precision", "train_loss", "train_acc", "seconds", "samples_per_s", "test_loss", "test_acc"}
    assert set(history.last) == expected
    assert "epoch 5/5" in capsys.readouterr().out


def test_fit_without_test_loader_and_with_callback_and_scheduler():
    model = nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    seen = []
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    history = cg.fit(
        model,
        loader(),
        None,
        optimizer,
        "cpu",
        epochs=2,
        scheduler=scheduler,
        on_epoch_end=lambda epoch, row: seen.append(epoch),
        progress=False,
        verbose=False,
    )
    assert seen == [1, 2] and "test_acc" not in history.last
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.025)


def test_train_epoch_reads_the_device_once_per_epoch(monkeypatch):
    model = nn.Linear(2, 2)
    batches = list(loader(batch=16))  # the sampler itself calls .item() to draw its seed
    calls = []
    real_item = torch.Tensor.item
    monkeypatch.setattr(torch.Tensor, "item", lambda self: calls.append(1) or real_item(self))
    stats = cg.train_epoch(model, batches, torch.optim.SGD(model.parameters(), 0.1), "cpu", progress=False)
    assert stats.samples == 256 and len(calls) == 2  # loss sum and correct count, once each


def test_train_epoch_with_fp16_scaler_reads_the_device_every_step(monkeypatch):
    # What the module docstring says: GradScaler.step reads found_inf once per step (not fused).
    model = nn.Linear(2, 2)
    batches = list(loader(batch=16))
    calls = []
    real_item = torch.Tensor.item
    monkeypatch.setattr(torch.Tensor, "item", lambda self: calls.append(1) or real_item(self))
    cg.train_epoch(
        model,
        batches,
        torch.optim.SGD(model.parameters(), 0.1),
        "cpu",
        autocast_dtype=torch.float16,
        scaler=torch.amp.GradScaler("cpu"),
        progress=False,
    )
    assert len(calls) >= len(batches) + 2


def test_one_cycle_schedule_stepped_per_batch_spans_the_whole_run():
    # OneCycleLR counts optimizer steps: stepped once per epoch with total_steps=epochs, the last
    # epoch trained at ~1e-8. Stepped per batch, the rate rises and falls over the whole run.
    data = loader(batch=32)
    epochs = 3
    model = nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.4, total_steps=epochs * len(data))
    rates = []
    cg.fit(
        model,
        data,
        None,
        optimizer,
        "cpu",
        epochs=epochs,
        scheduler=scheduler,
        scheduler_step="batch",
        on_epoch_end=lambda epoch, row: rates.append(optimizer.param_groups[0]["lr"]),
        progress=False,
        verbose=False,
    )
    assert scheduler.last_epoch == epochs * len(data)  # stepped after every batch, and no more
    assert rates[0] > 0.1 and rates[1] > 0.04 and rates[-1] < 0.01  # warm, still learning, annealed
    with pytest.raises(ValueError, match="scheduler_step must be 'epoch' or 'batch', got 'step'"):
        cg.fit(model, data, None, optimizer, "cpu", epochs=1, scheduler=scheduler, scheduler_step="step")


def test_train_epoch_with_progress_bar():
    model = nn.Linear(2, 2)
    stats = cg.train_epoch(model, loader(), torch.optim.SGD(model.parameters(), 0.1), "cpu", progress=True)
    assert 0 <= stats.accuracy <= 1 and stats.samples_per_s > 0


def test_autocast_and_scaler_hooks_run_on_cpu():
    model = nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), 0.1)
    scaler = torch.amp.GradScaler("cpu")
    stats = cg.train_epoch(
        model, loader(), optimizer, "cpu", autocast_dtype=torch.bfloat16, scaler=scaler, progress=False
    )
    assert stats.loss > 0
    evaluation = cg.evaluate(model, loader(), "cpu", autocast_dtype=torch.bfloat16)
    assert 0 <= evaluation.accuracy <= 1


def test_evaluate_uses_eval_mode_and_no_grad():
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    cg.evaluate(model, loader(), "cpu")
    assert not model.training


def test_model_on_another_device_is_a_clear_error():
    model = nn.Linear(2, 2).to("meta")
    expected = r"parameters are on meta but training was asked to run on cpu.*model.to\('cpu'\)"
    with pytest.raises(ValueError, match=expected):
        cg.train_epoch(model, loader(), torch.optim.SGD(nn.Linear(1, 1).parameters(), 0.1), "cpu", progress=False)


def test_batches_are_moved_to_the_device():
    # A documented move: batches from a CPU loader end up wherever the model is.
    seen = []

    class Spy(nn.Linear):
        def forward(self, x):
            seen.append(x.device)
            return super().forward(x)

    model = Spy(2, 2)
    cg.evaluate(model, [(torch.randn(4, 2), torch.zeros(4, dtype=torch.long))], torch.device("cpu"))
    assert seen == [torch.device("cpu")]


def test_wrong_label_shape_is_a_clear_error():
    model = nn.Linear(2, 2)
    bad = [(torch.randn(4, 2), torch.zeros(4, 1, dtype=torch.long))]
    with pytest.raises(ValueError, match=r"labels of shape \(batch,\), got outputs \(4, 2\) and labels \(4, 1\)"):
        cg.train_epoch(model, bad, torch.optim.SGD(model.parameters(), 0.1), "cpu", progress=False)


def labels_1_to_10(n=64):
    """Labels a learner's CSV may have: classes numbered from 1, one past what nn.Linear(..., 10) outputs."""
    return torch.arange(n) % 10 + 1


@pytest.mark.parametrize("kind", ["DeviceLoader", "TensorDataset", "list of batches"])
def test_labels_beyond_the_models_outputs_stop_fit_before_the_first_step(kind):
    inputs = torch.randn(64, 4)
    if kind == "DeviceLoader":
        train = cg.DeviceLoader(inputs, labels_1_to_10(), batch_size=16, device="cpu")
    elif kind == "TensorDataset":
        train = DataLoader(TensorDataset(inputs, labels_1_to_10()), batch_size=16)
    else:  # nothing to read the labels from but the batches themselves
        train = [(inputs[i : i + 16], labels_1_to_10()[i : i + 16]) for i in range(0, 64, 16)]
    model = nn.Linear(4, 10)
    before = model.weight.detach().clone()
    with pytest.raises(
        ValueError,
        match=r"labels go from 1 to 10, but the model outputs 10 classes.*"
        r"labels from 0 to 9.*output 11 classes.*subtract 1.*device-side assert",
    ):
        cg.fit(
            model,
            train,
            None,
            torch.optim.SGD(model.parameters(), lr=0.1),
            "cpu",
            epochs=2,
            progress=False,
            verbose=False,
        )
    assert torch.equal(model.weight, before)  # nothing was trained on the bad labels


def test_a_bad_label_in_a_later_batch_is_found_when_the_loader_keeps_its_labels():
    labels = torch.arange(64) % 10
    labels[60] = 99  # the last batch: the first batch alone looks fine
    train = DataLoader(TensorDataset(torch.randn(64, 4), labels), batch_size=16)
    model = nn.Linear(4, 10)
    with pytest.raises(ValueError, match="go from 0 to 99, but the model outputs 10 classes"):
        cg.fit(
            model,
            train,
            None,
            torch.optim.SGD(model.parameters(), lr=0.1),
            "cpu",
            epochs=1,
            progress=False,
            verbose=False,
        )


def test_ignored_labels_and_a_custom_loss_are_not_taken_for_classes():
    labels = torch.arange(32) % 2
    labels[:4] = -100  # cross_entropy's ignore_index: padding, not a class
    train = DataLoader(TensorDataset(torch.randn(32, 4), labels), batch_size=8)
    model = nn.Linear(4, 2)
    cg.fit(
        model, train, None, torch.optim.SGD(model.parameters(), lr=0.1), "cpu", epochs=1, progress=False, verbose=False
    )
    assert cg.train.train_checks.label_range(torch.tensor([0.2, 0.8])) is None  # soft targets: no class indices


def test_a_nan_loss_stops_fit_with_the_epoch_and_the_batch():
    inputs = torch.randn(64, 4)
    inputs[37] = float("nan")  # one bad row in the third batch of 16
    train = DataLoader(TensorDataset(inputs, torch.arange(64) % 2), batch_size=16)
    model = nn.Linear(4, 2)
    with pytest.raises(
        FloatingPointError,
        match=r"loss became nan at epoch 1, batch 2 \(counting from 0\).*"
        r"torch.isfinite\(inputs\).all\(\)",
    ):
        cg.fit(
            model,
            train,
            None,
            torch.optim.SGD(model.parameters(), lr=0.1),
            "cpu",
            epochs=3,
            progress=False,
            verbose=False,
        )


def test_empty_data_set_is_a_clear_error():
    model = nn.Linear(2, 2)
    empty = DataLoader(TensorDataset(torch.zeros(0, 2), torch.zeros(0, dtype=torch.long)), batch_size=4)
    with pytest.raises(ValueError, match="training loader yielded no batches"):
        cg.train_epoch(model, empty, torch.optim.SGD(model.parameters(), 0.1), "cpu", progress=False)
    with pytest.raises(ValueError, match="evaluation loader yielded no batches"):
        cg.evaluate(model, empty, "cpu")


def test_fit_rejects_zero_epochs():
    model = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="epochs must be at least 1, got 0"):
        cg.fit(model, loader(), None, torch.optim.SGD(model.parameters(), 0.1), "cpu", epochs=0)
    with pytest.raises(ValueError, match="fit ran no epoch"):
        _ = cg.train.history.History().last


def test_models_shapes_and_bad_arguments():
    assert cg.mlp(784, hidden=32)(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    assert cg.small_cnn(3, 10, width=8)(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
    assert cg.small_cnn(1, 10, width=8)(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    assert cg.count_parameters(nn.Linear(3, 2)) == 8
    with pytest.raises(ValueError, match="hidden >= 1"):
        cg.mlp(784, hidden=0)
    with pytest.raises(ValueError, match="classes >= 2"):
        cg.small_cnn(3, classes=1)


def test_plots_draw(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    history = cg.train.history.History(
        [{"epoch": 1, "train_loss": 1.0, "train_acc": 0.5, "test_loss": 1.1, "test_acc": 0.4}]
    )
    cg.plot_history(history).savefig(tmp_path / "h.png")
    cg.bar_seconds({"cpu": 1.0, "cuda:0": 0.01}, "x", log=True).savefig(tmp_path / "b.png")
    cg.show_images(torch.zeros(3, 1, 8, 8), ["a", "b", "c"]).savefig(tmp_path / "g.png")
    assert len(list(tmp_path.glob("*.png"))) == 3
    with pytest.raises(ValueError, match="at least one timing"):
        cg.bar_seconds({}, "empty")
    with pytest.raises(ValueError, match="no images"):
        cg.show_images(torch.zeros(0, 1, 8, 8), [])


@pytest.mark.gpu
def test_fit_on_real_gpu():
    device = cg.get_device("cuda")
    model = nn.Linear(2, 2).to(device)
    history = cg.fit(
        model,
        loader(),
        loader(),
        torch.optim.SGD(model.parameters(), 0.1),
        device,
        epochs=1,
        progress=False,
        verbose=False,
    )
    assert history.last["test_acc"] > 0.5


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["DeviceLoader", "list of batches"])
def test_bad_labels_on_a_gpu_are_caught_before_the_device_side_assert(kind):
    device = cg.get_device("cuda")
    inputs = torch.randn(64, 4)
    train = (
        cg.DeviceLoader(inputs, labels_1_to_10(), batch_size=16, device=device)
        if kind == "DeviceLoader"
        else [(inputs[i : i + 16], labels_1_to_10()[i : i + 16]) for i in range(0, 64, 16)]
    )
    model = nn.Linear(4, 10).to(device)
    with pytest.raises(ValueError, match="labels go from 1 to 10, but the model outputs 10 classes"):
        cg.fit(
            model,
            train,
            None,
            torch.optim.SGD(model.parameters(), lr=0.1),
            device,
            epochs=1,
            progress=False,
            verbose=False,
        )
    assert torch.ones(4, device=device).sum().item() == 4  # the runtime is still usable: no device-side assert


def test_train_step_returns_detached_loss_and_outputs():
    model = nn.Linear(2, 2)
    x, y = torch.randn(4, 2), torch.zeros(4, dtype=torch.long)
    before = model.weight.detach().clone()
    loss, outputs = cg.train_step(model, x, y, torch.optim.SGD(model.parameters(), 0.1))
    assert not loss.requires_grad and outputs.shape == (4, 2)
    assert not torch.equal(before, model.weight)


def test_predict_returns_every_prediction_in_order():
    model = nn.Linear(2, 2)
    batches = [(torch.randn(3, 2), torch.tensor([0, 1, 0])), (torch.randn(2, 2), torch.tensor([1, 1]))]
    predictions, labels = cg.predict(model, batches, "cpu")
    assert predictions.shape == (5,) and labels.tolist() == [0, 1, 0, 1, 1]
    with pytest.raises(ValueError, match="no batches"):
        cg.predict(model, [], "cpu")


@pytest.mark.parametrize("scaled", [False, True])
def test_train_step_clips_the_true_gradients_with_max_norm(scaled):
    torch.manual_seed(0)
    model = nn.Linear(8, 3)
    start = [p.detach().clone() for p in model.parameters()]
    inputs, labels = torch.randn(16, 8) * 100, torch.randint(0, 3, (16,))  # large inputs: a large gradient
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10) if scaled else None
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    cg.train_step(model, inputs, labels, optimizer, scaler=scaler, max_norm=0.5)
    moved = torch.cat([(p.detach() - q).flatten() for p, q in zip(model.parameters(), start, strict=True)])
    # SGD with lr=1 moves the weights by exactly the clipped gradient: norm 0.5, whatever the scale was
    assert moved.norm().item() == pytest.approx(0.5, rel=1e-3)


def test_fit_passes_max_norm_to_every_step(monkeypatch):
    seen = []
    real_clip = nn.utils.clip_grad_norm_
    monkeypatch.setattr(nn.utils, "clip_grad_norm_", lambda params, norm: seen.append(norm) or real_clip(params, norm))
    model = nn.Linear(4, 2)
    batches = [(torch.randn(8, 4), torch.randint(0, 2, (8,)))] * 3
    cg.fit(
        model,
        batches,
        None,
        torch.optim.SGD(model.parameters(), 0.1),
        "cpu",
        epochs=2,
        max_norm=1.0,
        progress=False,
        verbose=False,
    )
    assert seen == [1.0] * 6
