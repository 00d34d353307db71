# ---
# jupyter:
#   accelerator: GPU
#   colab:
#     gpuType: T4
#     provenance: []
#   jupytext:
#     notebook_metadata_filter: accelerator,colab
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 14 · Transformers on a T4: attention kernels, memory, the KV cache, LoRA
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/14_transformers.ipynb)
# [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/student/14_transformers.ipynb)
#
# *Student version: the solution cells are removed. Write your answer in each exercise, then run its check cell. The full lesson is one folder up.*
#
# **What you will learn**
# - attention in four lines of PyTorch, and the fused kernel that computes the same thing
#   (`scaled_dot_product_attention`); which kernel your GPU runs, and why a T4 has no flash
#   attention;
# - why attention written by hand runs out of memory: its memory grows with the square of the
#   sequence length;
# - what a language model needs in GPU memory (weights, the KV cache, training with Adam),
#   computed before you load anything, then measured;
# - generation with and without a KV cache: the same tokens, far less work;
# - LoRA by hand: fine-tune a model by training two small matrices per layer, kept in fp32
#   beside 16-bit weights; put your layer into a model, save only what trained, merge it;
# - a pretrained model from the Hugging Face Hub, loaded straight to the GPU in 16 bits, its
#   memory and its KV cache checked against the formulas.
#
# **Time:** 65 minutes. **Prerequisites:** lessons 03 (training loop), 06 (mixed precision: which
# 16-bit format your GPU has) and 07 (GPU memory).
#
# The words host, device, kernel, CUDA, cuBLAS, cuDNN and compute capability: [lesson 01's
# glossary](01_enable_gpu_runtime.ipynb).

# %% cellView="form"
# @title Setup: colab_gpu 0.52.0, the course's package (installed where missing; never torch)
# On Kaggle, turn on Settings > Internet first. PyPI first, else the course's git tag of this release.
import importlib
import subprocess
import sys
import tempfile
from importlib import metadata

COLAB_GPU = "0.52.0"
TORCH_FLOOR = "2.7"  # the oldest torch the course is tested on
SOURCES = [f"colab-gpu=={COLAB_GPU}", f"git+https://github.com/colab-gpu-course/pytorch-gpus-colab@v{COLAB_GPU}"]
try:
    from colab_gpu import __version__ as found
except ImportError:
    found = None
everything = {d.metadata["Name"]: d.version for d in metadata.distributions()}
runtime = {name: everything[name] for name in ("torch", "torchvision") if name in everything}  # kept as they are
torch_found = runtime.get("torch")
if torch_found and [int(n) for n in torch_found.split(".")[:2]] < [int(n) for n in TORCH_FLOOR.split(".")]:
    raise RuntimeError(f"This runtime has torch {torch_found}; the course needs torch {TORCH_FLOOR} or newer, and "
                       "the setup cell never replaces a runtime's torch. Colab: Runtime > Change runtime type > "
                       "Runtime version: Latest. Elsewhere: install a newer torch with its torchvision (pytorch.org).")
source = None
if found != COLAB_GPU:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as keep:  # pip's constraints file
        keep.write("".join(f"{name}=={version}\n" for name, version in runtime.items()))
    errors = []
    for source in SOURCES:
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-c", keep.name, source],
                             capture_output=True, text=True)
        if pip.returncode == 0:
            break
        errors.append(f"{source}: {pip.stderr.strip()[-800:]}")
    else:
        raise RuntimeError(f"pip could not install colab_gpu {COLAB_GPU} beside this runtime's {runtime}, which it "
                           "keeps (is this runtime online? On Kaggle: Settings > Internet):\n" + "\n".join(errors))
    for name in [m for m in sys.modules if m.partition(".")[0] == "colab_gpu"]:
        del sys.modules[name]  # another version was imported above: the import below loads this one
    importlib.invalidate_caches()
print(f"colab_gpu {COLAB_GPU}:", "already installed" if source is None else f"installed from {source}")

# %%
import torch

import colab_gpu as cg

# The course's error explainer: after an error its atlas knows (lesson 09), the cause and the fix.
# %load_ext colab_gpu

device = cg.get_device()
on_gpu = device.type == "cuda"
print(f"PyTorch {torch.__version__}, computing on: {device}")

# %% [markdown]
# **The words this lesson uses.** A language model reads text as *tokens* (a word or a piece
# of one, each an integer id) and is a stack of identical layers. Each layer has:
# - **query, key, value** (`q`, `k`, `v`): three vectors each token computes from its input
#   with three linear layers. A token's query is compared with the key of every token up to
#   it (a dot product: how relevant is that token?), and the token's output is the average of
#   their values, weighted by those scores. That is **attention**.
# - **heads**: attention runs side by side on slices of `head_dim` numbers, each slice with
#   its own q, k and v: 8 heads of 64 numbers make 512-number vectors.
# - **KV heads, grouped-query attention (GQA)**: recent models compute fewer key and value
#   heads than query heads; each KV head serves a group of query heads (below). What a model
#   keeps of past tokens (its KV cache, section 4) is the KV heads only: with 8 query heads
#   and 2 KV heads, 4x less.
# - **rotary positions (RoPE)**: how the model knows word order: q and k are rotated by an
#   angle that grows with the token's position, so their dot product depends on how far apart
#   the two tokens are.
# - **RMSNorm**: a normalization like LayerNorm that divides each vector by its root mean
#   square (no mean subtracted), then scales it.
# - **gated MLP**: the layer's feed-forward part, `down(silu(gate(x)) * up(x))`: two linear
#   layers up, one gating the other, one linear layer down.
#
# At the ends of the stack, the **embedding** turns each id into a vector, and the output layer
# turns each position's final vector into **logits**, one score per token of the vocabulary
# (softmax makes them the probabilities of the next token). With **tied embeddings** both use
# the same matrix. **Greedy decoding** picks the token with the largest logit (`argmax`) at each
# step. **Compute capability** is a GPU generation's number
# (`torch.cuda.get_device_capability()`): 7.5 for a T4, 8.0 for an A100, 8.9 for an L4, 9.0
# for an H100; from 8.0 on, a GPU has bf16 tensor cores (lesson 06) and FlashAttention.
#
# Grouped-query attention with 8 query heads and 2 KV heads, as in this lesson's small model:
#
# ```text
#  query heads:   q0  q1  q2  q3        q4  q5  q6  q7
#                   \   \  /   /          \   \  /   /
#  KV heads:          k0, v0                k1, v1        <- the KV cache stores these 2, not 8
# ```

