"""Vertex AI machine types and accelerators: which pairs a training job may ask for, checked before
submission.

A leaf module (no imports of generic_trainer's but errors, no Google Cloud libraries), used by
`vertex-job` and the Vertex pipeline. The table holds the machine families Vertex AI custom training
offers (https://cloud.google.com/vertex-ai/docs/training/configure-compute) and, for the GPU ones,
the accelerator type and counts that come with them. A family not in the table is refused with the
known ones named, unless the caller allows unknown machine types (new families appear over time).
"""

from __future__ import annotations

import re

from generic_trainer.errors import UserInputError

ACCELERATOR_TYPES = (
    "NVIDIA_TESLA_T4",
    "NVIDIA_TESLA_V100",
    "NVIDIA_TESLA_P4",
    "NVIDIA_TESLA_P100",
    "NVIDIA_TESLA_K80",
    "NVIDIA_TESLA_A100",
    "NVIDIA_A100_80GB",
    "NVIDIA_L4",
    "NVIDIA_H100_80GB",
    "NVIDIA_H100_MEGA_80GB",
    "NVIDIA_H200_141GB",
    "NVIDIA_B200",
    "NVIDIA_GB200",
    "NVIDIA_RTX_PRO_6000",
    "TPU_V2",
    "TPU_V3",
    "TPU_V4_POD",
    "TPU_V5_LITEPOD",
)
# GPUs NVIDIA supports from CUDA 12.8 and cuDNN 9.7 on: the default image's CUDA libraries (12.5 /
# 9.3, what
# TensorFlow 2.21 is built with) predate them, images/trainer/cuda-blackwell.lock's do not.
BLACKWELL_GPUS = ("NVIDIA_B200", "NVIDIA_GB200", "NVIDIA_RTX_PRO_6000")
# CPU-only families: no accelerator may be attached.
CPU_FAMILIES = ("n2", "n2d", "e2", "c2", "c2d", "m1", "c3", "n4")
# N1 machines take these GPUs, in these counts per replica.
N1_GPUS = {
    "NVIDIA_TESLA_T4": (1, 2, 4),
    "NVIDIA_TESLA_V100": (1, 2, 4, 8),
    "NVIDIA_TESLA_P4": (1, 2, 4),
    "NVIDIA_TESLA_P100": (1, 2, 4),
}
# Accelerator-optimized families: machine type pattern -> (accelerator type, count from the name or
# fixed).
BUNDLED_GPUS = (
    (re.compile(r"a2-highgpu-(1|2|4|8)g"), "NVIDIA_TESLA_A100"),
    (re.compile(r"a2-megagpu-(16)g"), "NVIDIA_TESLA_A100"),
    (re.compile(r"a2-ultragpu-(1|2|4|8)g"), "NVIDIA_A100_80GB"),
    (re.compile(r"a3-highgpu-(1|2|4|8)g"), "NVIDIA_H100_80GB"),
    (re.compile(r"a3-megagpu-(8)g"), "NVIDIA_H100_MEGA_80GB"),
    (re.compile(r"a3-ultragpu-(8)g"), "NVIDIA_H200_141GB"),
    (re.compile(r"a4-highgpu-(8)g"), "NVIDIA_B200"),
)
G2_L4_COUNTS = {4: 1, 8: 1, 12: 1, 16: 1, 24: 2, 32: 1, 48: 4, 96: 8}
MACHINE_TYPE = re.compile(r"([a-z][a-z0-9]*)-([a-z]+)-([0-9]+g?)")
KNOWN = (
    "n1-{standard,highmem,highcpu}-N (+ T4, V100, P4, P100), "
    + ", ".join(f"{f}-*" for f in CPU_FAMILIES)
    + " (CPU only), a2-highgpu-Ng / a2-megagpu-16g (A100), a2-ultragpu-Ng (A100 80GB), "
    "a3-highgpu-Ng (H100), a3-megagpu-8g, a3-ultragpu-8g, a4-highgpu-8g, g2-standard-N (L4)"
)


def _bundled(machine_type: str) -> tuple[str, int] | None:
    for pattern, accelerator in BUNDLED_GPUS:
        match = pattern.fullmatch(machine_type)
        if match:
            return accelerator, int(match.group(1))
    match = re.fullmatch(r"g2-standard-([0-9]+)", machine_type)
    if match and int(match.group(1)) in G2_L4_COUNTS:
        return "NVIDIA_L4", G2_L4_COUNTS[int(match.group(1))]
    return None


