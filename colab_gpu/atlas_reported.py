"""The error atlas, as learners report it (issue threads about Colab and Kaggle, 2024-2026): Kaggle's two T4s,
bf16 on a T4, a runtime whose packages pip changed, a full disk or shared memory, a kernel that read out of bounds.
Quoted from the messages as PyTorch, NCCL, Triton, pip and the platforms print them; lesson 09, section 10 explains
each with `cg.explain`."""

from __future__ import annotations

from .atlas_entry import entry

T4_BF16 = "lesson 06 (a T4 has no bf16 units: fp16 with a GradScaler there); lesson 09, section 10"

ENTRIES = (
    entry(
        "nccl-peer-access",
        "distributed",
        "Cuda failure 217 'peer access is not supported between these two devices'",
        r"Cuda failure 217|peer access is not supported between these two devices",
        "NCCL tried to reach one GPU from the other directly; Kaggle's T4 x2 has no peer-to-peer access between its "
        "two GPUs, and recent NCCL releases fail at the first collective there (NVIDIA/nccl#1838).",
        "Set os.environ.setdefault('NCCL_CUMEM_HOST_ENABLE', '0') before init_process_group (cg.ddp_setup does it "
        "where the GPUs lack peer access); still failing: NCCL_P2P_DISABLE=1, or the gloo backend.",
        "lesson 08, section 4",
        reproduced=False,
    ),
    entry(
        "nccl-unhandled-cuda",
        "distributed",
        "NCCL error: unhandled cuda error",
        r"unhandled cuda error",
        "NCCL hit a CUDA error it does not name: on Kaggle's T4 x2 most often the missing peer access, else an "
        "earlier CUDA error of the same process (an out-of-memory, an illegal access).",
        "Rerun with NCCL_DEBUG=INFO to read the CUDA error NCCL saw; on Kaggle set NCCL_CUMEM_HOST_ENABLE=0 before "
        "init_process_group (lesson 08's lines); restart the runtime after a CUDA error.",
        "lesson 08, section 4",
        reproduced=False,
    ),
    entry(
        "nccl-watchdog-timeout",
        "distributed",
        "Watchdog caught collective operation timeout",
        r"Watchdog caught collective operation timeout|collective operation timeout",
        "One rank waited in a collective (an all_reduce of DDP's backward) that another rank never reached: it "
        "stopped on an error, ran fewer batches (uneven shards), or took a branch the others did not.",
        "Read the first rank's error above this one; give every rank the same number of batches (a "
        "DistributedSampler, drop_last=True) and the same collectives in the same order; a smaller timeout= in "
        "init_process_group shows it sooner while debugging.",
        "lesson 08, sections 3-4",
        reproduced=False,
    ),
    entry(
        "bf16-unsupported-setup",
        "precision",
        "Your setup doesn't support bf16/gpu",
        r"doesn't support bf16/gpu|does not support bf16",
        "bf16=True (Hugging Face's Trainer and Accelerate) on a GPU without bf16 support: a T4 (compute capability "
        "7.5); bf16 needs an Ampere GPU (8.0) or newer.",
        "On a T4 use fp16=True (with its loss scaling); keep bf16 for an L4, A100 or H100: "
        "torch.cuda.is_bf16_supported() says which.",
        T4_BF16,
        reproduced=False,
    ),
    entry(
        "bf16-compile-skipped",
        "precision",
        "does not support bfloat16 compilation natively, skipping",
        r"does not support bfloat16 compilation natively",
        "torch.compile on a GPU without native bf16 (a T4): Inductor skips its bf16 code path, so the compiled "
        "model runs slower, not faster.",
        "On a T4 autocast to float16 instead (with a GradScaler for training), or compile in float32.",
        T4_BF16 + "; lesson 11",
        reproduced=False,
    ),
    entry(
        "triton-bf16-sm80",
        "compile",
        "'.bf16' requires .target sm_80 or higher",
        r"\.bf16'? requires \.target sm_80",
        "Triton generated a bf16 instruction for a GPU older than Ampere (a T4 is sm_75): ptxas refuses it when "
        "torch.compile builds a kernel of a bf16 model.",
        "On a T4 use float16 (autocast dtype=torch.float16) or float32 under torch.compile; bf16 on an L4, A100 "
        "or H100.",
        T4_BF16 + "; lesson 11",
        reproduced=False,
    ),
    entry(
        "torchvision-nms-missing",
        "setup",
        "operator torchvision::nms does not exist",
        r"operator torchvision::nms does not exist",
        "torchvision was built for another torch than the one imported: a pip install replaced the runtime's "
        "torch (a package that asked for another version) and left its torchvision behind.",
        "Restart the runtime; install torch and torchvision together, matching versions from one index (or "
        "reinstall the runtime's: Runtime > Disconnect and delete runtime); the course's setup cell never "
        "installs torch.",
        "lesson 01, the setup cell; lesson 09, section 10",
        reproduced=False,
    ),
    entry(
        "numpy-abi",
        "setup",
        "numpy.dtype size changed, may indicate binary incompatibility",
        r"numpy\.dtype size changed|binary incompatibility",
        "A compiled package (pandas, scikit-learn, ...) was built against another NumPy than the one now "
        "installed: a pip install upgraded or downgraded NumPy (1.x against 2.x) in a running runtime.",
        "Restart the runtime so every package loads the same NumPy; if it persists, reinstall the package named "
        "in the traceback, or put back the runtime's NumPy version.",
        "lesson 09, section 10",
        reproduced=False,
    ),
    entry(
        "worker-bus-error",
        "data",
        "DataLoader worker (pid 1234) is killed by signal: Bus error",
        r"killed by signal: Bus error|Bus error\. It is possible that dataloader's workers are out of shared memory",
        "A DataLoader worker ran out of shared memory (/dev/shm), where workers hand their batches to the main "
        "process: small in Docker containers and some Kaggle images.",
        "Fewer workers or smaller batches; num_workers=0 to confirm; "
        "torch.multiprocessing.set_sharing_strategy('file_system'); or keep the data on the GPU (lesson 05).",
        "lesson 05; lesson 09, section 4",
        reproduced=False,
    ),
    entry(
        "disk-full",
        "platform",
        "[Errno 28] No space left on device",
        r"Errno 28\]? No space left on device|No space left on device",
        "The disk is full: most often the Hugging Face cache (~/.cache/huggingface: every model and data set "
        "downloaded) or checkpoints, on Colab's disk or Kaggle's 20 GB /kaggle/working.",
        "Point HF_HOME at a disk with room before importing transformers (Kaggle: /tmp; Colab: Drive, slower); "
        "delete old checkpoints and cached models (huggingface-cli delete-cache); check with shutil.disk_usage.",
        "lesson 13; lesson 14; lesson 09, section 10",
        reproduced=False,
    ),
    entry(
        "illegal-memory-access",
        "training",
        "CUDA error: an illegal memory access was encountered",
        r"an illegal memory access was encountered",
        "A GPU kernel read or wrote outside its memory: most often an index out of range (a token id past the "
        "embedding's size, a class id past the classes) in an op without a check, or a custom kernel. CUDA "
        "reports it late, at a later call, and the runtime is unusable afterwards.",
        "Restart the runtime; rerun with CUDA_LAUNCH_BLOCKING=1, or on the CPU, to get the line and a clear "
        "IndexError; check ids against the embedding's num_embeddings.",
        "lesson 09, section 3",
        reproduced=False,
    ),
)