# %% [markdown]
# ## 1. Attention, by hand and fused
#
# A transformer layer lets every token look at every other token. Each token has a query `q`,
# a key `k` and a value `v` (vectors of `head_dim` numbers, one set per head). A token's output
# is the average of all values, weighted by how well its query matches each key:
# `softmax(q kᵀ / √head_dim) v`. Written with tensors of shape (batch, heads, tokens, head_dim),
# that is four lines:

# %%
import math

from torch.nn import functional as F

precision = cg.choose_precision(device)  # lesson 06: bf16 from compute capability 8.0, fp16 on a T4
dtype = (precision.dtype or torch.float32) if on_gpu else torch.float32  # a CPU: fp32, exact comparisons
FORMAT = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}  # cg.llm_memory's names
heads, length, head_dim = 8, 512, 64
q, k, v = (torch.randn(1, heads, length, head_dim, device=device, dtype=dtype) for _ in range(3))


def attention_by_hand(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (batch, heads, tokens, tokens)
    weights = scores.softmax(dim=-1)  # each row sums to 1
    return weights @ v


fused = F.scaled_dot_product_attention(q, k, v)
difference = (attention_by_hand(q, k, v) - fused).abs().max().item()
tolerance = 1e-4 if dtype == torch.float32 else 2e-2  # 16-bit formats keep 3-4 significant digits
print(f"{dtype}, {heads} heads x {length} tokens x {head_dim}: largest difference {difference:.1e}")
assert difference < tolerance

# %% [markdown]
# `F.scaled_dot_product_attention` (SDPA) computes the same numbers, but it never writes the
# (tokens x tokens) score matrix to memory: a *fused* kernel computes it tile by tile in the
# GPU's on-chip memory and keeps a running softmax. Which kernel runs depends on the GPU:
#
# | kernel | needs | on |
# |---|---|---|
# | FlashAttention | capability 8.0+, fp16 or bf16, head_dim ≤ 256 (training, L4: not 193-224) | A100, L4, H100 |
# | memory-efficient | 5.0+, fp16 or fp32 (bf16 from 8.0) | **T4**, P100, and the others |
# | cuDNN | 8.0+, 16-bit, head_dim ≤ 128 (H100/B200: 256); first there, cuDNN > 9.15 (torch 2.10+) | H100 |
# | math | anything | the fallback: the four lines above |
#
# A T4 has no FlashAttention: PyTorch uses the memory-efficient kernel, which is close. But
# note the trap from lesson 06: in **bf16** a T4 has no fused kernel at all and falls back to
# math. `cg.attention_backend` is this table as code; on this runtime it says:

# %%
capability = torch.cuda.get_device_capability(device) if on_gpu else None  # (7, 5) on a T4; None: a CPU
cudnn_first = on_gpu and cg.cudnn_attention_first(capability, torch.backends.cudnn.version(), torch.__version__)
runtime = f"compute capability {capability[0]}.{capability[1]}" if on_gpu else "a CPU"
for candidate in (torch.float16, torch.bfloat16):
    kernel = cg.attention_backend(capability, candidate, head_dim, cudnn_first=cudnn_first, key_length=length)
    print(f"{runtime}, {candidate}: {kernel}")

# %% [markdown]
# You can force a kernel with `torch.nn.attention.sdpa_kernel`. When the kernel cannot run
# these inputs, PyTorch warns why, then raises "No available kernel". On a GPU we give flash
# fp32 inputs, which it refuses on every GPU (on a T4 it refuses everything); on the CPU, dropout,
# which the CPU's flash kernel does not take:

# %%
import warnings

from torch.nn.attention import SDPBackend, sdpa_kernel


def reasons(caught):  # PyTorch's warnings, without the "(Triggered internally at <its build machine's path>)"
    return [str(warning.message).split(" (Triggered internally")[0] for warning in caught]


with warnings.catch_warnings(record=True) as why:  # PyTorch warns why each kernel refused, then raises
    warnings.simplefilter("always")
    with cg.shows_error(RuntimeError, atlas="sdpa-no-kernel"):  # lesson 09's atlas: cause and fix
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            if on_gpu:  # flash takes fp16/bf16 from compute capability 8.0: fp32 it refuses on every GPU
                F.scaled_dot_product_attention(q.float(), k.float(), v.float())
            else:  # the CPU's flash kernel takes fp32, but no dropout
                F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
for reason in reasons(why):
    print("warning:", reason)

# %% [markdown]
# ## 2. Time and memory against the sequence length
#
# By hand, the score matrix holds `heads x tokens x tokens` numbers: double the length, four
# times the memory. **Predict first:** at 4x the length, how many times more memory does
# attention by hand need for its scores?

# %%
my_prediction = None  # e.g. 4

# %%
import matplotlib.pyplot as plt


def seconds_per_call(q, k, v):
    """Seconds per call of attention by hand and fused, timed against each other as lesson 10 times steps: K calls
    queued per sample (a fused call can take tens of microseconds: one synchronized call would time its launch)."""
    timed = cg.compare_steps({"by hand": lambda: attention_by_hand(q, k, v),
                              "fused": lambda: F.scaled_dot_product_attention(q, k, v)}, device=device)
    return timed["by hand"].median, timed["fused"].median


lengths = [1024, 2048, 4096, 8192] if on_gpu else [256, 512, 1024]  # a CPU: three, the by-hand cost grows as n²
rows = []
for n in lengths:
    qn, kn, vn = (torch.randn(1, heads, n, head_dim, device=device, dtype=dtype) for _ in range(3))
    by_hand, fused_time = seconds_per_call(qn, kn, vn)
    score_mib = (qn @ kn.transpose(-2, -1)).nbytes / 2**20  # the scores attention by hand writes to memory
    with cg.measure_peak(device) as peak:  # lesson 07: the allocator's peak, on a GPU (None on a CPU)
        attention_by_hand(qn, kn, vn)
    with cg.measure_peak(device) as fused_peak:
        F.scaled_dot_product_attention(qn, kn, vn)
    rows.append((n, by_hand, fused_time, score_mib, peak.peak_mib, fused_peak.peak_mib))
    print(f"{n:5} tokens: by hand {cg.format_seconds(by_hand):>9}, fused "
          f"{cg.format_seconds(fused_time):>9}; scores {score_mib:8,.0f} MiB"
          + (f"; peak by hand {peak.peak_mib:,.0f} MiB, fused {fused_peak.peak_mib:,.1f} MiB" if on_gpu else ""))
if on_gpu:  # the fused kernel never stores the scores: at the longest length its peak stays far below them
    assert rows[-1][5] < rows[-1][3]

ratio = rows[2][3] / rows[0][3]
print(f"measured: {ratio:.0f}x the score memory at 4x the length"
      + ("" if my_prediction is None else f" (you predicted {my_prediction}x)"))
assert ratio == 16  # (4n)^2 / n^2: the square of the length

figure, axis = plt.subplots(figsize=(5, 3))
axis.plot(lengths, [r[3] for r in rows], "o-", label="score matrix (by hand)")
axis.set(xlabel="tokens", ylabel="MiB", xscale="log", yscale="log", title=f"attention memory, {dtype}")
axis.legend()
plt.show()

# %% [markdown]
# A CPU's fused kernel is a flash kernel too, working on tiles that stay in its caches; a GPU's
# keeps its tiles in on-chip memory. The timings above are this runtime's; on a GPU, the
# bench's `attention` row (`python -m colab_gpu bench`) measures the fused kernel at 4096 tokens
# against the course's targets: at least 1.5x faster, at least 8x less peak memory.
#
# ## 3. What a language model needs in memory
#
# Before you download a model, compute what it needs:
# - **weights**: parameters x bytes per value (fp32 4, fp16/bf16 2, int8 1, 4-bit 0.5);
# - **the KV cache** (section 4): 2 x layers x KV heads x head_dim x tokens x batch x bytes;
# - **training with Adam**: fp32 weights, gradients and two moments, 16 bytes per parameter
#   (the same under autocast, whose fp32 weights are the "master weights"), plus activations;
# - **fine-tuning with most weights frozen** (section 5): LoRA trains small adapters (16 bytes
#   per adapter parameter) beside a frozen fp16 base (2 bytes per weight, no gradients, no
#   moments); QLoRA also stores the frozen linear layers in 4 bits (NF4: 4.127 bits per weight
#   with its scales).
#
# `cg.llm_memory` holds the published shapes of four open models:

# %%
memory = cg.llm_memory
t4 = memory.T4_BYTES - memory.CUDA_CONTEXT_BYTES  # a T4's 14.75 GiB as PyTorch reports it, less the CUDA context
print("GiB of weights per format; GiB to fine-tune with Adam (every weight, LoRA rank 16 on every projection, the "
      "same on a 4-bit base), activations aside; the context beside fp16 weights:")
print(f"{'model':14} {'params':>7} {'fp16':>7} {'int8':>7} {'4-bit':>7} {'full':>7} {'LoRA':>7} {'QLoRA':>7}"
      "  context at fp16 on a T4")
for model_shape in memory.MODELS:
    sizes = [memory.weight_bytes(model_shape.parameters, f) / memory.GIB for f in ("fp16", "int8", "4-bit")]
    tuning = [sum(memory.finetune_bytes(model_shape, method).values()) / memory.GIB for method in memory.METHODS]
    context = memory.context_that_fits(model_shape, t4, fmt="fp16")
    print(f"{model_shape.name:14} {model_shape.parameters / 1e9:6.2f}B"
          + "".join(f" {s:6.1f}G" for s in sizes + tuning) + f"  {context:,} tokens")
mistral, llama_1b = memory.MODELS[-1], memory.MODELS[1]
assert memory.weight_bytes(mistral.parameters, "fp16") < t4  # 7B for inference: fits
assert memory.ADAM_TRAINING_BYTES_PER_PARAMETER * llama_1b.parameters > t4  # 1B, every weight trained: does not
assert sum(memory.finetune_bytes(mistral, "qlora").values()) < t4 / 3  # 7B with QLoRA: a third of a T4, before
# activations

# %% [markdown]
# The contexts are what memory allows; each model also has a trained maximum (`max_position_embeddings`
# in its config: 32,768 tokens for Qwen2.5, 131,072 for Llama 3.2), and a batch of 8 sequences
# divides the context by 8. The table leaves about 400 MiB for the CUDA context, which takes
# them before the first tensor (prediction: t4 14.cuda_context). A 7B model just fits a T4 for
# inference in fp16; fine-tuning all of a 1B model does not fit (18.4 GiB), which is why section
# 5 trains two small matrices instead. With LoRA a 7B model's frozen fp16 base alone nearly fills
# the T4 (14.1 GiB of its 14.4, nothing left for activations); on a 4-bit base (QLoRA) the same
# adapters train it in 4.5 GiB. These are computed from the shapes, activations aside.
#
# The formula on a real model: `cg.TinyDecoder` has Llama's parts (rotary positions,
# grouped-query attention, a gated MLP, RMSNorm) at a size a CPU runs. Build it straight on
# the device (`with torch.device(device)`), then cast it to its dtype there: a model built on
# the CPU and then moved needs its full fp32 size in the runtime's RAM first, which is how a
# large model crashes Colab's 12 GB ("Your session crashed after using all available RAM").
# Built on the GPU, its fp32 copy lives there for a moment instead: fine for a small model,
# not for a 7B one (29 GB in fp32), which you load in its 16-bit dtype weight by weight.
# For a pretrained model, `from_pretrained(..., dtype=torch.float16, device_map="cuda")` does
# both while loading (section 7).

# %%
shape = memory.ModelShape("tiny", vocab=2048, hidden=256, intermediate=688, layers=4, heads=8, kv_heads=2,
                          head_dim=32)
torch.manual_seed(0)
with torch.device(device):
    model = cg.TinyDecoder(shape).to(dtype).eval()
weights = memory.storage_bytes(model.parameters())
expected = memory.weight_bytes(shape.parameters, FORMAT[dtype])
print(f"{shape.parameters:,} parameters in {dtype}: {weights / 2**20:.2f} MiB measured, "
      f"{expected / 2**20:.2f} MiB computed")
assert weights == expected

# %% [markdown]
# ## 4. Generation with and without a KV cache
#
# A language model generates one token at a time: run the model on the text so far, take the
# most likely next token, append it, repeat. Without a cache, step `t` recomputes the keys and
# values of all `t` tokens again. With a **KV cache**, each layer keeps the keys and values it
# computed, and each step runs the model on the one new token. The loop, in plain PyTorch
# (`TinyDecoder` takes the cache and returns it extended; `cg.generate` is this loop). Greedy
# decoding reads the logits of the last position only, so the loop asks for those alone
# (`last_only=True`): the output layer is the largest matrix product of a step. The model is
# untrained, so expect one token over and over: the point here is the mechanics.

# %%
model = model.float()  # in place: the same weights, in fp32 (why, below)
prompt = torch.randint(0, shape.vocab, (1, 32), device=device)
tokens, cache, step_input = prompt, None, prompt
with torch.inference_mode():
    for _ in range(8):
        logits, cache = model(step_input, cache, last_only=True)  # each layer's cache grows by the new tokens
        next_token = logits[:, -1].argmax(dim=-1, keepdim=True)  # greedy: the most likely token
        tokens = torch.cat([tokens, next_token], dim=1)
        step_input = next_token  # the next step reads only the new token
print("generated token ids:", tokens[0, prompt.shape[1]:].tolist())
assert torch.equal(tokens, cg.generate(model, prompt, 8))

# %% [markdown]
# The loop also reads nothing back from the device: the prompt's ids are checked once (an id
# out of range would stop a GPU for good), and every later id is the model's own `argmax`, so
# no step waits for the GPU to finish (lesson 10's rule: no `.item()` in the loop).
#
# The cache pays where recomputing costs something: long prompts, several of them at once.
# Each step without it runs the model on the whole sequence so far, with it on 1 token.
# **Predict first:** will the two ways give the same tokens? (In fp32 here: in 16 bits they
# round differently, and where two tokens are almost equally likely, greedy decoding may pick
# the other one.) Timed as lesson 10 compares two ways, interleaved, 7 samples each, each
# printed with its K (calls per sample: 1 where a generation lasts longer than 20 ms on a CPU;
# on a GPU at least 8 while 8 calls last under a second, else as many as fit in one):

# %%
batch, prompt_tokens, new_tokens = (16, 2048, 32) if on_gpu else (2, 96, 12)
prompts = torch.randint(0, shape.vocab, (batch, prompt_tokens), device=device)
runs = {"with the cache": lambda: cg.generate(model, prompts, new_tokens),
        "without": lambda: cg.generate(model, prompts, new_tokens, use_cache=False)}
timings = cg.compare_steps(runs, device=device, warmup=1)
for name, result in timings.items():
    print(f"{name:15} {batch * new_tokens / result.median:8,.0f} tokens/s (median of {len(result.times)} samples, "
          f"K={result.steps_per_sample})")
work = prompt_tokens + (new_tokens - 1) / 2  # tokens per sequence a step runs on without the cache, on average
speedup = timings["without"].median / timings["with the cache"].median
same = torch.equal(runs["with the cache"](), runs["without"]())
print(f"same tokens: {same}; each step runs the model on 1 token instead of {work:,.1f} on average, and the "
      f"cache is {speedup:.1f}x faster here")
assert same and speedup > 1

_, cache = model(prompt)
cache_bytes = memory.storage_bytes(memory.cache_tensors(cache))  # a (keys, values) pair per layer
assert cache_bytes == memory.kv_cache_bytes(shape, prompt.shape[1], fmt="fp32")
print(f"the cache of {prompt.shape[1]} tokens: {cache_bytes / 1024:.0f} KiB, as the formula says")

# %% [markdown]
# Why the figures come out as they do: lesson 10's `cg.profile_step` names the regime of a step
# and what its kernels are busy with. A step with the cache runs each of the model's operations
# on one token per sequence: on a GPU, well over a hundred small kernels, matmuls of 16 rows and
# attention over the cache, each too short to fill the GPU. On the course's H100 run
# (2026-11-26) the 1.41 ms of kernels of such a step filled about 88% of its 1.6 ms step (it
# had read 43% against the profiled 3.28 ms); that run did not yet time the host's part, and
# with ~300 kernels of under 5 µs each, 88% busy leaves the host's part about as long as the
# GPU's. The line below prints the step's time and both parts, measured on this runtime, and
# names the longer: in either case more sequences per step (the batch below) are the lever,
# not a faster kernel (on a T4, the host's part the longer, with Colab's 2 vCPUs)
# (prediction: t4 14.decode_parts). Such a step does little math per byte: its gauge is the bytes it reads per second
# (every weight and the whole cache, once per token) against the most a copy gets from this
# GPU's memory (`cg.copy_gbps`), and its levers move fewer bytes: a cache written in place
# instead of grown with `torch.cat` (which copies all of it every token), the heads paired by
# the attention kernel instead of repeated, 16 bits. The prompt pass runs the same operations
# on every prompt token at once (a step without the cache is one of those):

# %%

with torch.inference_mode():
    _, cache = model(prompts, last_only=True)  # the prompts' cache, as generate builds it
    next_token = torch.zeros(batch, 1, dtype=torch.long, device=device)
    # Each new token reads every weight and the whole cache once: the bytes a decode step moves, at the least.
    read = memory.storage_bytes(model.parameters()) + memory.storage_bytes(memory.cache_tensors(cache))
    bandwidth = cg.copy_gbps(device) if on_gpu else None  # the most GB/s this GPU's memory gives a copy
    decode = cg.profile_step(lambda: model(next_token, cache, last_only=True), device, steps=3,
                             bytes_per_step=read, peak_gbps=bandwidth)
    prefill = cg.profile_step(lambda: model.forward_unchecked(prompts, last_only=True), device, steps=3)  # ids: above
print(f"one step with the cache, {batch} x 1 token, reading {read / 2**20:.1f} MiB of weights and cache "
      f"({decode.achieved_gbps:.3g} GB/s): {decode.regime}")
print(f"the prompt pass, {batch} x {prompt_tokens:,} tokens: {prefill.regime}")

# %% [markdown]
# Serving many users at once is the same loop on a batch. A step of a small model reads the same
# weights and launches the same kernels whatever the batch, so tokens per second grow with the
# batch until memory (the cache grows with it) or compute runs out. Measured here, the three
# batches taking turns (timed one after the other, the first H100 run read batch 16 at 7,060
# tokens/s here and 8,003 for the larger prompts above, which do more work: timings of separate
# cells do not compare):

# %%
from functools import partial

batches = {batch: torch.randint(0, shape.vocab, (batch, 32), device=device) for batch in (1, 4, 16)}
runs = {batch: partial(cg.generate, model, prompts, 32) for batch, prompts in batches.items()}
for batch, result in cg.compare_steps(runs, device=device, warmup=1).items():  # interleaved, 7 samples each
    print(f"batch {batch:2}: {batch * 32 / result.median:8,.0f} tokens/s (K={result.steps_per_sample})")

# %% [markdown]
# Which 16-bit format to generate in? Lesson 06's rule holds here too: bf16 from compute
# capability 8.0 (A100, L4, H100), fp16 on a T4. A T4 has no bf16 tensor cores, so bf16 runs
# there slowly (and attention falls back to the math kernel), although
# `torch.cuda.is_bf16_supported()` answers True. An H100 runs both at the same tensor-core
# rate, which only a step that keeps the GPU busy can show. On a GPU, one token at a time, a
# model this small waits on tiny kernels and the host that launches them (the decode line
# above), in any format, and so does a small prompt pass: in the first
# H100 run, 16 prompts of 512 tokens (~60 GFLOP, under 0.2 ms at that GPU's measured bf16
# matmul rate) took 3 ms a pass. Timed 5 single calls per format, fp16 first, the cell read
# bf16 1.7x slower; a second run read them 4% apart. Both formats got cuDNN's attention
# (section 1's rule): the gap was the host's noise (that first run was slower in every cell
# of this section), not the format. So here: 64 prompts of 1,024 tokens on a GPU, both
# formats interleaved, K passes per sample, and the attention kernel each one gets:

# %%
import copy

batch, prompt_tokens = (64, 1024) if on_gpu else (4, 128)
prompts = torch.randint(0, shape.vocab, (batch, prompt_tokens), device=device)
formats = {"fp16": torch.float16, "bf16": torch.bfloat16}
models = {name: copy.deepcopy(model).to(dtype) for name, dtype in formats.items()}  # the same weights, rounded
with torch.inference_mode():  # the prompt pass of generation: the last position's logits only
    passes = {name: partial(m, prompts, last_only=True) for name, m in models.items()}  # called later
    timings = cg.compare_steps(passes, device=device, warmup=1)
for name, result in timings.items():
    kernel = cg.attention_backend(capability, formats[name], shape.head_dim, cudnn_first=cudnn_first,
                                  key_length=prompt_tokens)
    choice = "  <- lesson 06's choice on this GPU" if on_gpu and formats[name] == precision.dtype else ""
    print(f"{name}: {batch * prompt_tokens / result.median:12,.0f} prompt tokens/s (K={result.steps_per_sample}), "
          f"attention kernel: {kernel}{choice}")
if not on_gpu:
    print("A CPU's figures: its 16-bit kernels are its own (recent x86 CPUs have fast bf16 matrix kernels, slow fp16 "
          "ones) and say nothing of a GPU's tensor cores.")

# %% [markdown]
# ## 5. LoRA by hand
#
# Fine-tuning all weights needs 16 bytes per parameter (section 3). LoRA freezes the model and
# adds to a few linear layers (the attention's query and value projections) a trainable update
# `B @ A` of low rank `r`: A is (r x in), B is (out x r), and the layer computes
# `base(x) + (alpha / r) · x Aᵀ Bᵀ`. B starts at **zero**, so at step 0 the model is
# unchanged; only `r x (in + out)` numbers per layer train. The scale is `alpha / r`, not a
# constant, so that changing the rank does not change the size of the update: the learning
# rate you tuned still fits.
#
# A model loaded in 16 bits has 16-bit layers, but A and B are trained weights, and trained
# weights stay in fp32: lesson 06's master weights. In fp16 they break at the first AdamW step:
# B starts at zero, so A's first gradient is 0, and Adam divides by √(its running mean of
# squared gradients) + `eps`, where `eps = 1e-8` rounds to 0 in fp16 (whose smallest number is
# 6e-8): 0/0, NaN. PEFT keeps its adapters in fp32 for this reason. `forward` casts A and B to
# the input's dtype, as autocast casts fp32 weights, and the layer returns the base layer's
# dtype, which the layers after it expect.
#
# ## Exercise: write a LoRA linear layer
#
# Complete `MyLoRALinear`:
# - keep `base` frozen (`requires_grad_(False)`);
# - add `self.A` (random: `nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))`, as `nn.Linear`
#   does) and `self.B` (zeros) as `nn.Parameter`s in fp32 on the base layer's device. Pass
#   `device=` and `dtype=` when you create the tensor: `.to()` on an `nn.Parameter` returns a
#   plain tensor, which no optimizer sees;
# - keep `self.scale = alpha / rank`, and add the scaled update in `forward`, computed with A
#   and B cast to `x.dtype`.
#
# The check runs your layer against the definition on an fp32 and an fp16 layer (one AdamW
# step included), then measures what it saves on this runtime.

# %%
from torch import nn


class MyLoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, rank: int, alpha: float):
        super().__init__()
        self.base = base
        # your code: freeze base, add self.A and self.B (fp32, on base.weight.device), self.scale = alpha / rank

    def forward(self, x):
        return self.base(x)  # your code: add the low-rank update, with A and B cast to x.dtype


