import os
import subprocess
import textwrap

import pytest
import torch
from nbtools import read_lesson
from paths import NOTEBOOKS

import colab_gpu as cg
from colab_gpu.train import parallel

from .conftest import T4

TORCHRUN_ENV = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29555"}


def as_torchrun_process(monkeypatch, **overrides: str) -> None:
    """Set the variables torchrun gives each process (one process of one by default)."""
    for name, value in dict(TORCHRUN_ENV, **overrides).items():
        monkeypatch.setenv(name, value)


def test_ddp_setup_outside_torchrun_says_how_to_launch(monkeypatch):
    for name in parallel.TORCHRUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(RuntimeError, match=r"must run in a process started by torchrun.*'RANK'.*torchrun --standalone"):
        cg.ddp_setup()


def test_ddp_setup_bad_backend_and_nccl_without_gpu(monkeypatch, no_gpu):
    as_torchrun_process(monkeypatch)
    with pytest.raises(ValueError, match="Unknown backend 'mpi'"):
        cg.ddp_setup("mpi")
    with pytest.raises(ValueError, match="nccl backend needs CUDA GPUs"):
        cg.ddp_setup("nccl")


@pytest.mark.parametrize(("p2p", "expected"), [(False, {"NCCL_CUMEM_HOST_ENABLE": "0"}), (True, {})])
def test_nccl_workaround_only_for_gpus_without_peer_access(monkeypatch, fake_gpus, p2p, expected):
    # Kaggle's two T4s have no P2P; NCCL >= 2.24 then fails at the first collective unless cuMem
    # host buffers are off. GPUs with P2P (NVLink machines) keep NCCL's defaults.
    fake_gpus(T4, T4)
    monkeypatch.setattr(torch.cuda, "can_device_access_peer", lambda a, b: p2p)
    monkeypatch.delenv("NCCL_CUMEM_HOST_ENABLE", raising=False)
    assert parallel.nccl_workarounds(2) == expected
    assert os.environ.get("NCCL_CUMEM_HOST_ENABLE") == expected.get("NCCL_CUMEM_HOST_ENABLE")


def test_nccl_workaround_keeps_the_users_choice_and_ignores_one_gpu(monkeypatch, fake_gpus):
    fake_gpus(T4, T4)
    monkeypatch.setattr(torch.cuda, "can_device_access_peer", lambda a, b: False)
    monkeypatch.setenv("NCCL_CUMEM_HOST_ENABLE", "1")
    assert parallel.nccl_workarounds(2) == {} and os.environ["NCCL_CUMEM_HOST_ENABLE"] == "1"
    monkeypatch.delenv("NCCL_CUMEM_HOST_ENABLE")
    assert parallel.nccl_workarounds(1) == {} and "NCCL_CUMEM_HOST_ENABLE" not in os.environ


def test_ddp_setup_applies_the_nccl_workaround_before_the_group(monkeypatch, fake_gpus):
    fake_gpus(T4, T4)
    monkeypatch.setattr(torch.cuda, "can_device_access_peer", lambda a, b: False)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    monkeypatch.delenv("NCCL_CUMEM_HOST_ENABLE", raising=False)
    seen = {}
    monkeypatch.setattr(
        parallel.dist,
        "init_process_group",
        lambda *a, **k: seen.update(env=os.environ.get("NCCL_CUMEM_HOST_ENABLE"), backend=a[0]),
    )
    as_torchrun_process(monkeypatch, WORLD_SIZE="2", LOCAL_WORLD_SIZE="2")
    info = cg.ddp_setup("nccl")
    assert seen == {"env": "0", "backend": "nccl"} and info.device == torch.device("cuda", 0)


def test_more_processes_than_gpus_is_explained(monkeypatch, fake_gpus):
    fake_gpus()
    as_torchrun_process(monkeypatch, LOCAL_RANK="1", RANK="1", WORLD_SIZE="2")
    with pytest.raises(RuntimeError, match=r"needs cuda:1 but this machine only has 1 GPU.*--nproc-per-node=1"):
        cg.ddp_setup("nccl")


