"""The error atlas, going further (lessons 06-13): memory, precision, saving, several GPUs, torch.compile, and
the notebook platforms."""

from __future__ import annotations

from .atlas_entry import entry

ENTRIES = (
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
        "torch.load(path, map_location='cpu') (cg.checkpoint.load_checkpoint does it).",
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
        "that needs no GPU, Runtime > Change runtime type > CPU, so the GPU quota lasts.",
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
)