# %%
cg.checks.lora_linear(MyLoRALinear, device)

# %% [markdown]
# ## 6. Your layer in a model: train, measure, save, merge
#
# To put a layer into a model, walk the model's modules and replace each target `nn.Linear`
# in place: `named_children()` gives each submodule with its attribute name, and `setattr`
# swaps it. Freeze the model first: the adapters, created after, train. The model is built in
# this runtime's 16 bits, as a model you load would be (fp32 on a CPU). The check decides which
# layer goes in: yours once it passes; until then the package's `LoRALinear` (the same layer),
# so that the lesson runs to the end.

# %%
from colab_gpu.llm.lora import LoRALinear

lora_class = MyLoRALinear if cg.checks.lora_linear(MyLoRALinear, device) else LoRALinear
print(f"the LoRA layer below: {lora_class.__name__}")

# %%
text = "the quick brown fox jumps over the lazy dog. " * 8
ids = torch.tensor([[ord(c) % shape.vocab for c in text]], device=device)  # one token per character
torch.manual_seed(0)
with torch.device(device):
    model = cg.TinyDecoder(shape).to(dtype)

model.requires_grad_(False)  # freeze everything: the adapters created below train
for module in list(model.modules()):  # a list: the loop changes the model
    for name, child in list(module.named_children()):
        if name in ("q", "v") and isinstance(child, nn.Linear):  # the query and value projections
            setattr(module, name, lora_class(child, rank=8, alpha=16.0))  # in place of the nn.Linear