IMAGE_PAGE, IMAGE_SECTION = "docs/running/docker.md", "Building the image"  # the build arguments


def image_note(accelerator_type: str | None) -> str | None:
    """What an image needs for this accelerator beyond the default GPU image's CUDA libraries.

    Args:
        accelerator_type: Vertex's accelerator type, e.g. "NVIDIA_B200" (None: no GPU).

    Returns:
        One line naming the build argument and the page that explains it (None: nothing).
    """
    if accelerator_type in BLACKWELL_GPUS:
        return (
            f"{accelerator_type} is a Blackwell GPU: the image must carry CUDA >= 12.8 and cuDNN "
            ">= 9.7 libraries; the default GPU image has 12.5 / 9.3, so build it with --build-arg "
            f"CUDA_LOCK=cuda-blackwell.lock (see {IMAGE_PAGE}, section '{IMAGE_SECTION}')"
        )
    return None


def check_machine(
    machine_type: str,
    accelerator_type: str | None,
    accelerator_count: int,
    flag: str = "--machine-type",
    allow_unknown: bool = False,
) -> None:
    """Refuse a machine type Vertex AI does not offer, or an accelerator it cannot carry; the error
    names both."""
    pair = f"{machine_type}" + (
        f" with {accelerator_count}x {accelerator_type}" if accelerator_type else ""
    )
    _check_accelerator(accelerator_type, pair, flag.replace("machine-type", "accelerator-type"))
    match = MACHINE_TYPE.fullmatch(machine_type or "")
    family = match.group(1) if match else None
    bundled = _bundled(machine_type)
    if bundled:
        kind, count = bundled
        if accelerator_type != kind or accelerator_count != count:
            raise UserInputError(
                flag,
                f"{pair}: {machine_type} comes with {count}x {kind}; give "
                f"accelerator type {kind} and count {count}",
            )
        return
    if family == "n1" and match.group(2) in N1_KINDS:
        _check_n1(accelerator_type, accelerator_count, pair, flag)
        return
    if family in CPU_FAMILIES:
        if accelerator_type:
            raise UserInputError(
                flag,
                f"{pair}: {family} machines take no accelerators; use n1-* (T4, V100, P4, "
                "P100) or an accelerator-optimized type (a2, a3, g2)",
            )
        return
    if family in ("a2", "a3", "a4", "g2"):
        raise UserInputError(
            flag, f"{pair}: not a {family} machine type Vertex AI offers; known: {KNOWN}"
        )
    if not allow_unknown:
        raise UserInputError(
            flag,
            f"unknown machine type {machine_type!r}; known: {KNOWN}. (A family newer than this "
            "table? pass --allow-unknown-machine-type)",
        )


N1_KINDS = ("standard", "highmem", "highcpu", "megamem", "ultramem")


def _check_accelerator(accelerator_type: str | None, pair: str, flag: str) -> None:
    """Refuse an accelerator Vertex AI does not offer, or a TPU."""
    if accelerator_type and accelerator_type not in ACCELERATOR_TYPES:
        raise UserInputError(
            flag,
            f"unknown accelerator "
            f"{accelerator_type!r}; Vertex AI offers {', '.join(ACCELERATOR_TYPES)}",
        )
    if accelerator_type and accelerator_type.startswith("TPU_"):
        raise UserInputError(
            flag,
            f"{pair}: TPUs are not supported (the runtime chooses GPU and CPU strategies only)",
        )


def _check_n1(accelerator_type: str | None, accelerator_count: int, pair: str, flag: str) -> None:
    """An n1 machine's GPUs: the kinds and counts it takes."""
    if accelerator_type and accelerator_type not in N1_GPUS:
        raise UserInputError(
            flag,
            f"{pair}: n1 machines take {', '.join(N1_GPUS)}; {accelerator_type} comes "
            "with its own machine family (e.g. NVIDIA_TESLA_A100: a2-highgpu-Ng, "
            "NVIDIA_L4: g2-standard-N)",
        )
    if accelerator_type and accelerator_count not in N1_GPUS[accelerator_type]:
        raise UserInputError(
            flag,
            f"{pair}: n1 machines take {accelerator_type} in counts "
            f"{', '.join(map(str, N1_GPUS[accelerator_type]))}",
        )
