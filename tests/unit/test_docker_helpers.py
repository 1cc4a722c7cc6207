"""Pure parts of the Docker backend: endpoint rewriting, log line splitting, channel files."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from launchbay.backends.local.container_config import HostSpec
from launchbay.backends.local.container_hosts import (
    _needs_aws,
    _split_lines,
    compose_document,
    container_endpoint,
)
from launchbay.runtime.names import MAX_LOG_LINE


def test_loopback_endpoints_point_at_the_docker_host():
    assert container_endpoint("http://127.0.0.1:5000") == "http://host.docker.internal:5000"
    assert container_endpoint("http://localhost:9/x?y=1") == "http://host.docker.internal:9/x?y=1"
    assert container_endpoint("https://s3.us-west-2.amazonaws.com") == (
        "https://s3.us-west-2.amazonaws.com"
    )
    assert container_endpoint("http://10.0.0.5:5000") == "http://10.0.0.5:5000"


def test_lines_split_across_chunks_and_characters():
    text = "première ligne\nseconde\r\nlast without newline".encode()
    chunks = [text[i : i + 3] for i in range(0, len(text), 3)]
    assert list(_split_lines(chunks)) == ["première ligne", "seconde", "last without newline"]
    assert list(_split_lines([b""])) == []
    assert list(_split_lines([b"a\n", b"\n"])) == ["a", ""]


def test_a_carriage_return_ends_a_line_and_long_lines_come_in_bounded_pieces():
    """A progress bar is shown as it moves; a line without end is held in bounded pieces."""
    assert list(_split_lines([b"10%\r20%\r", b"\n30%\r\ndone\n"])) == ["10%", "20%", "30%", "done"]
    big = b"x" * (3 * MAX_LOG_LINE + 5)
    pieces = list(_split_lines(big[i : i + 4096] for i in range(0, len(big), 4096)))
    assert [len(p) for p in pieces] == [MAX_LOG_LINE] * 3 + [5]


def test_a_channel_for_containers_holds_its_own_files(tmp_path):
    """Staged for containers, a channel's files are hard links to the same files: the
    channel directory can be mounted alone, nothing around it is needed."""
    from launchbay.backends.local.layout import JobLayout
    from launchbay.backends.local.staging import LocalStager

    data = tmp_path / "data"
    (data / "ab").mkdir(parents=True)
    (data / "ab" / "obj1").write_text("1")
    (data / "obj2").write_text("2")
    layout = JobLayout.create(str(tmp_path / "jobs"), "job-1", ["algo-1", "algo-2"])
    request = {
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "DataSource": {
                    "S3DataSource": {
                        "S3Uri": f"file://{data}",
                        "S3DataDistributionType": "ShardedByS3Key",
                    }
                },
            },
            {
                "ChannelName": "one",
                "DataSource": {"S3DataSource": {"S3Uri": f"file://{data}/obj2"}},
            },
        ]
    }
    LocalStager(home=str(tmp_path / "home")).stage_channels(request, layout, own_files=True)
    hosts = [Path(layout.host_dir(h)) / "input" / "data" for h in ("algo-1", "algo-2")]
    for link, target in (
        (hosts[0] / "train" / "obj2", data / "obj2"),
        (hosts[1] / "train" / "ab" / "obj1", data / "ab" / "obj1"),
        (hosts[0] / "one" / "obj2", data / "obj2"),
        (hosts[1] / "one" / "obj2", data / "obj2"),
    ):
        assert not link.is_symlink()
        assert os.path.samefile(link, target)
    for host in hosts:
        assert not any(p.is_symlink() for p in host.rglob("*"))


def test_aws_is_needed_only_for_s3_locations():
    request = {
        "InputDataConfig": [{"DataSource": {"S3DataSource": {"S3Uri": "file:///d"}}}],
        "OutputDataConfig": {"S3OutputPath": "file:///out"},
        "HyperParameters": {"sagemaker_submit_directory": '"file:///code.tar.gz"'},
    }
    assert not _needs_aws(request)
    for change in (
        {"OutputDataConfig": {"S3OutputPath": "s3://b/out"}},
        {"CheckpointConfig": {"S3Uri": "s3://b/ckpt"}},
        {"HyperParameters": {"sagemaker_submit_directory": '"s3://b/code.tar.gz"'}},
        {"InputDataConfig": [{"DataSource": {"S3DataSource": {"S3Uri": "s3://b/d"}}}]},
    ):
        assert _needs_aws({**request, **change})


def test_compose_document_names_secrets_without_values():
    request = {
        "TrainingJobName": "job",
        "AlgorithmSpecification": {"TrainingImage": "img:1"},
    }
    spec = HostSpec(
        "algo-1",
        "launchbay-job-algo-1",
        {"/jobs/job/algo-1/model": {"bind": "/opt/ml/model", "mode": "rw"}},
        {"TRAINING_JOB_NAME": "job"},
        ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"],
        gpu_ids=["0"],
    )
    document = compose_document(request, [spec], gpu=True, isolated=True)
    service = document["services"]["algo-1"]
    assert service["environment"] == [
        "TRAINING_JOB_NAME=job",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
    ]
    assert service["volumes"] == ["/jobs/job/algo-1/model:/opt/ml/model:rw"]
    assert service["command"] == ["train"] and service["hostname"] == "algo-1"
    assert "extra_hosts" not in service  # an isolated job has no way out
    assert document["networks"]["job"]["internal"] is True
    assert service["deploy"]["resources"]["reservations"]["devices"] == [
        {"driver": "nvidia", "device_ids": ["0"], "capabilities": ["gpu"]}
    ]


def test_endpoints_on_the_clients_loopback_are_rewritten_with_one_notice(
    tmp_path, home, monkeypatch
):
    """Inherited (with S3 in the job) and given in ``environment=``: a container's loopback is
    its own, this machine is ``host.docker.internal``; another job's network variables stay
    out (issue 31, items 7 and 13)."""
    import warnings

    from launchbay.backends.local.container_hosts import ContainerHosts
    from launchbay.backends.plan import plan_request
    from launchbay.pytorch import PyTorch

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:5000")
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    monkeypatch.setenv("LAUNCHBAY_JOB_NETWORK", "4242")  # launchbay run inside another job
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("pass\n")
    est = PyTorch(
        entry_point="train.py", source_dir=str(code), framework_version="2.3", py_version="py311",
        role=None, instance_type="local", instance_count=2,
        output_path="s3://bucket/out",  # the containers talk to S3
        environment={
            "AWS_ENDPOINT_URL_S3": "http://localhost:5001/",
            "AWS_ENDPOINT_URL_STS": "https://sts.us-west-2.amazonaws.com",
            "LAUNCHBAY_JOB_NETWORK": "4242",
            "LAUNCHBAY_HOST_NS_PID": "4243",
        },
    )  # fmt: skip
    request = est.create_training_job_request(f"file://{code}", job_name="endpoints")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        specs = ContainerHosts(gpu=False).host_specs(
            plan_request(request), str(tmp_path / "job"), ["algo-1", "algo-2"],
            local_code=True, grace=5.0,
        )  # fmt: skip
    notices = [str(w.message) for w in caught if "loopback" in str(w.message)]
    assert len(notices) == 1, notices
    assert "AWS_ENDPOINT_URL=http://127.0.0.1:5000" in notices[0]
    assert "AWS_ENDPOINT_URL_S3=http://localhost:5001/" in notices[0]
    for spec in specs:
        env = spec.environment
        assert env["AWS_ENDPOINT_URL"] == "http://host.docker.internal:5000"
        assert env["AWS_ENDPOINT_URL_S3"] == "http://host.docker.internal:5001/"
        assert env["AWS_ENDPOINT_URL_STS"] == "https://sts.us-west-2.amazonaws.com"
        assert "LAUNCHBAY_JOB_NETWORK" not in env and "LAUNCHBAY_HOST_NS_PID" not in env


@pytest.mark.parametrize(
    ("docker_host", "here"),
    [
        (None, True),
        ("", True),
        ("unix:///run/user/1000/docker.sock", True),
        ("tcp://10.0.0.5:2376", False),
        ("ssh://builder@remote", False),
    ],
)
def test_only_an_engine_on_this_machine_gets_this_machines_cpu_shares(
    monkeypatch, docker_host, here
):
    # A container's cpuset names the engine's CPUs: this machine's shares fit only there.
    from launchbay._docker import engine_on_this_machine

    if docker_host is None:
        monkeypatch.delenv("DOCKER_HOST", raising=False)
    else:
        monkeypatch.setenv("DOCKER_HOST", docker_host)
    assert engine_on_this_machine() is here


class _Engine:
    """Stands in for docker's APIClient (the engine's answers), not for our code. Each has
    a URL of its own: launchbay keeps an engine's answers per URL and process."""

    def __init__(
        self, info: dict | None = None, error: Exception | None = None, bridge: list | None = None
    ):
        self.base_url = f"http+docker://engine-{uuid.uuid4().hex}"
        self._info, self._error, self._bridge, self.asked = info, error, bridge, 0

    def _answer(self, answer):
        self.asked += 1
        if self._error is not None:
            raise self._error
        return answer

    def info(self):
        return self._answer(self._info)

    def inspect_network(self, name):
        assert name == "bridge"
        return self._answer(
            {"IPAM": {"Driver": "default", "Options": None, "Config": self._bridge}}
        )