adapters = [p for p in model.parameters() if p.requires_grad]
print(f"layer 0's q is now a {type(model.layers[0].q).__name__}; training {sum(p.numel() for p in adapters):,} "
      f"of {sum(p.numel() for p in model.parameters()):,} parameters: adapters in {adapters[0].dtype}, "
      f"weights in {dtype}")

# %% [markdown]
# `cg.add_lora(model, targets=("q", "v"), rank=8, layer_class=lora_class)` is this loop, and
# says which linear layers exist when no name matches (the reload below and section 7 use it).
# Training needs no change for the adapters: the optimizer gets them, and in fp16 lesson 06's
# `GradScaler` scales the loss (it unscales fp32 gradients only: one more reason for fp32
# adapters).

# %%
optimizer = torch.optim.AdamW(adapters, lr=1e-2)
scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)  # lesson 06: fp16 only
losses = []
for _ in range(60):
    logits, _ = model(ids[:, :-1])
    loss = F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten())
    optimizer.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    losses.append(loss.item())  # 60 steps: reading the loss each step costs nothing worth avoiding here
print(f"loss {losses[0]:.2f} -> {losses[-1]:.2f}")
assert losses[-1] < 0.8 * losses[0]

# %% [markdown]
# What training keeps from step to step, measured, against training every weight (section 3's
# arithmetic):