def test_single_process_gloo_group_in_this_process(monkeypatch, capsys):
    as_torchrun_process(monkeypatch)
    info = cg.ddp_setup("gloo")
    try:
        assert info == cg.DistInfo(0, 0, 1, "gloo", torch.device("cpu")) and info.is_main
        assert cg.all_reduce_mean(3.0, info) == 3.0
        cg.rank0_print(info, "hello")
        assert capsys.readouterr().out == "[rank 0/1] hello\n"
    finally:
        cg.ddp_teardown()
    assert not torch.distributed.is_initialized()
    cg.ddp_teardown()  # a second teardown is harmless


def test_tensors_given_to_gloo_outlive_the_group(monkeypatch):
    # torch < 2.8 deadlocks when the group's destructor (holding the GIL) joins a gloo worker that
    # frees the last reference to a Python-made tensor. all_reduce_mean keeps its tensors alive
    # until teardown has destroyed the group, then lets them go.
    as_torchrun_process(monkeypatch, MASTER_PORT="29557")
    info = cg.ddp_setup("gloo")
    alive_at_destroy = []
    real_destroy = parallel.dist.destroy_process_group
    monkeypatch.setattr(
        parallel.dist,
        "destroy_process_group",
        lambda: alive_at_destroy.append(len(parallel._IN_COLLECTIVES)) or real_destroy(),
    )
    try:
        assert cg.all_reduce_mean(3.0, info) == 3.0 and cg.all_reduce_mean(1.0, info) == 1.0
    finally:
        cg.ddp_teardown()
    assert alive_at_destroy == [2] and parallel._IN_COLLECTIVES == []


def _native_threads() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through Linux's /proc")
def test_teardown_frees_the_group_that_a_finished_ddp_model_held(monkeypatch):
    # A group that survives until interpreter exit (wrapping a model in DDP used to keep it alive, through
    # torch._dynamo) can abort the process there, so teardown must free it: the group's destructor joins
    # gloo's native threads, which brings the count back to where it was.
    as_torchrun_process(monkeypatch, MASTER_PORT="29556")
    before = _native_threads()
    cg.ddp_setup("gloo")

    def train_one_step():
        model = torch.nn.parallel.DistributedDataParallel(cg.mlp(8, hidden=4, classes=2))
        model(torch.randn(4, 8)).sum().backward()

    try:
        train_one_step()
        assert _native_threads() > before  # gloo's threads are running
    finally:
        cg.ddp_teardown()
    assert _native_threads() == before


def test_two_process_gloo_job_all_reduces(tmp_path, capsys):
    script = tmp_path / "job.py"
    script.write_text(
        textwrap.dedent("""
        import torch
        import colab_gpu as cg

        info = cg.ddp_setup("gloo")
        try:
            mean = cg.all_reduce_mean(float(info.rank), info)
            cg.rank0_print(info, f"mean rank {mean}")
            print(f"rank {info.rank} of {info.world_size} done", flush=True)
        finally:
            cg.ddp_teardown()
    """)
    )
    result = cg.launch_torchrun(script, 2, timeout=240, echo=False)
    assert "[rank 0/2] mean rank 0.5" in result.stdout
    assert "rank 0 of 2 done" in result.stdout and "rank 1 of 2 done" in result.stdout


def test_launch_torchrun_bad_input(tmp_path):
    with pytest.raises(FileNotFoundError, match="No script at"):
        cg.launch_torchrun(tmp_path / "missing.py", 2)
    script = tmp_path / "fails.py"
    script.write_text("raise SystemExit('boom')\n")
    with pytest.raises(ValueError, match="nproc must be at least 1"):
        cg.launch_torchrun(script, 0)
    with pytest.raises(RuntimeError, match=r"(?s)torchrun exited with code 1.*boom"):
        cg.launch_torchrun(script, 1, timeout=240, echo=False)


def lesson_ddp_solution() -> str:
    """The script lesson 08's exercise 2 writes, as its solution cell has it (`%%writefile` line left out)."""
    cells = read_lesson(NOTEBOOKS / "08_multi_gpu_ddp.py").cells
    solved = [c.source for c in cells if "solution" in c.metadata.get("tags", []) and "my_ddp_train.py" in c.source]
    return solved[0].split("\n", 1)[1]


