"""The bench's rows for lesson 15 (past one GPU): what each process holds with FSDP2 against DDP, and what a QLoRA
step holds against full fine-tuning of the same model; both measured with the step's ledger (`colab_gpu.llm.ledger`),
on a GPU also by the allocator's peak."""

from __future__ import annotations

import importlib.util
import json
import tempfile
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

from ..hardware.units import MIB
from ..llm.hub_models import OFFLINE_CONFIGS, built_in, quiet_progress, transformers_module
from ..llm.ledger import step_ledger
from ..measure.memory import measure_peak
from ..train.parallel import launch_torchrun
from . import sharding_worker
from .rows import Row, skipped

#: A Llama-family model as QLoRA fine-tunes one: SmolLM2-135M's layer, 4 of its 30 layers (the bench runs offline).
QLORA_MODEL = OFFLINE_CONFIGS["HuggingFaceTB/SmolLM2-135M"] | {"num_hidden_layers": 4}
PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def fsdp_memory_row(device: str | torch.device) -> Row:
    """Two processes train lesson 15's decoder with DDP, then FSDP2: the ratio of what one DDP process holds
    (weights, gradients, AdamW's state) to what one FSDP2 process holds. With nccl on two GPUs, gloo between two CPU
    processes elsewhere; on GPUs the allocator's peak per process too."""
    device = torch.device(device)
    backend = "nccl" if device.type == "cuda" and torch.cuda.device_count() >= 2 else "gloo"
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "sharding.json"
        launch_torchrun(Path(sharding_worker.__file__), 2, "--backend", backend, "--out", str(out), echo=False)
        run = json.loads(out.read_text())
    held = {mode: max(rank["held"] for rank in ranks) for mode, ranks in run["rows"].items()}
    peaks = {mode: max(rank["peak"] or 0 for rank in ranks) for mode, ranks in run["rows"].items()}
    details = {
        "backend": backend,
        "processes": 2,
        "parameters": run["parameters"],
        "ddp_held_mib": round(held["ddp"] / MIB, 2),
        "fsdp_held_mib": round(held["fsdp"] / MIB, 2),
    }
    if backend == "nccl":
        details |= {"ddp_peak_mib": round(peaks["ddp"] / MIB, 1), "fsdp_peak_mib": round(peaks["fsdp"] / MIB, 1)}
    return Row(
        key="fsdp_memory",
        name="what one process holds, DDP vs FSDP2 on 2 processes (weights, gradients, AdamW)",
        device=f"{backend}, 2 processes",
        status="ok",
        ratio=round(held["ddp"] / held["fsdp"], 2),
        unit="x",
        details=details,
    )


def qlora_memory_row(device: str | torch.device) -> Row:
    """One training step of a Llama-family model, fully fine-tuned with AdamW (fp32) against QLoRA (linear layers
    in 4-bit NF4, rank-16 LoRA adapters on every projection, AdamW on the adapters): the ratio of the two ledgers'
    totals; on a GPU the allocator's peaks too. Skipped where bitsandbytes or peft is missing."""
    device = torch.device(device)
    name = "one training step, full fine-tuning vs QLoRA (memory by the step's ledger)"
    missing = [p for p in ("bitsandbytes", "peft") if importlib.util.find_spec(p) is None]
    if missing:
        return skipped("qlora_memory", name, device, f"needs {' and '.join(missing)} (pip, the [lessons] extra)")
    import peft

    transformers = transformers_module()
    compute = torch.float16 if device.type == "cuda" else torch.float32
    config = transformers.AutoConfig.for_model(**QLORA_MODEL)
    tokens = torch.randint(0, config.vocab_size, (2, 129), generator=torch.Generator().manual_seed(0)).to(device)

    def loss_of(model):
        logits = model(input_ids=tokens[:, :-1]).logits
        return F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten())

    torch.manual_seed(0)
    with built_in(torch.float32, device):
        full = transformers.AutoModelForCausalLM.from_config(config)
    with measure_peak(device) as full_peak:
        full_ledger = step_ledger(full, torch.optim.AdamW(full.parameters()), loss_of)
    with tempfile.TemporaryDirectory() as folder:
        with quiet_progress(transformers):
            full.to(torch.float16).save_pretrained(folder)
        del full
        four_bit = transformers.BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=compute
        )
        with quiet_progress(transformers):
            base = transformers.AutoModelForCausalLM.from_pretrained(
                folder, quantization_config=four_bit, dtype=compute, device_map={"": device}
            )
    lora = peft.LoraConfig(r=16, lora_alpha=32, target_modules=PROJECTIONS, task_type="CAUSAL_LM")
    with warnings.catch_warnings():  # peft reads a name transformers 5 renamed: its warning, not the bench's
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing", category=FutureWarning)
        qlora = peft.get_peft_model(base, lora)
    adapters = [p for p in qlora.parameters() if p.requires_grad]
    with measure_peak(device) as qlora_peak:
        qlora_ledger = step_ledger(qlora, torch.optim.AdamW(adapters), loss_of)
    details = {
        "layers": config.num_hidden_layers,
        "compute": str(compute).removeprefix("torch."),
        "full_mib": round(full_ledger.total / MIB, 1),
        "qlora_mib": round(qlora_ledger.total / MIB, 1),
        "full_parts_mib": {k: round(v / MIB, 2) for k, v in full_ledger.parts.items()},
        "qlora_parts_mib": {k: round(v / MIB, 2) for k, v in qlora_ledger.parts.items()},
    }
    if full_peak.peak_mib is not None:
        details |= {"full_peak_mib": round(full_peak.peak_mib, 1), "qlora_peak_mib": round(qlora_peak.peak_mib, 1)}
    return Row("qlora_memory", name, str(device), "ok", round(full_ledger.total / qlora_ledger.total, 1), "x", details)
