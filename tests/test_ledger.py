"""Lesson 15: the ledger of a training step (colab_gpu.llm.ledger), its exercise's check (checks.memory_budget), and the
offline stand-in that `from_pretrained` reads (hub_models.pretrained_source)."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

import colab_gpu as cg
from colab_gpu.hardware.units import MIB
from colab_gpu.llm import hub_models
from colab_gpu.llm.ledger import held_bytes, step_ledger
from colab_gpu.llm.llm_memory import ModelShape, finetune_bytes
from tests.test_hub_models import TINY_LLAMA, offline

SHAPE = ModelShape("test", vocab=64, hidden=32, intermediate=96, layers=3, heads=4, kv_heads=2, head_dim=8)
ROWS = (torch.arange(4)[:, None] * 7 + torch.arange(33)) % 64  # each token follows from the last: learnable


def make_model() -> cg.TinyDecoder:
    torch.manual_seed(0)
    return cg.TinyDecoder(SHAPE)


def loss_of(model: nn.Module) -> torch.Tensor:
    logits, _ = model(ROWS[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1), ROWS[:, 1:].flatten())


class Checkpointed(nn.Module):
    def __init__(self, block: nn.Module):
        super().__init__()
        self.block = block

    def forward(self, *args):
        return checkpoint(self.block, *args, use_reentrant=False)


def test_the_ledger_of_full_training_is_lesson_14s_formula_to_the_byte():
    model = make_model()
    ledger = step_ledger(model, torch.optim.AdamW(model.parameters()), loss_of)
    formula = finetune_bytes(SHAPE, "full")
    assert ledger.parts["weights"] == formula["weights"] and ledger.parts["gradients"] == formula["gradients"]
    steps = 4 * len(list(model.parameters()))  # AdamW's step count, one fp32 number per tensor
    assert ledger.parts["optimizer state"] == formula["adam moments"] + steps
    assert ledger.parts["activations"] > 0 and all(p.grad is None for p in model.parameters())  # zeroed after
    assert ledger.total == sum(ledger.parts.values()) and "MiB" in str(ledger)


def test_checkpointing_each_block_cuts_the_activations_and_computes_the_same_loss():
    plain, light = make_model(), make_model()
    light.layers = nn.ModuleList(Checkpointed(b) for b in light.layers)
    full = step_ledger(plain, torch.optim.SGD(plain.parameters(), lr=0.1), loss_of)
    cut = step_ledger(light, torch.optim.SGD(light.parameters(), lr=0.1), loss_of)
    assert cut.parts["activations"] < full.parts["activations"] / 2
    assert cut.loss == pytest.approx(full.loss, abs=1e-6) and cut.parts["optimizer state"] == 0


def test_a_shard_counts_as_the_part_this_process_holds():
    class Shard(torch.Tensor):  # stands in for FSDP2's DTensor: what matters is to_local()
        pass

    whole = torch.zeros(100)
    shard = whole.as_subclass(Shard)
    shard.to_local = lambda: whole[:50].clone()
    assert held_bytes([shard]) == 50 * 4 and held_bytes([whole, whole[:10]]) == 400  # a view adds nothing


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((nn.Linear(2, 2), "adam", loss_of), "takes an nn.Module and a torch.optim optimizer"),
        ((make_model(), None, loss_of), "takes an nn.Module and a torch.optim optimizer"),
        ((nn.Linear(2, 2), torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=1), lambda m: 3.0), "one-number tensor"),
    ],
)
def test_wrong_arguments_say_what_the_ledger_takes(args, said):
    with pytest.raises((TypeError, ValueError), match=said):
        step_ledger(*args)


def solution(model):
    model.layers = nn.ModuleList(Checkpointed(b) for b in model.layers)
    return model, torch.optim.Adafactor(model.parameters(), lr=5e-2)


def budget_for_solution() -> float:
    """A budget the solution fits and plain AdamW, or either lever alone, does not (as lesson 15's 20 MiB)."""
    model, optimizer = solution(make_model())
    light = step_ledger(model, optimizer, loss_of).total
    checkpointed = make_model()
    checkpointed.layers = nn.ModuleList(Checkpointed(b) for b in checkpointed.layers)
    with_adamw = step_ledger(checkpointed, torch.optim.AdamW(checkpointed.parameters()), loss_of).total
    return (light + with_adamw) / 2 / MIB


def test_the_budget_check_passes_the_solution_and_says_what_it_measured(capsys):
    assert cg.checks.memory_budget(solution, make_model, loss_of, budget_mib=budget_for_solution(), steps=30)
    assert "within" in capsys.readouterr().out


def attempt_adamw(model):
    return model, torch.optim.AdamW(model.parameters(), lr=3e-3)


def attempt_no_checkpoint(model):
    return model, torch.optim.Adafactor(model.parameters(), lr=5e-2)


def attempt_half(model):
    model.layers = nn.ModuleList(Checkpointed(b) for b in model.layers)
    model = model.to(torch.bfloat16)
    return model, torch.optim.Adafactor(model.parameters(), lr=5e-2)


def attempt_not_training(model):
    model.layers = nn.ModuleList(Checkpointed(b) for b in model.layers)
    return model, torch.optim.Adafactor(model.parameters(), lr=1e-9)


def attempt_other_model(model):
    smaller = cg.TinyDecoder(ModelShape("x", 64, 16, 32, layers=1, heads=2, kv_heads=1, head_dim=8))
    return smaller, torch.optim.SGD(smaller.parameters(), lr=0.1)


def attempt_foreign_optimizer(model):
    model.layers = nn.ModuleList(Checkpointed(b) for b in model.layers)
    return model, torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)


