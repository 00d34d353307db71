import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import colab_gpu as cg


class Disconnect(Exception):
    """Stands in for a Colab disconnect in the middle of training."""


def make_run(seed=0):
    cg.seed_everything(seed)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 8, generator=g)
    data = TensorDataset(x, (x.sum(dim=1) > 0).long())
    loader = DataLoader(data, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(2))
    model = nn.Sequential(nn.Linear(8, 32), nn.Dropout(0.2), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, optimizer, loader


def test_resume_after_interruption_gives_the_same_weights(tmp_path):
    model, optimizer, loader = make_run()
    cg.fit(model, loader, loader, optimizer, "cpu", epochs=4, progress=False, verbose=False)
    uninterrupted = {k: v.clone() for k, v in model.state_dict().items()}

    path = tmp_path / "run.pt"
    model, optimizer, loader = make_run()

    def disconnect_after_two(epoch, row):
        if epoch == 2:
            raise Disconnect

    with pytest.raises(Disconnect):
        cg.fit(
            model,
            loader,
            loader,
            optimizer,
            "cpu",
            epochs=4,
            checkpoint=path,
            on_epoch_end=disconnect_after_two,
            progress=False,
            verbose=False,
        )

    torch.manual_seed(123)  # a new session: every generator is somewhere else
    model, optimizer, loader = make_run(seed=99)
    history = cg.fit(model, loader, loader, optimizer, "cpu", epochs=4, checkpoint=path, progress=False, verbose=False)
    assert history.column("epoch") == [1, 2, 3, 4]
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, uninterrupted[name]), f"{name} differs after resume"


@pytest.mark.parametrize("scheduler_step", ["epoch", "batch"])
def test_resume_restores_the_learning_rate_schedule(tmp_path, scheduler_step):
    def run(path=None, on_epoch_end=None, seed=0):
        model, optimizer, loader = make_run(seed)
        steps = 4 * len(loader) if scheduler_step == "batch" else 4
        scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=5e-2, total_steps=steps)
        cg.fit(
            model,
            loader,
            None,
            optimizer,
            "cpu",
            epochs=4,
            scheduler=scheduler,
            scheduler_step=scheduler_step,
            checkpoint=path,
            on_epoch_end=on_epoch_end,
            progress=False,
            verbose=False,
        )
        return model, scheduler

    uninterrupted, expected = run()

    def disconnect_after_two(epoch, row):
        if epoch == 2:
            raise Disconnect

    path = tmp_path / "sched.pt"
    with pytest.raises(Disconnect):
        run(path, disconnect_after_two)
    resumed, scheduler = run(path, seed=99)
    assert scheduler.last_epoch == expected.last_epoch  # without the saved state it would restart at 0
    for name, tensor in resumed.state_dict().items():
        assert torch.equal(tensor, uninterrupted.state_dict()[name]), f"{name} differs after resume"


def test_checkpoints_are_read_onto_the_cpu_so_step_counters_stay_there(tmp_path, monkeypatch):
    # Reading with map_location=<the model's GPU> put Adam's `step` tensors on the GPU, where
    # every optimizer step then reads them back (a sync). Load on the CPU; load_state_dict moves the rest.
    model, optimizer, loader = make_run()
    cg.fit(model, loader, None, optimizer, "cpu", epochs=1, checkpoint=tmp_path / "a.pt", progress=False, verbose=False)
    locations = []
    real_load = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: locations.append(k.get("map_location")) or real_load(*a, **k))
    fresh, fresh_optimizer, _ = make_run(seed=3)
    cg.train.checkpoint.load_checkpoint(tmp_path / "a.pt", fresh, fresh_optimizer)
    assert locations == ["cpu"]
    steps = [state["step"] for state in fresh_optimizer.state.values()]
    assert steps and all(step.device.type == "cpu" and step.item() == len(loader) for step in steps)


def test_cuda_generators_of_a_machine_with_more_gpus_restore_what_exists(monkeypatch):
    # Saved on Kaggle's two T4s, resumed on Colab's one: restore GPU 0's state, skip GPU 1's.
    from colab_gpu.train import checkpoint

    restored = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device: restored.append(device))
    state = checkpoint.rng_state()
    state["cuda"] = [torch.zeros(16, dtype=torch.uint8), torch.ones(16, dtype=torch.uint8)]
    checkpoint.set_rng_state(state)
    assert restored == [0]


@pytest.mark.gpu
def test_checkpoint_from_the_cpu_resumes_on_a_gpu_with_cpu_step_counters(tmp_path):
    device = cg.get_device("cuda")
    model, optimizer, loader = make_run()
    cg.fit(model, loader, None, optimizer, "cpu", epochs=1, checkpoint=tmp_path / "g.pt", progress=False, verbose=False)
    gpu_model = make_run(seed=4)[0].to(device)
    gpu_optimizer = torch.optim.Adam(gpu_model.parameters(), lr=1e-2)
    cg.train.checkpoint.load_checkpoint(tmp_path / "g.pt", gpu_model, gpu_optimizer)
    for state in gpu_optimizer.state.values():
        assert state["step"].device.type == "cpu" and state["exp_avg"].device.type == "cuda"
    assert all(p.device.type == "cuda" for p in gpu_model.parameters())