def plain_ddp_script(folder, train_body="pass", replace=()):
    """Lesson 08's exercise 2 solved, with each (old, new) of ``replace`` applied once (a learner's mistake); beside it
    a ddp_train.py whose train(info, args) runs ``train_body``."""
    (folder / "ddp_train.py").write_text(
        "import argparse\n\n\ndef parse_args():\n    parser = argparse.ArgumentParser()\n"
        "    parser.add_argument('--backend')\n    parser.add_argument('--out')\n    return parser.parse_args()\n\n\n"
        f"def train(info, args):\n    {train_body}\n"
    )
    text = lesson_ddp_solution()
    for old, new in replace:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    script = folder / "my_ddp.py"
    script.write_text(text)
    return script


FIX = 'os.environ.setdefault("NCCL_CUMEM_HOST_ENABLE", "0")'
JOIN = 'dist.init_process_group("nccl", device_id=device)'
DRY_RUN_MISTAKES = {  # the learner's mistake: (the solution's text and what it becomes, what the hint says)
    "the nccl path never claims its GPU": (("torch.cuda.set_device(device)", "pass"), "never claims its GPU"),
    "NCCL's setting deleted, its comment kept": ((FIX, "pass  # NCCL_CUMEM_HOST_ENABLE"), f"{FIX} must come before"),
    "NCCL's setting after the group is joined": ([(FIX, "pass"), (JOIN, f"{JOIN}; {FIX}")], "must come before"),
    "the rank read from LOCAL_RANK": (('int(os.environ["RANK"])', 'int(os.environ["LOCAL_RANK"])'), "RANK=3"),
    "the nccl group joined with gloo": ((JOIN, 'dist.init_process_group("gloo")'), "joined with 'gloo'"),
    "the group never left": (("    dist.destroy_process_group()", "    pass"), "destroy_process_group()"),
    "the group never joined": (('dist.init_process_group("gloo")', "pass"), "never joins the group"),
    "teardown() deleted from the main block": (("        teardown()", "        pass"), "leave the group once"),
    "the main block's guard flipped": (('if __name__ == "__main__":', 'if __name__ != "__main__":'), "it did nothing"),
}


@pytest.mark.parametrize("mistake", sorted(DRY_RUN_MISTAKES))
def test_check_ddp_script_dry_run_sees_the_gpu_paths_mistakes_on_a_cpu(tmp_path, mistake):
    """Issue 62: on a CPU runtime the launch runs gloo only, and the NCCL test read the text (the template's own
    comment satisfied it). A dry run with stand-ins for the group and the GPU sees each mistake, without torchrun."""
    replace, hint = DRY_RUN_MISTAKES[mistake]
    script = plain_ddp_script(tmp_path, replace=replace if isinstance(replace, list) else [replace])
    before = dict(os.environ)
    result = cg.checks.ddp_script(script, "w.pt")
    assert not result and hint in result.message, result.message
    assert dict(os.environ) == before  # the dry run leaves the environment as it found it


def test_check_ddp_script_reads_the_script_then_runs_it(tmp_path):
    assert "run the %%writefile cell first" in cg.checks.ddp_script(tmp_path / "none.py", "w.pt").message
    script = plain_ddp_script(tmp_path, train_body="raise NameError('rank is not defined')")
    failed = cg.checks.ddp_script(script, "w.pt", nproc=1, timeout=240)
    assert not failed and "the job failed with gloo: NameError: rank is not defined" in failed.message, failed.message
    script = plain_ddp_script(tmp_path, train_body="import time; time.sleep(60)")
    hung = cg.checks.ddp_script(script, "w.pt", nproc=1, timeout=5)
    assert not hung and "did not finish in 5 s" in hung.message
    left = subprocess.run(["pgrep", "-f", str(script)], capture_output=True, text=True).stdout.split()
    assert not left, f"the job's processes outlived its timeout: {left}"  # the whole process group is killed


def test_check_ddp_script_wants_a_rank_per_process(tmp_path):
    """Issue 51: a setup that made every process rank 0 passed."""
    said = "print('gloo on cpu: all_reduce(rank + 1) = 2')"
    body = f"{said}; {said}; open(args.out, 'w').close()"
    script = plain_ddp_script(tmp_path, train_body=body)
    same_rank = cg.checks.ddp_script(script, "w.pt", nproc=1, timeout=240)
    assert not same_rank and "the processes' ranks are not 0..0, one each" in same_rank.message, same_rank.message
