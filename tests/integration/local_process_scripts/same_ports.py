"""Every host binds 127.0.0.1:29500 and its own name at port 7777, as on SageMaker.

Once every host holds its ports (a marker file each in ``$MARKS``), each host connects to every other host's ``algo-N:7777`` and reads its name
back. What each saw goes to ``$SM_MODEL_DIR/<host>.json``.
"""

import json
import os
import socket
import threading
import time

hosts = json.loads(os.environ["SM_HOSTS"])
current = os.environ["SM_CURRENT_HOST"]
report = {"host": current, "hostname": socket.gethostname()}

loopback = socket.socket()
loopback.bind(("127.0.0.1", 29500))  # a group of the host's own, as the Debugger example
loopback.listen()
server = socket.socket()
server.bind((current, 7777))  # TF_CONFIG-style worker address
server.listen()

# Every host holds both ports before any goes on: on a shared loopback one host's bind
# fails, however the hosts' starts fall.
marks = os.environ["MARKS"]
open(os.path.join(marks, current), "w").close()
deadline = time.time() + 60
while sorted(os.listdir(marks)) != sorted(hosts):
    if time.time() > deadline:
        raise TimeoutError(f"the other hosts did not bind their ports: {os.listdir(marks)}")
    time.sleep(0.1)


def serve() -> None:
    for _ in range(len(hosts) - 1):
        conn, _ = server.accept()
        conn.sendall(current.encode())
        conn.close()


thread = threading.Thread(target=serve)
thread.start()
seen = {}
for other in hosts:
    if other == current:
        continue
    deadline = time.time() + 60
    while True:
        try:
            with socket.create_connection((other, 7777), timeout=5) as conn:
                seen[other] = conn.recv(100).decode()
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)
thread.join()
report["seen"] = seen
report["address"] = socket.gethostbyname(current)
with open(os.path.join(os.environ["SM_MODEL_DIR"], f"{current}.json"), "w") as f:
    json.dump(report, f)
