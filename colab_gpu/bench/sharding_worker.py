"""One process of the bench's FSDP2 row (`sharding.fsdp_memory_row` starts two with torchrun): lesson 15's small
decoder trained a few steps with DDP, then with FSDP2, in the same processes; rank 0 writes what each process held.

Launch: torchrun --standalone --nproc-per-node=2 sharding_worker.py --out FILE [--backend gloo|nccl]
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

from colab_gpu.llm.ledger import held_bytes, optimizer_state_tensors
from colab_gpu.llm.llm_memory import ModelShape
from colab_gpu.llm.tiny_lm import TinyDecoder
from colab_gpu.train.parallel import DistInfo, ddp_setup, ddp_teardown

SHAPE = ModelShape("bench decoder", vocab=256, hidden=128, intermediate=384, layers=6, heads=4, kv_heads=2, head_dim=32)
STEPS, BATCH, TOKENS = 3, 4, 64


def held(mode: str, info: DistInfo) -> dict:
    torch.manual_seed(0)
    with torch.device(info.device):
        model = TinyDecoder(SHAPE)
    if mode == "ddp":
        model = DDP(model, device_ids=[info.local_rank] if info.device.type == "cuda" else None)
    else:
        for block in model.layers:
            fully_shard(block)
        fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if info.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(info.device)
    tokens = torch.randint(0, SHAPE.vocab, (BATCH, TOKENS + 1), generator=torch.Generator().manual_seed(info.rank))
    tokens = tokens.to(info.device)
    for _ in range(STEPS):
        logits, _ = model(tokens[:, :-1])
        optimizer.zero_grad()
        F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten()).backward()
        optimizer.step()
    parameters = list(model.parameters())
    return {
        "held": held_bytes(parameters)
        + held_bytes(p.grad for p in parameters if p.grad is not None)
        + held_bytes(optimizer_state_tensors(optimizer)),
        "peak": torch.cuda.max_memory_allocated(info.device) if info.device.type == "cuda" else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default=None)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    info = ddp_setup(args.backend)
    try:
        rows = {}
        for mode in ("ddp", "fsdp"):
            gathered = [None] * info.world_size
            torch.distributed.all_gather_object(gathered, held(mode, info))
            rows[mode] = gathered
        if info.is_main:
            with open(args.out, "w") as file:
                json.dump({"backend": info.backend, "parameters": SHAPE.parameters, "rows": rows}, file)
    finally:
        ddp_teardown()


if __name__ == "__main__":
    main()