# %%
gradients = memory.storage_bytes(p.grad for p in adapters if p.grad is not None)
moments = memory.storage_bytes(t for state in optimizer.state.values() for key, t in state.items() if key != "step")
full = memory.training_bytes(shape.parameters)
print(f"gradients {gradients / 2**20:.2f} MiB and Adam's moments {moments / 2**20:.2f} MiB; training every weight: "
      f"{full['gradients'] / 2**20:.1f} MiB and {full['adam moments'] / 2**20:.1f} MiB")
assert 50 * gradients < full["gradients"] and 50 * moments < full["adam moments"]

# %% [markdown]
# Only the adapters changed, so only they need saving: the parameters that require a gradient.
# To use them again, build the base model again (for a pretrained one, `from_pretrained`),
# add the adapters, and load the file with `strict=False`: the base model's weights are the
# keys it lacks.

# %%
import io

trained = {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}  # A and B of each layer
file = io.BytesIO()  # in your project, a path: torch.save(trained, "adapters.pt")
torch.save(trained, file)
print(f"saved {len(trained)} tensors: {file.tell() / 2**20:.2f} MiB, for a model of "
      f"{memory.storage_bytes(model.parameters()) / 2**20:.2f} MiB")

torch.manual_seed(0)
with torch.device(device):
    reloaded = cg.TinyDecoder(shape).to(dtype)  # the same base weights