def test_finished_checkpoint_runs_no_more_epochs(tmp_path, capsys):
    model, optimizer, loader = make_run()
    path = tmp_path / "done.pt"
    cg.fit(model, loader, None, optimizer, "cpu", epochs=1, checkpoint=path, progress=False, verbose=False)
    history = cg.fit(model, loader, None, optimizer, "cpu", epochs=1, checkpoint=path, progress=False)
    assert len(history) == 1 and "resumed from" in capsys.readouterr().out


def test_save_and_load_round_trip_with_scaler(tmp_path):
    model, optimizer, _ = make_run()
    scaler = torch.amp.GradScaler("cpu", init_scale=1024)
    cg.save_checkpoint(tmp_path / "c.pt", model, optimizer, epoch=3, scaler=scaler, history=[{"epoch": 3}])
    fresh, fresh_optimizer, _ = make_run(seed=5)
    fresh_scaler = torch.amp.GradScaler("cpu")
    state = cg.train.checkpoint.load_checkpoint(tmp_path / "c.pt", fresh, fresh_optimizer, scaler=fresh_scaler)
    assert state == {"epoch": 3, "history": [{"epoch": 3}]}
    assert fresh_scaler.get_scale() == 1024
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), fresh.state_dict().values(), strict=True))


def test_missing_checkpoint(tmp_path):
    model, _, _ = make_run()
    with pytest.raises(
        cg.train.checkpoint.CheckpointError, match=r"No checkpoint at .*nope.pt.*is Google Drive mounted"
    ):
        cg.train.checkpoint.load_checkpoint(tmp_path / "nope.pt", model)


def test_truncated_checkpoint_is_a_clear_error(tmp_path):
    model, optimizer, _ = make_run()
    path = cg.save_checkpoint(tmp_path / "c.pt", model, optimizer, epoch=1)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(cg.train.checkpoint.CheckpointError, match="not a readable checkpoint .truncated or corrupted"):
        cg.train.checkpoint.load_checkpoint(path, model)


def test_checkpoint_of_another_model_is_a_clear_error(tmp_path):
    model, optimizer, _ = make_run()
    path = cg.save_checkpoint(tmp_path / "c.pt", model, optimizer, epoch=1)
    other = nn.Sequential(nn.Linear(8, 64), nn.Dropout(0.2), nn.ReLU(), nn.Linear(64, 2))
    with pytest.raises(
        cg.train.checkpoint.CheckpointError, match=r"saved from a different model .*different shapes .*0.weight"
    ):
        cg.train.checkpoint.load_checkpoint(path, other)
    with pytest.raises(cg.train.checkpoint.CheckpointError, match=r"missing \['bias', 'weight'\]"):
        cg.train.checkpoint.load_checkpoint(path, nn.Linear(8, 2))


def test_foreign_file_is_refused(tmp_path):
    torch.save({"weights": 1}, tmp_path / "other.pt")
    with pytest.raises(cg.train.checkpoint.CheckpointError, match="not written by colab_gpu.save_checkpoint"):
        cg.train.checkpoint.load_checkpoint(tmp_path / "other.pt", nn.Linear(2, 2))


def test_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    model, optimizer, _ = make_run()
    path = cg.save_checkpoint(tmp_path / "c.pt", model, optimizer, epoch=1)

    def crash(obj, f):
        f.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(OSError, match="disk full"):
        cg.save_checkpoint(path, model, optimizer, epoch=2)
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]
    monkeypatch.undo()
    assert cg.train.checkpoint.load_checkpoint(path, model)["epoch"] == 1


def test_process_killed_while_writing_leaves_the_previous_checkpoint(tmp_path):
    model, optimizer, _ = make_run()
    path = cg.save_checkpoint(tmp_path / "c.pt", model, optimizer, epoch=1)
    writer = textwrap.dedent(f"""
        import torch, colab_gpu as cg
        from torch import nn
        model = nn.Sequential(nn.Linear(8, 32), nn.Dropout(0.2), nn.ReLU(), nn.Linear(32, 2))
        model.register_buffer("ballast", torch.zeros(2**29, dtype=torch.uint8))  # 512 MB: a slow write
        cg.save_checkpoint({str(path)!r}, model, torch.optim.SGD(model.parameters(), 0.1), epoch=2)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    child = subprocess.Popen([sys.executable, "-c", writer], env=env)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".c.pt.*.tmp")) and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.01)
    assert child.poll() is None, "the writer finished before it could be killed"
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert cg.train.checkpoint.load_checkpoint(path, model)["epoch"] == 1  # the previous checkpoint, intact


def test_default_checkpoint_dir_is_local_without_drive(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cg.default_checkpoint_dir("run") == tmp_path / "run"
