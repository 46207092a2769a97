"""What the comparison scripts report about the machine and the torch build
(imported by torch_wan_layer.py and torch_density_bank.py, which run from
this folder)."""

import re

import torch


def cpu_model():
    """The first "model name" of /proc/cpuinfo, or "unknown"."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def blas_info():
    """The BLAS torch was built with (mkl, openblas, generic, ...)."""
    m = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    return m.group(1) if m else "unknown"
