"""Print, then sleep until stopped (Ctrl-C, stop, max_run)."""

import os
import time

print(f"sleeping on {os.environ['SM_CURRENT_HOST']} pid {os.getpid()}", flush=True)
time.sleep(600)
