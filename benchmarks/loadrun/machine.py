"""The machine a load run ran on, recorded in its report."""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    cpu: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            cpu.setdefault(key.strip(), value.strip())
    cpu_model = cpu.get("model name", "")
    flags = cpu.get("flags", "").split()
    mem_kib = 0
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu_model": cpu_model or platform.processor() or "unknown",
        "cpu_family_model": f"{cpu.get('cpu family', '?')}/{cpu.get('model', '?')}",
        "cpu_mhz": cpu.get("cpu MHz", ""),
        "virtualized": "hypervisor" in flags,
        "avx512": "avx512f" in flags,
        "cores": usable,
        "logical_cpus": os.cpu_count(),
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def locust_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("locust")
    except PackageNotFoundError:
        return "not installed"