@pytest.mark.parametrize(
    ("info", "error", "pins"),
    [
        ({"NCPU": "same", "CPUSet": True}, None, True),
        ({"NCPU": "same", "CPUSet": False}, None, False),  # rootless, no cpuset controller
        ({"NCPU": "other", "CPUSet": True}, None, False),  # an engine in a VM: not our CPUs
        (None, OSError("engine gone"), False),
    ],
)
def test_containers_are_pinned_only_where_the_engine_can_and_it_is_asked_once(
    monkeypatch, info, error, pins
):
    from launchbay.backends.local.container_config import engine_pins_cpus

    monkeypatch.delenv("DOCKER_HOST", raising=False)
    if info is not None:
        info = {**info, "NCPU": os.cpu_count() if info["NCPU"] == "same" else 1000}
    api = _Engine(info, error)
    client = SimpleNamespace(api=api)
    assert engine_pins_cpus(client) is pins
    assert engine_pins_cpus(client) is pins
    assert api.asked == 1


def test_a_jobs_hosts_file_is_readable_by_every_user_and_only_grows(tmp_path):
    """Every user of a container reads ``/etc/hosts``; a container sees whole lines added."""
    from launchbay.backends.local import etc_hosts

    path = str(tmp_path / "hosts")
    old = os.umask(0o077)
    try:
        etc_hosts.start_file(path, "172.17.0.1")
    finally:
        os.umask(old)
    assert os.stat(path).st_mode & 0o777 == 0o644
    inode = os.stat(path).st_ino
    etc_hosts.add_host(path, "172.30.0.2", "algo-1")
    etc_hosts.add_host(path, "172.30.0.3", "algo-2")
    lines = Path(path).read_text().splitlines()
    assert lines[0] == "127.0.0.1\tlocalhost"
    assert lines[-3:] == [
        "172.17.0.1\thost.docker.internal",
        "172.30.0.2\talgo-1",
        "172.30.0.3\talgo-2",
    ]
    assert os.stat(path).st_ino == inode  # the file a container mounted, not a new one
    etc_hosts.start_file(path, None)  # an isolated network: no way out, no gateway name
    assert "host.docker.internal" not in Path(path).read_text()
    assert not os.path.exists(path + ".tmp")


