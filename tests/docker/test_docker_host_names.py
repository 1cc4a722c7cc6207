"""A Docker host's name resolves for the whole job, as a machine's does, even after its
container has ended (docs/local.md, "Host names").

The engine's DNS forgets a container's name when it stops. A job's host that was done
early took its name with it, and a host that looked it up later waited: the SageMaker
training toolkit retries every host's name for 15 minutes before it runs the script
(``tests/docker/test_docker_backend.py``'s toolkit test hung so once). Here ``algo-1``
ends at once; ``algo-2`` waits until the engine's DNS (127.0.0.11) no longer knows
``algo-1``, then resolves it the way every program does (``gethostbyname``): in a fresh
container and in a warm pool's.
"""

from __future__ import annotations

import json
import tarfile

import pytest

from launchbay import Estimator
from launchbay.backends.local import warm_pool

pytestmark = [pytest.mark.docker]

IMAGE = "launchbay/pytorch-training:2.13.0-cpu-py311"

SCRIPT = r'''
import json, os, socket, struct, time

host = os.environ["SM_CURRENT_HOST"]


def in_engine_dns(name):
    """Whether the engine's embedded DNS answers ``name`` with an address."""
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split("."))
    query = struct.pack(">HHHHHH", 7, 0x0100, 1, 0, 0, 0) + labels + b"\0" + b"\0\1\0\1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(1)
        sock.sendto(query, ("127.0.0.11", 53))
        try:
            reply = sock.recv(512)
        except socket.timeout:
            return False
    return struct.unpack(">H", reply[6:8])[0] > 0


seen = {"own": socket.gethostbyname(host)}
if host == "algo-2":
    deadline = time.monotonic() + 120
    while in_engine_dns("algo-1"):
        assert time.monotonic() < deadline, "algo-1 stayed in the engine's DNS"
        time.sleep(0.2)
    seen["algo-1"] = socket.gethostbyname("algo-1")
    seen["localhost"] = socket.gethostbyname("localhost")
    try:
        seen["gateway"] = socket.gethostbyname("host.docker.internal")
    except OSError as exc:
        seen["gateway"] = str(exc)
with open(os.path.join(os.environ["SM_MODEL_DIR"], host + ".json"), "w") as f:
    json.dump(seen, f)
'''


@pytest.mark.parametrize("keep_alive", [None, 300], ids=["fresh-hosts", "warm-pool"])
def test_a_host_that_ended_still_resolves_for_the_hosts_that_run_on(
    home, tmp_path, docker_client, host_gateway, keep_alive
):
    docker_client.images.get(IMAGE)
    source = tmp_path / "src"
    source.mkdir()
    (source / "names.py").write_text(SCRIPT)
    # Two hosts of the image, each a container; with keep_alive, a warm pool's.
    hosts = {
        "instance_type": "local",
        "instance_count": 2,
        "keep_alive_period_in_seconds": keep_alive,
    }
    est = Estimator(
        image_uri=IMAGE, role=None, entry_point="names.py", source_dir=str(source), **hosts
    )
    est.output_path = f"file://{tmp_path}/out"
    try:
        # With a pool: the first job makes it, the second runs in its waiting containers.
        for _ in range(1 if keep_alive is None else 2):
            est.fit(logs=False)
            with tarfile.open(est.model_data.removeprefix("file://")) as tar:
                seen = {
                    host: json.load(tar.extractfile(f"{host}.json"))  # type: ignore[arg-type]
                    for host in ("algo-1", "algo-2")
                }
            assert seen["algo-2"]["algo-1"] == seen["algo-1"]["own"], seen
            assert seen["algo-2"]["own"] != seen["algo-1"]["own"], seen
            assert seen["algo-2"]["localhost"] == "127.0.0.1"
            # The engine's hosts file is not there to name host-gateway: ours does.
            assert seen["algo-2"]["gateway"] == host_gateway
        if keep_alive is not None:
            assert warm_pool.read_job_pool(est.latest_training_job.describe()["LocalJobDir"])[
                "reused"
            ]
    finally:
        warm_pool.stop_pools(docker_client, now=True)
