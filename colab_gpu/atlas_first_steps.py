"""The error atlas, first steps (lessons 01-05): setup, moving tensors and models, training, loading data."""

from __future__ import annotations

from .atlas_entry import entry

ENTRIES = (
    entry(
        "no-gpu",
        "setup",
        "No CUDA GPUs are available",
        r"No CUDA GPUs are available",
        "The runtime has no GPU attached (Colab's default runtime, or CUDA_VISIBLE_DEVICES hides it), yet "
        "the code asked for 'cuda'.",
        "Runtime > Change runtime type > T4 GPU, then run from the top; in code use cg.get_device().",
        "lesson 01, section 1; lesson 09, section 1",
        reproduced=False,
    ),
    entry(
        "no-driver",
        "setup",
        "Found no NVIDIA driver on your system",
        r"Found no NVIDIA driver",
        "A CUDA build of PyTorch on a machine without an NVIDIA driver: a CPU runtime on Colab or Kaggle.",
        "Switch the runtime to a GPU (Colab: Runtime > Change runtime type; Kaggle: Settings > Accelerator), "
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
)