@pytest.mark.parametrize(
    ("configs", "error", "address"),
    [
        ([{"Subnet": "172.17.0.0/16", "Gateway": "172.17.0.1"}], None, "172.17.0.1"),
        ([{"Subnet": "10.9.0.0/24", "Gateway": "10.9.0.5"}], None, "10.9.0.5"),  # --bip
        # Docker 20.10 that made its own bridge on a fresh machine names no gateway: the
        # bridge holds the subnet's first address (the failure on a fresh CI machine).
        ([{"Subnet": "172.17.0.0/16"}], None, "172.17.0.1"),
        (
            [{"Subnet": "fd00::/64", "Gateway": "fd00::1"}, {"Subnet": "172.18.0.0/16"}],
            None,
            "172.18.0.1",
        ),
        ([{"Subnet": "fd00::/64"}], None, None),
        ([], None, None),
        (None, OSError("no bridge: --bridge=none"), None),
    ],
)
def test_host_gateway_is_the_bridges_gateway_or_its_subnets_first_address(configs, error, address):
    from launchbay.backends.local.etc_hosts import host_gateway_address

    api = _Engine(error=error, bridge=configs)
    client = SimpleNamespace(api=api)
    assert host_gateway_address(client) == address
    assert host_gateway_address(client) == address
    assert api.asked == 1
