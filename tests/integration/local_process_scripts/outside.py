"""Reaches a server on the client's loopback through the proxy variables a host gets.

``--url`` is plain HTTP (a proxied request); ``--tunnel host:port`` goes through
``CONNECT``, as HTTPS does. The answers go to ``$SM_MODEL_DIR/outside.json``.
"""

import argparse
import http.client
import json
import os
import urllib.parse
import urllib.request

parser = argparse.ArgumentParser()
parser.add_argument("--url")
parser.add_argument("--tunnel")
args, _ = parser.parse_known_args()

answer = {"plain": urllib.request.urlopen(args.url, timeout=30).read().decode()}
proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
host, port = args.tunnel.rsplit(":", 1)
conn = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=30)
conn.set_tunnel(host, int(port))
conn.request("GET", "/tunnel")
answer["tunnel"] = conn.getresponse().read().decode()
with open(os.path.join(os.environ["SM_MODEL_DIR"], "outside.json"), "w") as f:
    json.dump(answer, f)
