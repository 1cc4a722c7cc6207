"""Hostile input to the real ``launchbay`` command: bounded work, exit 2, a message, no traceback.

Every command runs in a subprocess under a memory and CPU-time limit
(``resource.setrlimit`` before exec), so a regression fails the test instead of
eating the machine: an alias bomb or a million-host job that is not refused
runs into the limit (or the timeout) and exits with something other than 2.
"""

from __future__ import annotations

import os
import resource
import textwrap

import pytest

from launchbay._capacity import local_capacity

MEMORY_LIMIT = 1536 * 1024 * 1024  # bytes of address space for the command
CPU_SECONDS = 60


def bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))


LOCAL = textwrap.dedent(
    """
    framework: pytorch
    framework_version: "2.13"
    py_version: py311
    entry_point: train.py
    source_dir: src
    instance_type: local_process
    instance_count: 1
"""
).lstrip()


def check_refused(result, *expected: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr[-4000:]
    assert result.stdout == ""
    for text in expected:
        assert text in result.stderr, result.stderr[-2000:]


def alias_bomb(levels: int = 9) -> str:
    """A few hundred bytes of YAML that stand for 9**levels strings."""
    lines = ['x-0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        refs = ",".join([f"*a{i - 1}"] * 9)
        lines.append(f"x-{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


@pytest.fixture
def run_bounded(run_cli):
    def run(*args: str, timeout: float = 60):
        return run_cli(*args, timeout=timeout, preexec_fn=bounded)

    return run


def test_alias_bomb_is_refused_with_a_message(run_bounded, project):
    bomb = alias_bomb()
    assert len(bomb) < 1000
    spec = project.spec(bomb + LOCAL + f"hyperparameters:\n  x: *a{8}\n")
    check_refused(
        run_bounded("validate", spec),
        "the spec expands to more than 100000 values (YAML aliases",
    )
    check_refused(run_bounded("submit", spec, "--dry-run"), "expands to more than 100000")


def test_alias_bomb_in_a_set_override(run_bounded, project):
    spec = project.spec(LOCAL)
    levels = ["&a [1,1,1,1,1,1,1,1,1]"]
    levels += [
        f"&{c} [{','.join(['*' + p] * 9)}]" for p, c in zip("abcdefg", "bcdefgh", strict=True)
    ]
    bomb = "[" + ", ".join(levels) + "]"
    check_refused(
        run_bounded("validate", spec, "--set", f"hyperparameters.x={bomb}"),
        "hyperparameters.x: the value expands to more than 100000 values",
    )


def test_too_many_aliases(run_bounded, project):
    refs = ", ".join(["*one"] * 1001)
    spec = project.spec(f"x-one: &one 1\nx-many: [{refs}]\n" + LOCAL)
    check_refused(run_bounded("validate", spec), "job.yaml:2: more than 1000 YAML aliases")


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    # Named by file: an id made of the content (200 KB for deepmap.yaml) would be the
    # test's PYTEST_CURRENT_TEST, more than one environment string may hold (E2BIG at exec).
    [pytest.param(*case, id=case[0]) for case in [
        ("nul.yaml", LOCAL.encode() + b"role: a\x00b\n", "job spec holds a NUL byte"),
        ("latin1.yaml", LOCAL.encode() + b"role: caf\xe9\n",
         "is not UTF-8 text (byte 0xe9 at offset"),
        ("binary.yaml", bytes(range(256)) * 64, "is not UTF-8 text (byte 0x80 at offset 128)"),
        ("controls.yaml", bytes(range(1, 32)) * 4, "invalid YAML"),
        ("deep.yaml", b"[" * 100_000, "deep.yaml:1: lists and mappings nest more than 64"),
        ("deepmap.yaml", b"{a: " * 50_000, "lists and mappings nest more than 64 levels"),
        ("deepblock.yaml", "".join(f"{' ' * i}k:\n" for i in range(200)).encode(),
         "lists and mappings nest more than 64 levels"),
        ("empty.yaml", b"", "the job spec is empty"),
        ("huge.yaml", b"# padding\n" * 120_000, "is larger than 1048576 bytes"),
    ]],
)  # fmt: skip
def test_bad_files_exit_2_with_a_message(run_bounded, project, name, content, expected):
    path = project.root / name
    path.write_bytes(content)
    check_refused(run_bounded("validate", path), expected)
    check_refused(run_bounded("submit", path, "--dry-run"), expected)


def test_directory_and_device_are_not_read_whole(run_bounded, project):
    (project.root / "dir.yaml").mkdir()
    check_refused(run_bounded("validate", project.root / "dir.yaml"), "cannot read the job spec")
    # never opened for reading: a device or a FIFO is refused by what it is (issue 31)
    check_refused(run_bounded("validate", "/dev/zero"), "it is a character device")
    os.mkfifo(project.root / "fifo.yaml")
    check_refused(
        run_bounded("validate", project.root / "fifo.yaml", timeout=30),
        "fifo.yaml: cannot read the job spec: it is a FIFO (named pipe)",
    )


def test_deep_but_allowed_nesting_still_works(run_cli, project):
    nested = "1"
    for _ in range(60):
        nested = f"[{nested}]"
    spec = project.spec(LOCAL + f"x-deep: {nested}\n")
    result = run_cli("validate", spec)
    assert result.returncode == 0, result.stderr


# -- defect 5: one number asking for unbounded local work ------------------------------------


def test_million_hosts_local_refused_before_anything_is_made(run_bounded, project, cli_env):
    limit = local_capacity().max_ranks
    spec = project.spec(LOCAL.replace("instance_count: 1", "instance_count: 1000000"))
    expected = (
        "job.yaml:7: instance_count: Invalid instance_count=1000000 for "
        "instance_type='local_process'",
        f"at most {limit} (the larger of 32 and 8 per CPU",
        "LAUNCHBAY_MAX_LOCAL_RANKS",
    )
    check_refused(run_bounded("validate", spec), *expected)
    check_refused(run_bounded("submit", spec, "--dry-run"), *expected)
    check_refused(run_bounded("submit", spec), *expected)
    check_refused(run_bounded("submit", spec, "--no-wait"), *expected)
    home = cli_env["LAUNCHBAY_HOME"]
    jobs = os.path.join(home, "jobs")
    assert not os.path.exists(jobs) or os.listdir(jobs) == []


@pytest.mark.parametrize(
    ("section", "key", "argument"),
    [
        ("torch_distributed: {enabled: true, processes_per_host: 1000000}",
         "torch_distributed.processes_per_host",
         "distribution['torch_distributed']['processes_per_host']=1000000"),
        ("mpi: {enabled: true, processes_per_host: 1000000}",
         "mpi.processes_per_host",
         "distribution['mpi']['processes_per_host']=1000000"),
        ("smdistributed: {dataparallel: {enabled: true, processes_per_host: 1000000}}",
         "smdistributed.dataparallel.processes_per_host",
         "distribution['smdistributed']['dataparallel']['processes_per_host']=1000000"),
    ],
)  # fmt: skip
def test_huge_processes_per_host_refused(run_bounded, project, section, key, argument):
    spec = project.spec(LOCAL + f"distribution:\n  {section}\n")
    check_refused(
        run_bounded("submit", spec, "--dry-run"),
        f"job.yaml:9: distribution.{key}: Invalid {argument} for instance_type='local_process'",
        "1 host(s) x 1000000 process(es) per host = 1000000 ranks",
    )


def test_override_and_sagemaker_types_keep_their_own_limits(run_cli, project, cli_env):
    spec = project.spec(LOCAL.replace("instance_count: 1", "instance_count: 40"))
    env = dict(cli_env, LAUNCHBAY_MAX_LOCAL_RANKS="40")
    result = run_cli("validate", spec, env=env, preexec_fn=bounded)
    assert result.returncode == 0, result.stderr
    env["LAUNCHBAY_MAX_LOCAL_RANKS"] = "lots"
    check_refused(
        run_cli("validate", spec, env=env, preexec_fn=bounded),
        "Invalid LAUNCHBAY_MAX_LOCAL_RANKS='lots'",
    )
    remote = project.spec(
        LOCAL.replace("instance_type: local_process", "instance_type: ml.p4d.24xlarge")
        .replace("instance_count: 1", "instance_count: 5000")
        .replace('"2.13"', '"2.3"')
        + "role: arn:aws:iam::123456789012:role/SageMakerRole\n"
        + "distribution:\n  torch_distributed: {enabled: true, processes_per_host: 4096}\n",
        name="remote.yaml",
    )
    result = run_cli("validate", remote, preexec_fn=bounded)
    assert result.returncode == 0, result.stderr


# -- defect 6: CreateTrainingJob's limits, reported at the key ---------------------------------


def test_request_limits_are_reported_at_their_key(run_bounded, project):
    spec = project.spec(LOCAL + "hyperparameters:\n  epochs: 1\n  lr: " + "9" * 2600 + "\n")
    check_refused(
        run_bounded("validate", spec),
        "job.yaml:10: hyperparameters.lr: Invalid hyperparameters['lr']=",
        "it has 2600 characters. Accepted: a string (at most 2500 characters)",
    )
    spec = project.spec(LOCAL + "environment:\n  MY VAR: x\n")
    check_refused(
        run_bounded("submit", spec, "--dry-run"),
        "job.yaml:9: environment.MY VAR: Invalid environment['MY VAR']='MY VAR': the key does not",
    )
    spec = project.spec(LOCAL + "volume_kms_key: alias/my key\n")
    check_refused(
        run_bounded("validate", spec),
        "job.yaml:8: volume_kms_key: Invalid volume_kms_key='alias/my key': it does not match",
    )
