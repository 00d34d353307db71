"""Every self-check keeps every step of its work inside its error handling (issue 49): given None (the exercise left
undone), a wrong type, or a function that raises, it prints a hint and returns a failed CheckResult, never crashing
the notebook's cell (Colab's "Run all" stops at the first uncaught error)."""

import pytest
import torch
from torch import nn

import colab_gpu as cg


def raises(*args, **kwargs):
    raise ValueError("the learner's bug")


MODEL = nn.Sequential(nn.Flatten(), nn.Linear(8, 2))
IMAGES = torch.randn(4, 8)
LOADER = [(torch.randn(4, 8), torch.zeros(4, dtype=torch.long))]
DIGITS = None


def digits():
    global DIGITS
    DIGITS = DIGITS or cg.load_digits(32, 3).limit(train=192, test=96)
    return DIGITS


#: Each check with its learner's argument as X: every other argument as a lesson passes it.
CALLS = {
    "amp_step": lambda X: cg.checks.amp_step(X, "cpu"),
    "bottleneck_fix": lambda X: cg.checks.bottleneck_fix(lambda s: torch.linspace(2.3, 2.0, s), X, "cpu", steps=2),
    "class_accuracy": lambda X: cg.checks.class_accuracy(X, torch.tensor([0, 1, 1]), torch.tensor([0, 1, 0])),
    "compiles_once": lambda X: cg.checks.compiles_once(X, LOADER),
    "created_on": lambda X: cg.checks.created_on(X, "meta"),
    "csv_dataset": lambda X: cg.checks.csv_dataset(X),
    "ddp_script": lambda X: cg.checks.ddp_script(X, "weights.pt"),
    "evaluation_memory": lambda X: cg.checks.evaluation_memory(X, lambda m, i: m(i), MODEL, IMAGES),
    "fast_loop": lambda X: cg.checks.fast_loop(X, digits(), "cpu"),
    "gpu_count": lambda X: cg.checks.gpu_count(X),
    "label_validator": lambda X: cg.checks.label_validator(X),
    "loader_settings": lambda X: cg.checks.loader_settings(X, "cpu"),
    "loader_speed": lambda X: cg.checks.loader_speed(X, LOADER, "cpu", samples=4),
    "lora_linear": lambda X: cg.checks.lora_linear(X),
    "fsdp_shard": lambda X: cg.checks.fsdp_shard(X),
    "memory_budget": lambda X: cg.checks.memory_budget(
        X, lambda: torch.nn.Linear(4, 2), lambda m: m(torch.ones(3, 4)).square().mean(), budget_mib=1
    ),
    "memory_saving": lambda X: cg.checks.memory_saving(X, raises, MODEL, IMAGES, torch.zeros(4, dtype=torch.long)),
    "on_device": lambda X: cg.checks.on_device(X, "cpu"),
    "precision_rule": lambda X: cg.checks.precision_rule(X),
    "prediction_speed": lambda X: cg.checks.prediction_speed(X, lambda m, i: m(i), MODEL, IMAGES, "cpu"),
    "profile_labels": lambda X: cg.checks.profile_labels(X),
    "regime": lambda X: cg.checks.regime(X, "CPU-bound", "GPU runtime"),
    "released": lambda X: cg.checks.released(X),
    "shard": lambda X: cg.checks.shard(X, dataset_size=10, world_size=2, rank=0),
    "timer": lambda X: cg.checks.timer(X, lambda: None, 0.1, "cpu"),
    "train_loop": lambda X: cg.checks.train_loop(X, MODEL, LOADER, "cpu"),
}


def test_every_check_of_a_learners_answer_is_listed_here():
    assert set(CALLS) == set(cg.checks.__all__)  # `that`, the contract the checks end with, is not one


@pytest.mark.parametrize("answer", [None, 42, raises], ids=["None", "a wrong type", "a function that raises"])
@pytest.mark.parametrize("check", sorted(CALLS))
def test_a_check_given_a_wrong_answer_hints_and_never_crashes(check, answer, capsys):
    result = CALLS[check](answer)
    out = capsys.readouterr().out
    assert isinstance(result, cg.checks.core.CheckResult) and not result, (check, result)
    assert "❌ Not yet:" in out and "Traceback" not in out
