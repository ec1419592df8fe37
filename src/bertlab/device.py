"""Device and precision, decided in one place."""
import torch

DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
PRECISIONS = ("auto", *DTYPES)  # auto: bf16 on a CUDA device that has it, else fp32

# Peak dense tensor throughput per device, TFLOP/s (bf16, fp32), from NVIDIA's datasheets (their
# sparse figures halved): the denominator of model FLOPs utilisation (MFU). Matched in this order
# against torch.cuda.get_device_name(), e.g. "NVIDIA H100 80GB HBM3" (SXM), "NVIDIA A100-SXM4-80GB".
PEAK_TFLOPS = (("H100 NVL", 835.0, 60.0), ("H100 PCIe", 756.0, 51.0), ("H100", 989.0, 67.0),
               ("H200 NVL", 835.0, 60.0), ("H200", 989.0, 67.0), ("A100", 312.0, 19.5))


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise ValueError(f"--device {name!r}: unknown device; use cpu, cuda, cuda:N, mps or auto") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"--device {name}: CUDA is not available on this machine")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    elif device.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError(f"--device {name}: MPS is not available on this machine")
    elif device.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"--device {name}: bertlab runs on cpu, cuda or mps")
    return device


def cpu_has_native_bf16() -> bool:
    """AVX-512 BF16 or AMX: without them bf16 matmuls on the CPU are emulated and slower than fp32."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_precision(precision: str, device: torch.device) -> str:
    """fp32, bf16 or fp16: "auto" is bf16 on a CUDA device with bf16 (Ampere and later: half the
    memory traffic, the tensor cores' full rate, no loss scaling), fp32 anywhere else (the CPU, MPS)."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of {sorted(PRECISIONS)}")
    if precision != "auto":
        return precision
    return "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"


def peak_tflops(device: torch.device, precision: str) -> float | None:
    """The device's peak dense TFLOP/s at `precision` (fp16 counts as bf16), or None where unknown."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, half, single in PEAK_TFLOPS:
        if key in name:
            return single if precision == "fp32" else half
    return None


def autocast_dtype(precision: str, device: torch.device):
    """The autocast dtype for --precision (after resolve_precision), warning where it will not pay off."""
    dtype = DTYPES[resolve_precision(precision, device)]
    if dtype is torch.float16 and device.type == "cpu":
        raise ValueError("fp16 is for GPUs; on the CPU use --precision bf16")
    if dtype is torch.bfloat16 and device.type == "cpu" and not cpu_has_native_bf16():
        import warnings
        warnings.warn("this CPU has no native bf16 (AVX-512 BF16/AMX): bf16 will be slower than fp32")
    return dtype
