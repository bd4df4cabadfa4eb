"""The CPU's feature flags, as /proc/cpuinfo lists them: what the exporter and the model
scripts (models/make_*.py) decide bf16 by."""


def cpu_flags():
    """The flags of the first CPU in /proc/cpuinfo (empty where there is none to read)."""
    try:
        with open("/proc/cpuinfo") as f:
            return set(next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), []))
    except OSError:
        return set()


def native_bf16():
    """The flags that give bf16 arithmetic (as torch.cpu's hasNativeBf16), joined by ' + ', or
    None where bf16 would be emulated."""
    flags = cpu_flags()
    return " + ".join(f for f in ("amx_bf16", "avx512_bf16") if f in flags) or None
