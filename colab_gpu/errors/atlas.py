"""The error atlas: the messages learners meet when PyTorch meets a GPU, each with its cause, fix and lesson.

One source of truth: lesson 09 prints each entry from here (its headings are the entries' messages, a test
checks it), and `explain` recognises an error by the same entries' patterns. ``reproduced`` says that
lesson 09 raises the error (on every runtime, or on a GPU for a GPU-only one) and checks it against its entry,
so its test fails when PyTorch changes the wording; the others are quoted from PyTorch's source (or the
platform's page) for the versions the course supports.
Taught in lesson 09.

One table: `ENTRIES`, in lesson 09's order (its groups, then each group's entries as written), made with `entry`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..hardware.device import COLAB_GPU_MENU, COLAB_RUNTIME_MENU, KAGGLE_GPU_MENU

GROUPS = {
    "setup": "Setup and install",
    "devices": "Moving tensors and models",
    "training": "Training",
    "data": "Data loading and workers",
    "memory": "Memory",
    "precision": "Precision",
    "saving": "Saving and loading",
    "distributed": "Multi-GPU and torchrun",
    "compile": "torch.compile",
    "platform": "Notebook platforms (Colab and Kaggle)",
}


@dataclass(frozen=True, repr=False)
class AtlasEntry:
    """One error of the atlas: its message as printed, how to recognise it, why and the fix. Taught in lesson 09."""

    key: str
    group: str
    message: str  # as PyTorch (or the platform) prints it: lesson 09's heading
    pattern: str  # a regular expression searched in "ExceptionType: message" (or in pasted text)
    cause: str
    fix: str
    read: str  # where the course explains it
    reproduced: bool = True

    def __repr__(self) -> str:
        return f"AtlasEntry({self.key!r})"

    def matches(self, text: str) -> bool:
        return re.search(self.pattern, text, re.IGNORECASE) is not None

    def format(self) -> str:
        return f"{self.message}\n  Cause: {self.cause}\n  Fix: {self.fix}\n  Read: {self.read}"


def entry(key, group, message, pattern, cause, fix, read, reproduced=True) -> AtlasEntry:
    """An `AtlasEntry`, refused when its group is not one of `GROUPS`."""
    assert group in GROUPS, group
    return AtlasEntry(key, group, message, pattern, cause, fix, read, reproduced)


T4_BF16 = "lesson 06 (a T4 has no bf16 units: fp16 with a GradScaler there); lesson 09, section 10"

#: Every entry, in lesson 09's order.
ENTRIES: tuple[AtlasEntry, ...] = (
    # First steps (lessons 01-05): setup, moving tensors and models, training, loading data.
    entry(
        "no-gpu",
        "setup",
        "No CUDA GPUs are available",
        r"No CUDA GPUs are available",
        "The runtime has no GPU attached (Colab's default runtime, or CUDA_VISIBLE_DEVICES hides it), yet "
        "the code asked for 'cuda'.",
        f"{COLAB_GPU_MENU}, then run from the top; in code use cg.get_device().",
        "lesson 01, section 1; lesson 09, section 1",
        reproduced=False,
    ),
    entry(
        "no-driver",
        "setup",
        "Found no NVIDIA driver on your system",
        r"Found no NVIDIA driver",
        "A CUDA build of PyTorch on a machine without an NVIDIA driver: a CPU runtime on Colab or Kaggle.",
        f"Switch the runtime to a GPU (Colab: {COLAB_GPU_MENU}; Kaggle: {KAGGLE_GPU_MENU}), "
        "or let cg.get_device() fall back to the CPU.",
        "lesson 01; lesson 09, section 1",
        reproduced=False,
    ),
    entry(
        "no-cuda-build",
        "setup",
        "Torch not compiled with CUDA enabled",
        r"not compiled with CUDA enabled",
        "This PyTorch is a CPU-only build (pip's default on Windows and macOS), so it cannot use any GPU.",
        "Install a CUDA build with the command from pytorch.org's 'Get started' selector; on Colab and Kaggle "
        "do not reinstall torch.",
        "lesson 01; lesson 09, section 1",
        reproduced=False,
    ),
    entry(
        "no-kernel-image",
        "setup",
        "CUDA error: no kernel image is available for execution on the device",
        r"no kernel image is available",
        "This PyTorch has no machine code for this GPU: current CUDA wheels start at compute capability 7.5 "
        "(T4), so Kaggle's P100 (6.0) is visible but cannot run a kernel.",
        "Pick a newer GPU (Kaggle: T4 x2), or install a PyTorch built for the GPU; cg.print_runtime_report() "
        "says which architectures this build has.",
        "lesson 01, section 3",
        reproduced=False,
    ),
    entry(
        "invalid-ordinal",
        "setup",
        "CUDA error: invalid device ordinal",
        r"invalid device ordinal",
        "The code names a GPU index that does not exist, such as 'cuda:1' on a one-GPU T4.",
        "Use 'cuda' or 'cuda:0', or check torch.cuda.device_count(); cg.get_device('cuda:1') says what exists.",
        "lesson 09, section 1",
        reproduced=False,
    ),
    entry(
        "old-driver",
        "setup",
        "The NVIDIA driver on your system is too old",
        r"NVIDIA driver on your system is "
        r"too old",
        "The installed driver predates the CUDA version this PyTorch was built with.",
        "Update the driver, or install a PyTorch built for an older CUDA (a cu118/cu126 wheel); on Colab and "
        "Kaggle the platform's torch matches its driver.",
        "lesson 01",
        reproduced=False,
    ),
    entry(
        "same-device",
        "devices",
        "Expected all tensors to be on the same device",
        r"Expected all tensors to be on the same device|Expected .* to be on .* same device|"
        r"Tensor on device \S+ is not on the expected device",
        "One input of an operation is on another device: usually the batch was not moved where the model is (with "
        "the meta device as a CPU runtime's stand-in for a GPU, PyTorch words it 'Tensor on device meta is not on "
        "the expected device cpu', or the reverse).",
        "Move every batch inside the loop: x = x.to(device, non_blocking=True); check a model with "
        "next(model.parameters()).device.",
        "lesson 02, section 4",
    ),
    entry(
        "shapes-multiplied",
        "devices",
        "mat1 and mat2 shapes cannot be multiplied",
        r"mat1 and mat2 shapes cannot be multiplied",
        "A Linear layer's in_features differs from the features the input has: most often an image batch "
        "(N, C, H, W) reaches the first Linear unflattened (784 expected, '112x28' given for 4 FashionMNIST "
        "images), or the images are another size (a 32x32x3=3072 CIFAR-10 image to a 784 MLP).",
        "Put nn.Flatten() before the first Linear; then make in_features equal to the flattened size (print "
        "x.shape just before the layer), or use nn.LazyLinear.",
        "lesson 03; lesson 09, section 2",
    ),
    entry(
        "same-dtype",
        "devices",
        "mat1 and mat2 must have the same dtype",
        r"must have the same dtype",
        "The input and the weights have different dtypes: float64 data from NumPy, or half inputs to a float "
        "model outside autocast.",
        "Convert the input: x.float() (NumPy arrays are float64), or use autocast "
        "for mixed precision instead of casting by hand.",
        "lesson 06; lesson 09, section 2",
    ),
    entry(
        "input-weight-type",
        "devices",
        "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same",
        r"Input type \(.*\) and (weight|bias) type \(.*\) should be the same",
        "A convolution's input and weights differ in device or dtype: a torch.FloatTensor input with torch.cuda "
        "weights means the batch was not moved to the GPU (the common case); a torch.cuda input with "
        "torch.FloatTensor weights, that the model is still on the CPU; two dtypes, that one is float64 or half.",
        "model.to(device) once, and every batch .to(device); inputs as float32 (or under autocast).",
        "lesson 04; lesson 09, section 2",
    ),
    entry(
        "numpy-device",
        "devices",
        "can't convert cuda:0 device type tensor to numpy",
        r"can't convert .* device type tensor to numpy",
        "NumPy only reads CPU memory; the tensor lives on the GPU.",
        "tensor.detach().cpu().numpy(), once per epoch rather than per step (each copy waits for the GPU).",
        "lesson 02; lesson 09, section 2",
    ),
    entry(
        "numpy-grad",
        "devices",
        "Can't call numpy() on Tensor that requires grad",
        r"Can't call numpy\(\) on Tensor that requires grad",
        "The tensor is part of the autograd graph; NumPy would silently drop its gradient history.",
        "tensor.detach().cpu().numpy(), or compute it under torch.no_grad().",
        "lesson 09, section 2",
    ),
    entry(
        "view-stride",
        "devices",
        "view size is not compatible with input tensor's size and stride",
        r"view size is not compatible with input tensor's size and stride",
        "view() needs contiguous memory; a transposed or channels_last tensor is not.",
        "Use .reshape(...) (copies only when it must), or nn.Flatten.",
        "lesson 04; lesson 09, section 2",
    ),
    entry(
        "no-grad-fn",
        "training",
        "element 0 of tensors does not require grad and does not have a grad_fn",
        r"does not require grad and does not have a grad_fn",
        "The loss was computed without a graph: under torch.no_grad()/inference_mode, from detached tensors, "
        "or with all parameters frozen.",
        "Compute the training loss outside no_grad, from the model's output "
        "(not .detach() or .item()), and check requires_grad of the parameters.",
        "lesson 03; lesson 09, section 3",
    ),
    entry(
        "backward-twice",
        "training",
        "Trying to backward through the graph a second time",
        r"backward through the graph a second time",
        "A second backward() reused a graph whose saved tensors the first one freed: usually a tensor "
        "carried over from the previous step (a running loss, an RNN hidden state).",
        "Build a new graph every step; detach what you carry over (total += loss.detach()).",
        "lesson 03; lesson 09, section 3",
    ),
    entry(
        "inplace-modified",
        "training",
        "one of the variables needed for gradient computation has been modified by an inplace operation",
        r"modified by an inplace operation",
        "An in-place operation (x += 1, relu_(), mul_) overwrote a value autograd saved for the backward pass.",
        "Use the out-of-place form (x = x + 1, nn.ReLU() without inplace=True); "
        "torch.autograd.set_detect_anomaly(True) names the operation.",
        "lesson 09, section 3",
    ),
    entry(
        "target-dtype",
        "training",
        "expected target dtype to be Long or Byte, but got Float",
        r"expected target dtype to be Long|expected scalar type Long but found \w+|"
        r"nll_loss\w*\" not implemented for '\w+'",
        "cross_entropy takes class indices as int64 (torch.long), and the labels have another dtype, which the "
        "message names: Float or Double (labels read from a CSV file or a NumPy float array), Int (int32, from "
        "NumPy on Windows or a reader that packs them). Older releases say 'expected scalar type Long but found "
        "Float'; a GPU says '\"nll_loss..._index\" not implemented for 'Float''.",
        "labels.long() in the Dataset or before the loss (float targets of the input's shape mean class "
        "probabilities).",
        "lesson 03, section 4",
    ),
    entry(
        "multi-target",
        "training",
        "0D or 1D target tensor expected, multi-target not supported",
        r"0D or 1D target tensor expected",
        "The labels have shape (batch, 1) instead of (batch,).",
        "labels.view(-1) (or squeeze(1)) before cross_entropy.",
        "lesson 03; lesson 09, section 3",
    ),
    entry(
        "device-assert",
        "training",
        "CUDA error: device-side assert triggered",
        r"device-side assert triggered|Target -?\d+ is out of bounds",
        "A kernel's check failed on the GPU, most often a label outside 0..classes-1 (the CPU says 'Target 10 "
        "is out of bounds'). CUDA reports it late and the runtime is unusable afterwards.",
        "Check labels.min() and labels.max() against the number of classes; restart the runtime; rerun on the "
        "CPU (or with CUDA_LAUNCH_BLOCKING=1) to see the line.",
        "lesson 09, section 3",
    ),
    entry(
        "ambiguous-bool",
        "training",
        "Boolean value of Tensor with more than one value is ambiguous",
        r"Boolean value of Tensor with more than one value is ambiguous",
        "An if or and/or on a tensor of several values: Python needs one True or False.",
        "Reduce it first: if (x > 0).all(), .any(), or compare a scalar (loss.item() < 0.1, once per epoch).",
        "lesson 09, section 3",
    ),
    entry(
        "stack-sizes",
        "data",
        "stack expects each tensor to be equal size",
        r"stack expects each tensor to be "
        r"equal size",
        "The DataLoader stacks a batch from samples of different shapes (images of different "
        "sizes, or with and without a colour channel).",
        "Resize in the transform (v2.Resize + v2.CenterCrop), convert every image to RGB, or write a collate_fn.",
        "lesson 05; lesson 09, section 4",
    ),
    entry(
        "worker-exited",
        "data",
        "DataLoader worker (pid(s) ...) exited unexpectedly",
        r"DataLoader worker \(pid\(?s?\)? .*\) exited unexpectedly",
        "A worker process died: out of shared memory (/dev/shm in Docker and some Kaggle images), out of RAM, "
        "or an error inside the worker printed above this line.",
        "Read the worker's own traceback first; "
        "fewer workers or smaller batches; in Docker --shm-size=8g; num_workers=0 to debug.",
        "lesson 05; lesson 09, section 4",
        reproduced=False,
    ),
    entry(
        "spawn-attribute",
        "data",
        "Can't get attribute 'worker' on <module '__main__'>",
        r"Can't get attribute '.*' on <module '__main__'",
        "A child process started with 'spawn' (Windows, macOS, "
        "torchrun's workers, multiprocessing_context='spawn') re-imports __main__, and a function defined in "
        "a notebook cell is not importable from there.",
        "Put the Dataset, collate_fn or worker function in a "
        ".py file and import it (lesson 08 writes its script to a file).",
        "lesson 08",
        reproduced=False,
    ),
    entry(
        "fork-cuda",
        "data",
        "Cannot re-initialize CUDA in forked subprocess",
        r"Cannot re-initialize CUDA in forked subprocess",
        "CUDA was initialised in the parent, then a forked child (a DataLoader worker) touched the GPU.",
        "Keep workers on the CPU (return CPU tensors; move batches in the training loop), or use the 'spawn' "
        "start method.",
        "lesson 05; lesson 09, section 4",
    ),
    # Going further (lessons 06-13): memory, precision, saving, several GPUs, torch.compile, the notebook platforms.
    entry(
        "cuda-oom",
        "memory",
        "CUDA out of memory. Tried to allocate",
        r"out of memory|can't allocate memory",
        "The batch's activations, the model and optimizer state, or tensors the notebook still holds do not "
        "fit (on a CPU the same failure reads 'DefaultCPUAllocator: can't allocate memory').",
        "Smaller batch (cg.find_max_batch_size), mixed precision, gradient accumulation; free what the "
        "notebook keeps (cg.cleanup). Much 'reserved but unallocated': PYTORCH_CUDA_ALLOC_CONF="
        "expandable_segments:True before CUDA starts (torch 2.10's message names PYTORCH_ALLOC_CONF, which "
        "torch 2.9.x ignores for this key). While generating text, the KV cache grows with tokens x batch: "
        "compute it before (cg.llm_memory.kv_cache_bytes) and cap the length or the batch.",
        "lesson 07; lesson 09, section 5; lesson 14, sections 3-4",
    ),
    entry(
        "cuda-not-started",
        "memory",
        "Invalid device argument 0: did you call init?",
        r"Invalid device (argument|index)\b",
        "A CUDA memory call ran before CUDA started in this process. PyTorch starts CUDA at the first GPU tensor "
        "or kernel, and torch.cuda.reset_peak_memory_stats does not start it (memory_allocated answers 0).",
        "Get the device with cg.get_device() (it starts CUDA), or call torch.cuda.init() or create a tensor on "
        "the GPU first; check the index against torch.cuda.device_count().",
        "lesson 07, section 1",
        reproduced=False,
    ),
    entry(
        "cublas-alloc",
        "memory",
        "CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        r"CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_NOT_INITIALIZED",
        "Out of GPU memory in disguise: cuBLAS (or cuDNN) could not allocate its workspace.",
        "Treat it as an out-of-memory error: free memory, smaller batch, restart the runtime.",
        "lesson 07",
        reproduced=False,
    ),
    entry(
        "gradscaler-deprecated",
        "precision",
        "`torch.cuda.amp.GradScaler(args...)` is deprecated",
        r"torch\.cuda\.amp\.(GradScaler|autocast)\(args\.\.\.\)`? is deprecated",
        "Old tutorials use the CUDA-specific AMP names; PyTorch 2.4 moved them to torch.amp.",
        "torch.amp.GradScaler('cuda') and torch.autocast('cuda', dtype=...).",
        "lesson 06; lesson 09, section 6",
    ),
    entry(
        "bf16-numpy",
        "precision",
        "Got unsupported ScalarType BFloat16",
        r"unsupported ScalarType BFloat16",
        "NumPy has no bfloat16, so a bf16 tensor (an output under bf16 autocast) cannot become an array.",
        "tensor.float().cpu().numpy().",
        "lesson 06; lesson 09, section 6",
    ),
    entry(
        "half-overflow",
        "precision",
        "value cannot be converted to type at::Half without overflow",
        r"cannot be converted to type (at|c10)::Half without overflow",
        "float16 holds at most 65,504: a constant (a mask value of -1e9, a large fill) does not fit.",
        "Use torch.finfo(x.dtype).min for masks, or bf16 (float32's range).",
        "lesson 06; lesson 09, section 6",
    ),
    entry(
        "unscale-fp16",
        "precision",
        "Attempting to unscale FP16 gradients.",
        r"Attempting to unscale FP16 "
        r"gradients",
        "The model itself was converted with model.half(), so its gradients are float16 and "
        "GradScaler cannot unscale them.",
        "Keep the model in float32 and use autocast: mixed precision casts per operation.",
        "lesson 06; lesson 09, section 6",
    ),
    entry(
        "tf32-mixed-api",
        "precision",
        "you have used mix of the legacy and new APIs to set the TF32 status",
        r"mix of the legacy and new APIs",
        "The TF32 switches were mixed: only the new torch.backends.cuda.matmul.fp32_precision = 'tf32' (PyTorch "
        "2.9+) was set, or the legacy matmul.allow_tf32 flag after torch.set_float32_matmul_precision; "
        "torch.get_float32_matmul_precision() and matmul.allow_tf32, which torch.compile reads, then refuse.",
        "Set TF32 with torch.set_float32_matmul_precision('high') and torch.backends.cudnn.allow_tf32 = True "
        "(cg.set_tf32(True); 'highest' and False for IEEE): every reader answers again, whatever was set before.",
        "lesson 06, section 5",
    ),
    entry(
        "sdpa-no-kernel",
        "precision",
        "No available kernel. Aborting execution.",
        r"No available kernel\.\s+Aborting execution",
        "scaled_dot_product_attention was limited (torch.nn.attention.sdpa_kernel) to kernels that all refuse "
        "these inputs: FlashAttention needs compute capability 8.0 or newer (not a T4) and fp16 or bf16; no fused "
        "kernel takes dropout on the CPU. The warnings printed just before say why each one refused.",
        "Let PyTorch choose (no sdpa_kernel), or give the kernel what it needs: 16-bit inputs on an Ampere or "
        "newer GPU for flash; on a T4, SDPBackend.EFFICIENT_ATTENTION in fp16 or fp32 (cg.attention_backend).",
        "lesson 14, section 1",
    ),
    entry(
        "flash-attn-t4",
        "precision",
        "FlashAttention only supports Ampere GPUs or newer.",
        r"FlashAttention only supports Ampere GPUs or newer",
        "The flash-attn package (attn_implementation='flash_attention_2' in transformers) has kernels for "
        "compute capability 8.0 and newer only; a T4 is 7.5.",
        "On a T4 load the model with attn_implementation='sdpa': PyTorch's memory-efficient kernel runs there, "
        "in fp16 (bf16 has no fused kernel on a T4: lesson 06's rule).",
        "lesson 14, section 1; lesson 06",
        reproduced=False,
    ),
    entry(
        "weights-only",
        "saving",
        "Weights only load failed",
        r"Weights only load failed",
        "Since PyTorch 2.6 torch.load(weights_only=True) by default, and the file holds more than tensors "
        "(NumPy arrays, your own classes).",
        "Save state_dicts of tensors; for a file you trust, torch.load(path, weights_only=False).",
        "lesson 03, section 8; lesson 09, section 7",
    ),
    entry(
        "deserialize-cuda",
        "saving",
        "Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False",
        r"Attempting to deserialize object on a CUDA device",
        "The checkpoint was saved from GPU tensors and this runtime has no GPU.",
        "torch.load(path, map_location='cpu') (colab_gpu.train.checkpoint.load_checkpoint does it).",
        "lesson 03, section 8",
        reproduced=False,
    ),
    entry(
        "state-dict-keys",
        "saving",
        'Unexpected key(s) in state_dict: "module.weight"',
        r"Missing key\(s\) in state_dict|Unexpected key\(s\) in state_dict",
        "The saved keys carry a prefix the model lacks: 'module.' (saved from DataParallel or DDP) or "
        "'_orig_mod.' (saved from a torch.compile wrapper), or the model changed.",
        "Save model.module.state_dict() / the original model's; or strip the prefix before loading.",
        "lesson 08; lesson 11, section 6",
    ),
    entry(
        "size-mismatch",
        "saving",
        "size mismatch for weight: copying a param with shape",
        r"size mismatch for .*: copying a param with shape",
        "The checkpoint belongs to a model of other sizes (another width, number of classes or input size).",
        "Build the model with the same arguments it was saved with (save them in the checkpoint).",
        "lesson 09, section 7",
    ),
    entry(
        "weights-not-initialized",
        "saving",
        "Some weights of LlamaForSequenceClassification were not initialized from the model checkpoint",
        r"were not initialized from the model checkpoint",
        "transformers built layers the checkpoint has no weights for, which start random: a new head (the "
        "classifier of a *ForSequenceClassification model), or a class other than the one the checkpoint was "
        "saved with.",
        "For a new head this is expected: train it (lesson 13's new head). When it lists every layer of a "
        "language model, load the checkpoint's own class (AutoModelForCausalLM) and check the model's name.",
        "lesson 13, section 4; lesson 14",
        reproduced=False,
    ),
    entry(
        "no-process-group",
        "distributed",
        "Default process group has not been initialized",
        r"Default process group has not been initialized",
        "A collective (all_reduce, DDP) ran before init_process_group, e.g. the script was run with python "
        "instead of torchrun.",
        "Launch with torchrun and call cg.ddp_setup() first.",
        "lesson 08",
    ),
    entry(
        "env-rank",
        "distributed",
        "environment variable RANK expected, but not set",
        r"environment variable (RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT) expected, but not set",
        "init_process_group (or fully_shard, which starts a group) read its rank from the environment, which only "
        "torchrun (or a launcher) sets.",
        "torchrun --nproc_per_node=N script.py (cg.launch_torchrun from a notebook).",
        "lesson 08; lesson 15, section 4",
    ),
    entry(
        "address-in-use",
        "distributed",
        "EADDRINUSE: address already in use",
        r"address already in use|EADDRINUSE",
        "The rendezvous port is taken, usually by a previous run that is still alive.",
        "Wait for (or kill) the old processes, or pick another port: torchrun --master_port=29501.",
        "lesson 08; lesson 09, section 8",
    ),
    entry(
        "unused-parameters",
        "distributed",
        "Expected to have finished reduction in the prior iteration before starting a new one",
        r"Expected to have finished reduction in the prior iteration",
        "Under DDP some parameters received no gradient in a step (a branch of the model was not used), so "
        "the all-reduce never completed.",
        "Make every parameter take part in the loss, or DDP(model, find_unused_parameters=True) (slower).",
        "lesson 08",
        reproduced=False,
    ),
    entry(
        "fsdp-mixed-dtype",
        "distributed",
        "FSDP expects uniform original parameter dtype but got",
        r"FSDP expects uniform (original parameter|reduce) dtype",
        "fully_shard was given a module whose weights have several dtypes (fp32 adapters beside a 16-bit base): "
        "FSDP2 gathers a unit's weights as one flat buffer of one dtype.",
        "Give each dtype its own unit (fully_shard the adapters' modules apart), or keep every weight of a unit in "
        "fp32 and let MixedPrecisionPolicy(param_dtype=torch.float16) cast them for the compute.",
        "lesson 15, section 4",
        reproduced=False,
    ),
    entry(
        "no-cxx",
        "compile",
        "No working C++ compiler found",
        r"No working C\+\+ compiler found",
        "torch.compile writes C++ for CPU code and no compiler is installed.",
        "Install g++ (apt install g++; Xcode's tools on a Mac), or cg.compile_model falls back to eager.",
        "lesson 11, section 7",
    ),
    entry(
        "triton-old-gpu",
        "compile",
        "which is too old to be supported by the triton GPU compiler",
        r"too old to be supported by the triton GPU compiler",
        "Triton, which writes torch.compile's GPU kernels, needs compute capability 7.0 or newer; a P100 is 6.0.",
        "Train eagerly (cg.compile_model does it) or pick a T4 or newer.",
        "lesson 11, section 2",
        reproduced=False,
    ),
    entry(
        "colab-usage-limits",
        "platform",
        "You cannot currently connect to a GPU due to usage limits in Colab",
        r"cannot currently connect to a GPU due to usage limits",
        "Colab's free tier rations GPU time; after heavy use it refuses a GPU for hours or days.",
        "Use Kaggle's weekly free GPU quota, a CPU runtime for the CPU-sized lessons, or wait; disconnect "
        "runtimes you are not using (Runtime > Disconnect and delete runtime).",
        "lesson 01",
        reproduced=False,
    ),
    entry(
        "colab-gpu-unused",
        "platform",
        "You are connected to a GPU runtime, but not utilizing the GPU",
        r"connected to a GPU runtime, but not utili[sz]ing the GPU",
        "Colab's banner: the notebook has a GPU attached but nothing has run on it for a while (every tensor and "
        "model on the CPU, or only reading and writing cells). Colab may then move you to a CPU runtime, and the "
        "free GPU time still counts.",
        "Put the model and each batch on the device (device = cg.get_device(); model.to(device)), or, for work "
        f"that needs no GPU, {COLAB_RUNTIME_MENU} > CPU, so the GPU quota lasts.",
        "lesson 01; lesson 02, section 4",
        reproduced=False,
    ),
    entry(
        "colab-ram-crash",
        "platform",
        "Your session crashed after using all available RAM",
        r"session crashed after using all available RAM",
        "The process used all of the machine's RAM (about 12 GB on free Colab): a whole data set loaded at "
        "once, copies of it kept alive, or a model built or loaded on the CPU in fp32 before moving it.",
        "Load in batches, keep uint8 images, delete what you do not need "
        "(cg.cleanup); build a model on the GPU in its final dtype (with torch.device('cuda'), or "
        "from_pretrained(..., torch_dtype=torch.float16, device_map='cuda')); the variables are gone, so run "
        "from the top.",
        "lesson 07; lesson 14, section 3",
        reproduced=False,
    ),
    entry(
        "pip-offline",
        "platform",
        "Could not find a version that satisfies the requirement",
        r"Could not find a version that satisfies the requirement|Temporary failure in name resolution",
        "pip could not reach PyPI: the runtime is offline (on Kaggle: Settings > Internet is off, or the "
        "account is not phone-verified).",
        "Kaggle: Settings > Internet on (it needs a phone-verified account), then rerun the setup cell.",
        "lesson 01",
        reproduced=False,
    ),
    # As learners report them (issue threads about Colab and Kaggle, 2024-2026): Kaggle's two T4s, bf16 on a T4, a
    # runtime whose packages pip changed, a full disk or shared memory, a kernel that read out of bounds. Quoted
    # from the messages as PyTorch, NCCL, Triton, pip and the platforms print them; lesson 09, section 10.
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

__all__ = ["ENTRIES", "GROUPS", "AtlasEntry"]  # what lessons reach as cg.atlas (docs/api.txt lists it)
