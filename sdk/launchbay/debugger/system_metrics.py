"""System metrics of a local job, in the files SageMaker's profiler writes (standard library only).

A local job with a profiler interval (``ProfilerConfig(system_monitor_interval_millis=...)``,
the request's ``ProfilingIntervalInMilliseconds``) or profiling rules gets a monitor
process (niced) that samples, every interval, each CPU core's utilisation
(``/proc/stat``), the memory in use (``/proc/meminfo``) and, where ``nvidia-smi`` is
present, each GPU's utilisation and memory. It appends one JSON line per value to
``<dir>/system/incremental/<YYYYmmddHH>/<minute>.<host>.json``, the events format
SageMaker writes and smdebug's ``LocalSystemMetricsReader`` reads::

    {"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 12.5,
     "NodeId": "algo-1", "Timestamp": 1700000000.25}

The hosts of a local job share this machine: every host's file holds the machine's
metrics. docs/debugger.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any

__all__ = ["NICE", "Sampler", "event_file", "monitor_main"]

#: The monitor's niceness (added to the client's).
NICE = 19


def event_file(root: str, host: str, stamp: float) -> str:
    """``<root>/system/incremental/<YYYYmmddHH>/<minute>.<host>.json`` for time ``stamp``."""
    minute = int(stamp) - int(stamp) % 60
    hour = time.strftime("%Y%m%d%H", time.gmtime(minute))
    return os.path.join(root, "system", "incremental", hour, f"{minute:010d}.{host}.json")


def _cpu_times() -> list[tuple[int, int]]:
    """``[(busy, total)]`` jiffies of each core (``/proc/stat``'s ``cpuN`` lines)."""
    found = []
    with open("/proc/stat", encoding="ascii") as f:
        for line in f:
            if line.startswith("cpu") and line[3:4].isdigit():
                fields = [int(v) for v in line.split()[1:]]
                idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
                found.append((sum(fields) - idle, sum(fields)))
    return found


def _memory_percent() -> float:
    info: dict[str, int] = {}
    with open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            key, _, rest = line.partition(":")
            info[key] = int(rest.split()[0])
    total = info.get("MemTotal", 0)
    available = info.get("MemAvailable", info.get("MemFree", 0))
    return 100.0 * (total - available) / total if total else 0.0


def _gpus(nvidia_smi: str) -> list[tuple[float, float]]:
    """``[(utilisation %, memory %)]`` of each GPU ``nvidia-smi`` lists."""
    out = subprocess.run(
        [nvidia_smi, "--query-gpu=utilization.gpu,memory.used,memory.total",
         "--format=csv,noheader,nounits"],
        capture_output=True, text=True, timeout=10, check=True,
    ).stdout  # fmt: skip
    found = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3:
            util, used, total = (float(p) for p in parts)
            found.append((util, 100.0 * used / total if total else 0.0))
    return found


class Sampler:
    """One sample of this machine's metrics as events, for each host."""

    def __init__(self, hosts: list[str]) -> None:
        self.hosts = hosts
        self.last = _cpu_times()
        self.nvidia_smi = shutil.which("nvidia-smi")

    def sample(self) -> list[dict[str, Any]]:
        now = time.time()
        cpu = _cpu_times()
        values = []
        for index, ((busy, total), (busy0, total0)) in enumerate(zip(cpu, self.last, strict=False)):
            spent = total - total0
            values.append(
                (
                    "cpu",
                    f"cpu{index}",
                    "CPUUtilization",
                    100.0 * (busy - busy0) / spent if spent else 0.0,
                )
            )
        self.last = cpu
        values.append(("cpu", "MemoryUsedPercent", "Memory", _memory_percent()))
        if self.nvidia_smi:
            try:
                for index, (util, memory) in enumerate(_gpus(self.nvidia_smi)):
                    values.append(("gpu", f"gpu{index}", "GPUUtilization", util))
                    values.append(("gpu", f"gpu{index}", "GPUMemoryUtilization", memory))
            except (OSError, ValueError, subprocess.SubprocessError):
                self.nvidia_smi = None  # asked once: a failing nvidia-smi is not asked again
        return [
            {"Type": kind, "Name": name, "Dimension": dimension, "Value": round(value, 2),
             "NodeId": host, "Timestamp": round(now, 6)}
            for host in self.hosts
            for kind, name, dimension, value in values
        ]  # fmt: skip


def _append(root: str, events: list[dict[str, Any]]) -> None:
    by_file: dict[str, list[str]] = {}
    for event in events:
        path = event_file(root, event["NodeId"], event["Timestamp"])
        by_file.setdefault(path, []).append(json.dumps(event, separators=(",", ":")))
    for path, lines in by_file.items():
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")


def monitor_main(argument: str) -> int:
    """The monitor process: sample every ``interval_ms`` into ``dir`` until stdin closes or says ``end``."""
    import select

    config = json.loads(argument)
    with contextlib.suppress(OSError):
        os.nice(NICE)
    with contextlib.suppress(OSError, AttributeError):  # Linux: CPU only when nothing else wants it
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    interval = max(int(config.get("interval_ms") or 500), 100) / 1000.0
    sampler = Sampler(list(config["hosts"]))
    parent = os.getppid()
    while True:
        ready, _, _ = select.select([0], [], [], interval)
        if ready:
            break  # "end", or the client closed the pipe
        if os.getppid() != parent:
            break
        try:
            _append(config["dir"], sampler.sample())
        except OSError as exc:
            sys.stderr.write(f"System metrics are not recorded: {exc}\n")
            return 1
    return 0