cg.add_lora(reloaded, targets=("q", "v"), rank=8, layer_class=lora_class)
file.seek(0)
missing, unexpected = reloaded.load_state_dict(torch.load(file), strict=False)
assert not unexpected and len(missing) + len(trained) == len(reloaded.state_dict())
model.eval()
reloaded.eval()
with torch.no_grad():
    adapted = model(ids)[0]
    difference = (reloaded(ids)[0] - adapted).abs().max().item()
print(f"reloaded: {len(missing)} tensors from the base model, {len(trained)} from the file; largest difference "
      f"{difference:.1e}")
assert difference <= 1e-3 * adapted.abs().max().item()

# %% [markdown]
# For inference, `cg.merge_lora` folds each `scale · B @ A` into its base weight: the model is an
# ordinary one again, at no cost per token. In 16 bits the merged weight is rounded once, so
# the outputs move by that rounding (fp16 and bf16 keep 3 to 4 significant digits).

# %%
with torch.no_grad():
    merged_layers = cg.merge_lora(model)
    merged = model(ids)[0]
difference = (adapted - merged).abs().max().item()
print(f"merged {merged_layers} layers into nn.Linear: largest difference {difference:.1e}, for logits up to "
      f"{adapted.abs().max().item():.1f}")
assert merged_layers == 2 * shape.layers
assert difference <= (1e-5 if dtype == torch.float32 else 2e-2) * adapted.abs().max().item()