@pytest.mark.parametrize(
    ("attempt", "said"),
    [
        (attempt_adamw, "checkpoint each block"),  # the activations are the largest part
        (attempt_no_checkpoint, "the largest part is the activations"),
        (attempt_half, "a T4 has no bf16"),
        (attempt_not_training, "does not learn"),
        (attempt_other_model, "the model you were given"),
        (attempt_foreign_optimizer, "holds none of the returned model's weights"),
        (lambda model: model, "should return (model, optimizer)"),
    ],
)
def test_the_usual_mistakes_get_their_hint(attempt, said, capsys):
    assert not cg.checks.memory_budget(attempt, make_model, loss_of, budget_mib=budget_for_solution(), steps=30)
    assert said in capsys.readouterr().out


def test_offline_the_stand_in_is_saved_once_and_read_by_from_pretrained(monkeypatch, tmp_path, capsys):
    offline(monkeypatch)
    folder = hub_models.pretrained_source("course/tiny-llama", tmp_path, layers=1)
    assert "could not be downloaded" in capsys.readouterr().out and not list(tmp_path.glob("*.partial"))
    model = hub_models.transformers_module().AutoModelForCausalLM.from_pretrained(folder)
    assert model.config.num_hidden_layers == 1 and model.config.hidden_size == TINY_LLAMA["hidden_size"]
    assert hub_models.pretrained_source("course/tiny-llama", tmp_path, layers=1) == folder  # kept, not rewritten


def test_online_the_name_is_what_from_pretrained_gets(monkeypatch, tmp_path):
    offline(monkeypatch, cached=True)
    assert hub_models.pretrained_source("course/tiny-llama", tmp_path) == "course/tiny-llama"
    assert not list(tmp_path.iterdir())
    with pytest.raises(ValueError, match="has no offline stand-in; those are"):
        hub_models.pretrained_source("someone/else", tmp_path)


def shard_right(model, half):
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mixed = MixedPrecisionPolicy(param_dtype=half, reduce_dtype=torch.float32)
    for block in model.layers:
        fully_shard(block, mp_policy=mixed)
    fully_shard(model, mp_policy=mixed)
    return model


def shard_with(policy=None, *, blocks=True, root=True):
    def shard(model, half):
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        mixed = MixedPrecisionPolicy(**(policy(half) if policy else {}))
        for block in model.layers if blocks else []:
            fully_shard(block, mp_policy=mixed)
        if root:
            fully_shard(model, mp_policy=mixed)
        return model

    return shard


def test_the_fsdp_check_passes_a_right_shard_in_a_group_of_one_and_leaves_no_group(capsys):
    import torch.distributed as dist

    assert cg.checks.fsdp_shard(shard_right)
    assert "losses of the unsharded model" in capsys.readouterr().out
    assert not dist.is_initialized()  # the group it made for the check is gone


@pytest.mark.parametrize(
    ("shard", "said"),
    [
        (shard_with(lambda h: {"param_dtype": h}, root=False), "but not the model"),
        (shard_with(lambda h: {"param_dtype": h}, blocks=False), "block 0 is not sharded on its own"),
        (shard_with(lambda h: {"param_dtype": torch.bfloat16}), "a T4 has no bf16"),
        (shard_with(), "the blocks compute in float32, not in half"),
        (shard_with(lambda h: {"param_dtype": h, "reduce_dtype": h}), "reduce them in fp32"),
        (lambda model, half: None, "should return the model it sharded"),
    ],
)
def test_the_fsdp_check_names_each_mistake(shard, said, capsys):
    assert not cg.checks.fsdp_shard(shard)
    assert said in capsys.readouterr().out


def test_a_folder_in_the_stand_ins_place_is_named_not_overwritten(monkeypatch, tmp_path):
    offline(monkeypatch)
    (tmp_path / "course--tiny-llama-1-layers").mkdir()
    (tmp_path / "course--tiny-llama-1-layers" / "mine.txt").write_text("keep")
    with pytest.raises(RuntimeError, match="holds no config.json"):
        hub_models.pretrained_source("course/tiny-llama", tmp_path, layers=1)
    assert (tmp_path / "course--tiny-llama-1-layers" / "mine.txt").read_text() == "keep"


def test_progress_bars_turned_off_stay_off():
    transformers = hub_models.transformers_module()
    logging = transformers.utils.logging
    logging.disable_progress_bar()
    try:
        with hub_models.quiet_progress(transformers):
            pass
        assert not logging.is_progress_bar_enabled()
    finally:
        logging.enable_progress_bar()
    with hub_models.quiet_progress(transformers):
        assert not logging.is_progress_bar_enabled()
    assert logging.is_progress_bar_enabled()
