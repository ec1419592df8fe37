"""Device and precision, decided in one place."""
import torch

DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


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


def autocast_dtype(precision: str, device: torch.device):
    """The autocast dtype for --precision, warning where it will not pay off."""
    if precision not in DTYPES:
        raise ValueError(f"unknown precision {precision!r}; choose one of {sorted(DTYPES)}")
    dtype = DTYPES[precision]
    if dtype is torch.float16 and device.type == "cpu":
        raise ValueError("fp16 is for GPUs; on the CPU use --precision bf16")
    if dtype is torch.bfloat16 and device.type == "cpu" and not cpu_has_native_bf16():
        import warnings
        warnings.warn("this CPU has no native bf16 (AVX-512 BF16/AMX): bf16 will be slower than fp32")
    return dtype
