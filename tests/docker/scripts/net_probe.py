"""Can this host reach the job's other host, and an address outside the job network?

``--outside HOST:PORT``: an address on the Docker host. Writes
``$SM_OUTPUT_DATA_DIR/probe-<host>.json`` with ``peer`` and ``outside``: "ok" or the error.
"""

import argparse
import json
import os
import socket
import threading
import time

PORT = 47123
parser = argparse.ArgumentParser()
parser.add_argument("--outside", required=True)
args, _ = parser.parse_known_args()
me = os.environ["SM_CURRENT_HOST"]
peer = next(h for h in json.loads(os.environ["SM_HOSTS"]) if h != me)

server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("0.0.0.0", PORT))
server.listen(4)
accepted = threading.Event()


def serve():
    conn, _ = server.accept()
    conn.close()
    accepted.set()


threading.Thread(target=serve, daemon=True).start()


def connect(host, port, attempts):
    error = ""
    for _ in range(attempts):
        try:
            socket.create_connection((host, port), timeout=2).close()
            return "ok"
        except OSError as exc:
            error = f"{type(exc).__name__}: {exc}"
            time.sleep(0.5)
    return error


result = {"peer": connect(peer, PORT, 60)}
host, port = args.outside.rsplit(":", 1)
result["outside"] = connect(host, int(port), 2)
accepted.wait(30)  # the peer connected to us too, before we exit
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"probe-{me}.json"), "w") as f:
    json.dump(result, f)
print(me, result)
