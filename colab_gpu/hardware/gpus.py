"""The GPUs the course names, in one table: the word a device's name holds ("Tesla T4" -> "T4"), its compute
capability, its memory as PyTorch reports it where the course computes with it, and whether the course keeps
reference figures for it (colab_gpu/references.json). Every other list of GPUs derives from `GPUS`: the capability
rules' `COURSE_GPUS`, the references' labels, a T4's bytes for lesson 14's and 15's arithmetic
(`colab_gpu.llm.llm_memory.T4_BYTES`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CourseGpu:
    """One GPU learners meet (where they meet it: the table's comments)."""

    label: str  # the whole word its device name holds: an "NVIDIA L40S" is not an "L4"
    capability: tuple[int, int]
    reference: bool = False  # the course keeps reference figures for it
    memory_gib: float | None = None  # ``total_memory`` as PyTorch reports it, where the course computes with it


#: In the order Colab's menu offers them, after Kaggle's and the clusters' older GPUs: the order reports list them.
GPUS: tuple[CourseGpu, ...] = (
    CourseGpu("P100", (6, 0)),  # Kaggle's P100
    CourseGpu("V100", (7, 0)),  # older clusters
    # Colab's free GPU, Kaggle's T4 x2: 14.75 GiB of its 16 GB ("14.75 GiB total capacity" in its out-of-memory errors)
    CourseGpu("T4", (7, 5), reference=True, memory_gib=14.75),
    CourseGpu("L4", (8, 9), reference=True),  # Colab Pro
    CourseGpu("A100", (8, 0), reference=True),  # Colab Pro
    CourseGpu("H100", (9, 0), reference=True),  # Colab Pro, the course's GPU runs
)
BY_LABEL = {gpu.label: gpu for gpu in GPUS}
#: Each course GPU's compute capability, for the capability rules and their tests.
COURSE_GPUS = {gpu.label: gpu.capability for gpu in GPUS}
#: The GPUs the course keeps reference figures for, in the order reports list them.
REFERENCE_GPUS = tuple(gpu.label for gpu in GPUS if gpu.reference)
