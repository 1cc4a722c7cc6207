"""``mpi`` across 2 Ray hosts: mpirun on algo-1 starts orted on algo-2's node through its actor."""

from __future__ import annotations

import json
import tarfile

from test_ray_backend import fit_on_two_nodes, pytorch


def test_mpi_across_two_hosts(ray_home, tmp_path, capsys):
    estimator = pytorch(
        "mpi_hello.py",
        distribution={"mpi": {"enabled": True, "processes_per_host": 2}},
        output_path=f"file://{tmp_path}/out",
    )
    name, nodes = fit_on_two_nodes(estimator, ray_home)
    out = capsys.readouterr().out
    for rank in range(4):
        assert f"mpi rank {rank} of 4" in out, out
    reports = {}
    with tarfile.open(tmp_path / "out" / name / "output" / "output.tar.gz") as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith(".json"):
                report = json.load(tar.extractfile(member))
                reports[report["rank"]] = report
    assert sorted(reports) == [0, 1, 2, 3], reports
    assert {r["host"] for r in reports.values()} == {"algo-1", "algo-2"}
    assert all(r["size"] == 4 and r["sum"] == 6 for r in reports.values())
    # Each rank's parent (mpirun on algo-1, orted on algo-2) runs in its host's node-local
    # tree: algo-2's orted was started by algo-2's actor, on its node.
    for report in reports.values():
        root = nodes[report["host"]]["root"]
        assert report["parent_tree"].startswith(root), (report, nodes)
