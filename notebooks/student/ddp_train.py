"""Train an MLP on scikit-learn's digits with DistributedDataParallel.

Launch: torchrun --standalone --nproc-per-node=N ddp_train.py [--backend gloo|nccl] [--epochs 3]
"""

import argparse

import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

import colab_gpu as cg

parser = argparse.ArgumentParser()
parser.add_argument("--backend", default=None, help="nccl (GPUs) or gloo (CPU); default: nccl when CUDA works")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--global-batch", type=int, default=64, help="samples per step over all processes")
parser.add_argument("--out", default="ddp_weights.pt", help="final weights, written by rank 0")
parser.add_argument("--checkpoint", default="ddp_checkpoint.pt", help="written by rank 0 after every epoch")
args = parser.parse_args()

info = cg.ddp_setup(args.backend)  # reads RANK, LOCAL_RANK, WORLD_SIZE that torchrun set
try:
    # all_reduce: every process sends rank + 1, every process receives the sum.
    contribution = torch.tensor([info.rank + 1.0], device=info.device)
    torch.distributed.all_reduce(contribution, op=torch.distributed.ReduceOp.SUM)
    cg.rank0_print(info, f"{info.backend} on {info.device}: all_reduce(rank + 1) = {contribution.item():.0f}")

    cg.seed_everything(0)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    train_set, _ = cg.load_digits().limit(train=1024).datasets()
    sampler = DistributedSampler(train_set, shuffle=True, seed=0)  # each rank gets its own 1/N
    loader = DataLoader(train_set, batch_size=args.global_batch // info.world_size, sampler=sampler)
    model = cg.mlp(64, hidden=128).to(info.device)
    model = DDP(model, device_ids=[info.local_rank] if info.device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # a new shuffle every epoch, identical on every rank
        stats = cg.train_epoch(model, loader, optimizer, info.device, progress=False)
        loss = cg.all_reduce_mean(stats.loss, info)
        cg.rank0_print(info, f"epoch {epoch + 1}: loss {loss:.4f} (mean over ranks), {stats.samples} samples here")
        if info.is_main:  # one writer, or N processes overwrite the same file
            cg.save_checkpoint(args.checkpoint, model.module, optimizer, epoch=epoch + 1)
        torch.distributed.barrier()  # nobody starts the next epoch before the checkpoint exists
    if info.is_main:
        torch.save(model.module.state_dict(), args.out)
finally:
    cg.ddp_teardown()
