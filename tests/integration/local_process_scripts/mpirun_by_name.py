"""The first host runs its own ``mpirun --host algo-1:1,algo-2:1`` (no distribution config).

Open MPI resolves the host names itself (C library); names that resolve to this
machine are started locally, names that do not make it try ssh and fail. The
result goes to ``$SM_MODEL_DIR/mpirun.json``.
"""

import json
import os
import subprocess
import sys

hosts = json.loads(os.environ["SM_HOSTS"])
if os.environ["SM_CURRENT_HOST"] == hosts[0]:
    # One write per line: the job runs unbuffered, where print() writes its parts one by
    # one and mpirun could interleave the two ranks' parts ("sumsum 3 3").
    rank_code = (
        "import sys; from mpi4py import MPI; c = MPI.COMM_WORLD; "
        "sys.stdout.write(f'sum {c.allreduce(c.rank + 1)}\\n')"
    )
    done = subprocess.run(
        ["mpirun", "--allow-run-as-root", "--oversubscribe",
         "--host", ",".join(f"{h}:1" for h in hosts), "-np", str(len(hosts)),
         "-mca", "btl_vader_single_copy_mechanism", "none",
         sys.executable, "-c", rank_code],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    with open(os.path.join(os.environ["SM_MODEL_DIR"], "mpirun.json"), "w") as f:
        json.dump({"rc": done.returncode, "out": done.stdout, "err": done.stderr[-2000:]}, f)
    sys.exit(done.returncode)
