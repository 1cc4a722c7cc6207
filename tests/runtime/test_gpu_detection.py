"""GPU discovery (``runtime.contract.detect_gpus``): nvidia-smi, the driver's fallbacks,
and ``CUDA_VISIBLE_DEVICES`` as the set a host may use (docs/local.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from launchbay.runtime import contract


@pytest.fixture
def no_nvidia_smi(tmp_path, monkeypatch):
    """A PATH on which no nvidia-smi exists (this machine has none anyway)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return tmp_path / "root"


def test_nvidia_smi_lines_give_the_device_ids(fake_gpus):
    fake_gpus(4)
    assert contract.detect_gpus({}) == ["0", "1", "2", "3"]
    assert contract.detect_num_gpus({}) == 4


@pytest.mark.parametrize(
    ("visible", "expected"),
    [
        ("2,3", ["2", "3"]),
        ("3,1", ["3", "1"]),  # its order, as CUDA numbers them
        ("GPU-fake-2,0", ["GPU-fake-2", "0"]),  # UUIDs too
        ("", []),
        ("-1", []),
        ("1,7,2", ["1"]),  # as CUDA: the list stops at the first unknown device
    ],
)
def test_cuda_visible_devices_is_the_set_a_host_uses(fake_gpus, visible, expected):
    fake_gpus(4)
    assert contract.detect_gpus({"CUDA_VISIBLE_DEVICES": visible}) == expected
    assert contract.detect_num_gpus({"CUDA_VISIBLE_DEVICES": visible}) == len(expected)


def test_sm_num_gpus_counts_only_the_visible_share(fake_gpus, tmp_path):
    fake_gpus(4)
    base = tmp_path / "opt-ml"
    (base / "input" / "config").mkdir(parents=True)
    environ = {"CUDA_VISIBLE_DEVICES": "2,3"}
    env = contract.training_env(str(base), environ, num_cpus=1, num_neurons=0)
    assert env.num_gpus == 2
    assert env.processes_per_host() == 2  # torchrun's nproc_per_node, MPI's -np per host
    assert contract.training_env(str(base), {}, num_cpus=1, num_neurons=0).num_gpus == 4


def test_a_cuda_visible_devices_left_set_on_a_machine_without_gpus_finds_none(no_nvidia_smi):
    assert contract.detect_gpus({"CUDA_VISIBLE_DEVICES": "0,1"}, root=str(no_nvidia_smi)) == []


def test_without_nvidia_smi_the_driver_list_is_counted(no_nvidia_smi):
    gpus = no_nvidia_smi / "proc" / "driver" / "nvidia" / "gpus"
    for bus in ("0000:3b:00.0", "0000:86:00.0"):
        (gpus / bus).mkdir(parents=True)
    assert contract.detect_gpus({}, root=str(no_nvidia_smi)) == ["0", "1"]
    assert contract.detect_gpus({"CUDA_VISIBLE_DEVICES": "1"}, root=str(no_nvidia_smi)) == ["1"]


def test_without_nvidia_smi_or_driver_list_the_device_files_are_counted(no_nvidia_smi):
    dev = no_nvidia_smi / "dev"
    dev.mkdir(parents=True)
    for name in ("nvidia0", "nvidia1", "nvidia3", "nvidiactl", "nvidia-uvm", "nvidia-modeset"):
        (dev / name).touch()
    assert contract.detect_gpus({}, root=str(no_nvidia_smi)) == ["0", "1", "3"]


def test_nothing_found_means_no_gpu(no_nvidia_smi):
    assert contract.detect_gpus({}, root=str(no_nvidia_smi)) == []
    assert contract.detect_num_gpus({}, root=str(no_nvidia_smi)) == 0


def test_a_failing_nvidia_smi_means_no_gpu(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed: no driver' >&2\nexit 9\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    root = Path(tmp_path / "root")
    (root / "dev").mkdir(parents=True)
    (root / "dev" / "nvidia0").touch()  # nvidia-smi's answer wins: no driver, no GPU
    assert contract.detect_gpus({}, root=str(root)) == []
