"""Save a model, then abort the interpreter at a chosen moment (torch 2.13 gloo's teardown abort).

``--how python``: an ``atexit`` handler calls ``os.abort()`` (after the script returned);
``--how c``: a C-level ``atexit`` handler calls ``abort()`` (after Python's finalization,
where gloo's static destructors abort); ``--how before``: ``os.abort()`` before returning.
``--torch``: first an all-reduce over gloo in the torchrun-made process group.

torchrun ends the other ranks of its host as soon as one dies. So that only the
abort after the return is exercised (and not which rank of a host got there
first), ``--how python`` under torchrun aborts once every rank of this host has
recorded its normal return in the runtime's ranks directory.
"""

import argparse
import atexit
import ctypes
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("--how", required=True, choices=["python", "c", "before"])
parser.add_argument("--torch", type=int, default=0)
args, _ = parser.parse_known_args()
rank = int(os.environ.get("RANK", "0"))
if args.torch:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    total = torch.tensor([1.0])
    dist.all_reduce(total)
    dist.barrier()
    dist.destroy_process_group()
with open(os.path.join(os.environ["SM_MODEL_DIR"], f"model-{rank}.txt"), "w") as f:
    f.write("trained")
print(f"rank {rank} done, aborting {args.how}", flush=True)


def abort_once_this_hosts_ranks_returned() -> None:
    ranks_dir = os.environ.get("LAUNCHBAY_RANKS_DIR")
    if args.torch and ranks_dir:
        from launchbay.runtime._records import end_path

        first = rank - int(os.environ.get("LOCAL_RANK", "0"))
        ranks = range(first, first + int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(
            os.path.exists(end_path(ranks_dir, r)) for r in ranks
        ):
            time.sleep(0.05)
    os.abort()


if args.how == "python":
    atexit.register(abort_once_this_hosts_ranks_returned)
elif args.how == "c":
    libc = ctypes.CDLL("libc.so.6")
    # atexit() itself is not exported by glibc; __cxa_atexit is what it calls.
    libc.__cxa_atexit(ctypes.cast(libc.abort, ctypes.c_void_p), None, None)
else:
    os.abort()