# %% [markdown]
# ## 7. A pretrained model from the Hugging Face Hub
#
# In your own projects you will load a model rather than build one, with Hugging Face
# `transformers` (preinstalled on Colab and Kaggle; `pip install transformers` elsewhere leaves
# torch as it is). Two calls:
#
# ```python
# from transformers import AutoModelForCausalLM, AutoTokenizer
# model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype, device_map=device)
# tokenizer = AutoTokenizer.from_pretrained(name)
# ```
#
# `dtype` and `device_map` are section 3's fix for the RAM crash: each weight goes straight to
# the GPU, in 16 bits (`device_map` needs the package accelerate, which Colab and Kaggle have).
# `cg.load_language_model` makes these two calls; where the Hub cannot be
# reached (CI, an offline laptop) it builds the same architecture with random weights, straight on
# the device in the same 16 bits, says so, and returns no tokenizer. SmolLM2-135M is a Llama with
# 135 million parameters.
# **Predict first:** how many MiB do its weights take in this runtime's format (section 3)?

# %%
my_prediction = None  # MiB, e.g. 500

# %%
with cg.measure_peak(device) as loading:  # lesson 07: the GPU allocator's peak (None on a CPU)
    llm, tokenizer, pretrained = cg.load_language_model("HuggingFaceTB/SmolLM2-135M", dtype=dtype, device=device)
llm_shape = memory.ModelShape.from_config(llm.config)  # its config.json, as section 3's shapes
weights = memory.storage_bytes(llm.parameters())
expected = memory.weight_bytes(llm_shape.parameters, FORMAT[dtype])
print(f"SmolLM2-135M ({'pretrained' if pretrained else 'random weights'}): {llm_shape.parameters:,} parameters "
      f"in {dtype}, {weights / 2**20:,.0f} MiB measured, {expected / 2**20:,.0f} MiB computed"
      + ("" if my_prediction is None else f" (you predicted {my_prediction} MiB)"))
assert weights == expected
if loading.peak_mib is not None:  # what the GPU held at most while loading: the weights, and what loading adds
    print(f"peak GPU memory while loading: {loading.peak_mib:,.0f} MiB, for {weights / 2**20:,.0f} MiB of weights")
    assert loading.peak_mib * 2**20 >= weights

# %% [markdown]
# Generation is `model.generate`: greedy (`do_sample=False`) as in section 4, with the KV cache
# on by default (offline, the stand-in's random weights have nothing to say: its ids repeat).
# The cache of the prompt, measured against section 3's formula:

# %%
if tokenizer is not None:
    inputs = tokenizer("The GPU in this notebook", return_tensors="pt").to(device)
else:  # the stand-in has no vocabulary: token ids instead of words
    prompt_ids = torch.randint(0, llm_shape.vocab, (1, 6), device=device)
    inputs = {"input_ids": prompt_ids, "attention_mask": torch.ones_like(prompt_ids)}
new_tokens = 32 if on_gpu else 8
with torch.no_grad():
    result = cg.benchmark(lambda: llm.generate(**inputs, max_new_tokens=new_tokens, do_sample=False),
                          device=device, warmup=1, repeat=3)
    output = llm.generate(**inputs, max_new_tokens=new_tokens, do_sample=False)
    # the cache is outputs.cache (outputs.past_key_values before transformers 5); cache_tensors takes either
    cache_bytes = memory.storage_bytes(memory.cache_tensors(llm(**inputs)))
generated = output[0, inputs["input_ids"].shape[1]:]
completion = tokenizer.decode(generated) if tokenizer is not None else generated.tolist()
print(f"{len(generated) / result.median:,.0f} tokens/s:", completion)
with torch.no_grad():  # what one step of generate waits on (lesson 10's rule)
    print("one forward pass on the prompt:", cg.profile_step(lambda: llm(**inputs), device, steps=3).regime)
prompt_length = inputs["input_ids"].shape[1]
assert cache_bytes == memory.kv_cache_bytes(llm_shape, prompt_length, fmt=FORMAT[dtype])
print(f"the cache of its {prompt_length}-token prompt: {cache_bytes / 1024:,.0f} KiB, as the formula says; "
      f"beside fp16 weights a T4 holds {memory.context_that_fits(llm_shape, t4):,} tokens (its trained "
      f"maximum: {llm.config.max_position_embeddings:,})")

# %% [markdown]
# Why so few tokens per second on a fast GPU (the course's H100 run printed 39)? Hugging Face's
# `generate` on one short prompt makes one token per step, and each step of a model this small
# is dozens of small kernels per layer plus Python around them. The regime line above names
# what such a step waits on, on this runtime; on a GPU expect launch-bound, the host launching
# kernels that finish sooner than the next is launched (prediction: t4 14.generate_launch_bound).
# A faster GPU does not help there; more sequences per step (the batch of section 4) do.
#
# Your LoRA layer fits this model too: its attention projections are called `q_proj` and
# `v_proj`, and `cg.add_lora` does section 6's loop. Counted, and checked against
# `rank x (inputs + outputs)` per adapted layer:

# %%
total = sum(p.numel() for p in llm.parameters())
rank = 8
cg.add_lora(llm, targets=("q_proj", "v_proj"), rank=rank, layer_class=lora_class)
trainable = sum(p.numel() for p in llm.parameters() if p.requires_grad)
q_out, v_out = llm_shape.heads * llm_shape.head_dim, llm_shape.kv_heads * llm_shape.head_dim
assert trainable == llm_shape.layers * rank * ((llm_shape.hidden + q_out) + (llm_shape.hidden + v_out))
adapter_dtype = next(p.dtype for p in llm.parameters() if p.requires_grad)
print(f"LoRA of rank 8 on {llm_shape.layers} layers: {trainable:,} trainable parameters, "
      f"{100 * trainable / total:.2f}% of {total:,}; adapters in {adapter_dtype}, weights in {dtype}")

# %% [markdown]
# In practice, [PEFT](https://huggingface.co/docs/peft) adds the adapters, trains them with
# `transformers`' Trainer or your own loop, and saves only them (a few MB). Where it is
# installed, the same adapters through PEFT count the same, and PEFT keeps them in fp32 too
# (its `autocast_adapter_dtype=True`, the default):

# %%
import importlib.util

if importlib.util.find_spec("peft") is None:
    print("PEFT is not installed in this runtime: it is the package `peft` on PyPI (which leaves torch as it is).")
else:
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as error:  # a peft older than this transformers (peft 0.17 with transformers 5)
        print(f"PEFT does not import here ({error}): upgrade it with transformers, then restart the runtime.")
    else:
        base = cg.load_language_model("HuggingFaceTB/SmolLM2-135M", dtype=dtype, device=device).model
        with warnings.catch_warnings():  # a peft/transformers version mismatch warns of their own renames
            warnings.simplefilter("ignore", FutureWarning)
            peft_model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
        peft_trainable, _ = peft_model.get_nb_trainable_parameters()
        peft_dtype = next(p.dtype for p in peft_model.parameters() if p.requires_grad)
        print(f"PEFT: {peft_trainable:,} trainable parameters, adapters in {peft_dtype}, weights in {dtype}")
        assert peft_trainable == trainable
        del base, peft_model

# %% [markdown]
# ## Summary
#
# - Attention is `softmax(q kᵀ / √d) v`; `F.scaled_dot_product_attention` computes it with a
#   fused kernel that never stores the (tokens x tokens) scores: flash from compute capability
#   8.0, memory-efficient on a T4 (fp16, not bf16), math otherwise (`cg.attention_backend`).
# - Attention by hand needs memory that grows with the square of the length.
# - Memory before loading: weights = parameters x bytes; KV cache = 2 x layers x KV heads x
#   head_dim x tokens x batch x bytes; full training with Adam = 16 bytes per parameter.
#   Build a model on the device in its dtype (`with torch.device(device)`), not on the CPU.
# - A KV cache gives the same tokens for far less work per step; batching raises throughput.
#   A generation loop reads nothing back per token and computes the logits it reads, no more.
# - LoRA: freeze the model, train `B @ A` (B at zero, scaled by `alpha / r`) on a few layers,
#   A and B in fp32 beside 16-bit weights (in fp16, Adam's first step gives NaN), cast to the
#   input's dtype in `forward`. Put a layer into a model by replacing each target `nn.Linear`
#   found by `named_children()`; save only the parameters that require a gradient; merge for
#   inference.
# - A Hub model: `from_pretrained(name, dtype=..., device_map=...)` loads it on the GPU in 16
#   bits; `ModelShape.from_config(model.config)` gives section 3's arithmetic for it.
#
# Next: lesson 15, when one GPU is not enough: the levers that fit a model a T4 cannot hold
# (checkpointing, a smaller optimizer state, QLoRA, offload) and FSDP2 across two GPUs.
#
# The part below is optional.

# %% [markdown]
# ## Going further (optional): which attention kernel runs, and what each costs
#
# PyTorch's own choice of kernel for given inputs is a private function,
# `torch._fused_sdp_choice` (private: it may change in any release). It agrees with
# `cg.attention_backend`, section 1's table as code:

# %%
names = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn"}  # the numbers it returns
for candidate in (torch.float16, torch.bfloat16):
    x = torch.randn(1, heads, length, head_dim, device=device, dtype=candidate)
    predicted = cg.attention_backend(capability, candidate, head_dim, cudnn_first=cudnn_first, key_length=length)
    actual = names[torch._fused_sdp_choice(x, x, x)]
    print(f"{str(candidate):15} the rule says {predicted:9} PyTorch picks {actual}")
    assert predicted == actual

# %% [markdown]
# Forced one at a time, the kernels show which of them this runtime has for section 1's
# inputs, and what each costs (math is PyTorch's unfused version of section 1's four lines). A
# call takes tens of microseconds on a GPU: timed one synchronized call at a time it measures
# the launch and the wait (the course's H100 read 43-46 µs for the fused kernel at 1,024 and
# 2,048 tokens alike). So the kernels are timed as lesson 10 compares steps: K calls per sample
# between two synchronizations, the kernels taking turns.

# %%
def attention_through(backend):
    """One attention call on section 1's inputs, through ``backend`` only."""
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v)


available = {}
for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                SDPBackend.MATH):
    with warnings.catch_warnings(record=True) as why:
        warnings.simplefilter("always")
        try:
            attention_through(backend)  # refused where this runtime has no such kernel for these inputs
            available[backend.name] = partial(attention_through, backend)  # called later, many times
        except RuntimeError:  # "No available kernel": the warnings say why
            said = [r for r in reasons(why) if not r.endswith("because:")]  # the reasons, not their headings
            print(f"{backend.name:20} refused: {'; '.join(said) or 'not a kernel PyTorch has for this device'}")
for name, timing in cg.compare_steps(available, device=device).items():
    print(f"{name:20} {cg.format_seconds(timing.median):>9} per call (K={timing.steps_per_sample})")

