"""Each ``local_process`` host's own network: a network namespace per host on a job bridge.

On SageMaker, and in Docker mode, every host is a machine of its own: its own
loopback, its own address for ``algo-N``, its own host name. Scripts rely on it:
each host binds ``127.0.0.1:29500`` for a group of its own, or puts every worker
at ``algo-N:7777`` in ``TF_CONFIG``. Where the kernel allows (root, or unprivileged
user namespaces), a ``local_process`` job gets the same:

* **the job's switch** (:func:`main`, started by the client for the job): a process
  in a new user and network namespace holding a bridge, ``lb0``, at
  :data:`GATEWAY`. Its parent stays in the machine's network and relays HTTP and
  HTTPS for the hosts (``HTTP(S)_PROXY`` = :data:`PROXY_URL`, :mod:`._relay`): pip
  and S3 reach the outside, and the client's own loopback, through the client's network;
* **each host** (:func:`join`, in the host's runtime before anything starts):
  joins the switch's user namespace, makes network, mount and UTS namespaces of
  its own, adds a veth pair to the bridge, takes ``10.213.0.<N>`` for ``algo-N``
  (the job hosts file says so), sets its host name to ``algo-N``, binds the hosts
  file on ``/etc/hosts`` and its tree on ``/opt/ml``;
* **ranks that another host's launcher starts** (one torchrun for every host):
  :func:`enter_host` moves the rank into its own host's namespaces.

Everything is made with the kernel's interfaces (``unshare``, ``setns`` and
rtnetlink, through ctypes and sockets): no ``ip`` command, no helper binary. The
namespaces end with the job's last process. Standard library only: this runs
inside the host.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import socket
import struct
import sys
import threading
from collections.abc import Mapping

from launchbay.runtime._linux import (
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWUSER,
    CLONE_NEWUTS,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_RDONLY,
    MS_REC,
    check,
    libc,
    setns,
    write_proc_file,
)
from launchbay.runtime._relay import LOOPBACK_NAMES, log_to_hosts, serve
from launchbay.runtime.names import ENV

__all__ = [
    "GATEWAY",
    "HOLDER_ENV",
    "PROXY_URL",
    "enter_host",
    "host_address",
    "join",
    "main",
    "proxy_environment",
]

SUBNET = "10.213.0."
PREFIX = 24
GATEWAY = SUBNET + "254"
PROXY_PORT = 3128
PROXY_URL = f"http://{GATEWAY}:{PROXY_PORT}"
BRIDGE = "lb0"
#: The most hosts a job network numbers (``10.213.0.1`` .. ``.250``).
MAX_HOSTS = 250
#: The pid of the job's switch process (set by the client for each host).
HOLDER_ENV = ENV.JOB_NETWORK
#: The pid of a host's runtime in its own namespaces (published to its ranks).
HOST_PID_ENV = ENV.HOST_NS_PID

_RTM_NEWLINK = 16
_RTM_NEWADDR = 20
_NLM_F_REQUEST = 1
_NLM_F_ACK = 4
_NLM_F_EXCL = 0x200
_NLM_F_CREATE = 0x400
_NLMSG_ERROR = 2
_IFLA_IFNAME = 3
_IFLA_MASTER = 10
_IFLA_LINKINFO = 18
_IFLA_NET_NS_FD = 28
_IFLA_INFO_KIND = 1
_IFLA_INFO_DATA = 2
_VETH_INFO_PEER = 1
_IFA_ADDRESS = 1
_IFA_LOCAL = 2
_IFF_UP = 1

# Capabilities a host keeps, as ambient ones, in the job's user namespace only, so
# that ranks its launcher starts for other hosts can enter those hosts' namespaces.
_CAP_NET_ADMIN = 12
_CAP_SYS_CHROOT = 18
_CAP_SYS_ADMIN = 21
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_RAISE = 2


def host_address(index: int) -> str:
    """The address of the job's ``index``-th host (0-based): ``algo-1`` is ``10.213.0.1``."""
    return f"{SUBNET}{index + 1}"


def proxy_environment(hosts: list[str]) -> dict[str, str]:
    """The proxy variables a host of a job network gets: the outside through the relay.

    Its own loopback, its own job's hosts and the bridge are reached directly; the
    client machine is :data:`._relay.CLIENT_HOST`, through the relay.
    """
    no_proxy = ",".join(
        [*LOOPBACK_NAMES, *hosts, *(host_address(i) for i in range(len(hosts))), GATEWAY]
    )
    env = {}
    for name in ("HTTP_PROXY", "HTTPS_PROXY"):
        env[name] = env[name.lower()] = PROXY_URL
    env["NO_PROXY"] = env["no_proxy"] = no_proxy
    return env


# --------------------------------------------------------------------------- kernel calls


def _attr(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("HH", length, kind) + payload + b"\0" * (-length % 4)


def _ifinfo(index: int = 0, up: bool = False) -> bytes:
    flags = _IFF_UP if up else 0
    return struct.pack("BxHiII", socket.AF_UNSPEC, 0, index, flags, _IFF_UP if up else 0)


class _Netlink:
    """An rtnetlink socket in the network namespace this thread is in when it is made."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
        self.sock.bind((0, 0))
        self.seq = 0

    def close(self) -> None:
        self.sock.close()

    def request(self, kind: int, body: bytes, flags: int = 0) -> None:
        self.seq += 1
        header = struct.pack(
            "IHHII", 16 + len(body), kind, _NLM_F_REQUEST | _NLM_F_ACK | flags, self.seq, 0
        )
        self.sock.send(header + body)
        while True:
            data = self.sock.recv(65536)
            offset = 0
            while offset + 16 <= len(data):
                length, mtype, _, seq, _ = struct.unpack_from("IHHII", data, offset)
                if mtype == _NLMSG_ERROR and seq == self.seq:
                    (error,) = struct.unpack_from("i", data, offset + 16)
                    if error:
                        raise OSError(-error, f"rtnetlink: {os.strerror(-error)}")
                    return
                offset += max((length + 3) & ~3, 16)

    def add_link(self, name: str, kind: str, data: bytes = b"") -> None:
        info = _attr(_IFLA_INFO_KIND, kind.encode())
        if data:
            info += _attr(_IFLA_INFO_DATA, data)
        body = _ifinfo() + _attr(_IFLA_IFNAME, name.encode() + b"\0") + _attr(_IFLA_LINKINFO, info)
        self.request(_RTM_NEWLINK, body, _NLM_F_CREATE | _NLM_F_EXCL)

    def add_veth(self, name: str, peer: str, peer_netns_fd: int) -> None:
        peer_msg = (
            _ifinfo()
            + _attr(_IFLA_IFNAME, peer.encode() + b"\0")
            + _attr(_IFLA_NET_NS_FD, struct.pack("I", peer_netns_fd))
        )
        self.add_link(name, "veth", _attr(_VETH_INFO_PEER, peer_msg))

    def set_up(self, name: str, master: str | None = None) -> None:
        body = _ifinfo(socket.if_nametoindex(name), up=True)
        if master is not None:
            body += _attr(_IFLA_MASTER, struct.pack("I", socket.if_nametoindex(master)))
        self.request(_RTM_NEWLINK, body)

    def add_address(self, name: str, address: str, prefix: int) -> None:
        packed = socket.inet_aton(address)
        body = struct.pack("BBBBI", socket.AF_INET, prefix, 0, 0, socket.if_nametoindex(name))
        body += _attr(_IFA_LOCAL, packed) + _attr(_IFA_ADDRESS, packed)
        self.request(_RTM_NEWADDR, body, _NLM_F_CREATE | _NLM_F_EXCL)


def _keep_ambient_capabilities(caps: tuple[int, ...]) -> None:
    """Keep ``caps`` across exec for this process's children (in its own user namespace)."""
    lib = libc()

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [
            ("effective", ctypes.c_uint32),
            ("permitted", ctypes.c_uint32),
            ("inheritable", ctypes.c_uint32),
        ]

    header = Header(0x20080522, 0)
    data = (Data * 2)()
    check(lib.capget(ctypes.byref(header), data), "capget")
    for cap in caps:
        data[cap // 32].inheritable |= 1 << (cap % 32)
    check(lib.capset(ctypes.byref(header), data), "capset")
    for cap in caps:
        check(lib.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE, cap, 0, 0), "ambient")


# --------------------------------------------------------------------------- the switch


def _map_ids(pid: int) -> None:
    """Map ids in ``pid``'s new user namespace: all of them as root, else our own."""
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        write_proc_file(f"/proc/{pid}/uid_map", "0 0 4294967295")
        write_proc_file(f"/proc/{pid}/gid_map", "0 0 4294967295")
        return
    write_proc_file(f"/proc/{pid}/setgroups", "deny")
    write_proc_file(f"/proc/{pid}/uid_map", f"{uid} {uid} 1")
    write_proc_file(f"/proc/{pid}/gid_map", f"{gid} {gid} 1")


def _switch(control: socket.socket) -> None:
    """The child: the job's user and network namespaces with the bridge, then wait."""
    check(libc().unshare(CLONE_NEWUSER | CLONE_NEWNET), "unshare(CLONE_NEWUSER|CLONE_NEWNET)")
    control.send(b"m")  # the parent maps our ids
    if control.recv(1) != b"m":
        raise OSError("the id maps of the job's user namespace were not written")
    netlink = _Netlink()
    netlink.set_up("lo")
    netlink.add_link(BRIDGE, "bridge")
    netlink.add_address(BRIDGE, GATEWAY, PREFIX)
    netlink.set_up(BRIDGE)
    netlink.close()
    listener = socket.create_server((GATEWAY, PROXY_PORT), backlog=128)
    socket.send_fds(control, [b"ok"], [listener.fileno()])
    listener.close()
    control.recv(1)  # returns when the parent ends


def main(argv: list[str] | None = None) -> int:
    """``python -m launchbay.runtime._netns [--host NAME=LOG ...]``: the job's switch and
    relay, until stdin closes.

    ``--host`` names the job's hosts in order (the first is at ``host_address(0)``) with
    the log file each appends its output to: the relay's lines about a host go there.
    Prints ``ready <switch pid>``, or ``error <why>`` and exits 1.
    """
    parser = argparse.ArgumentParser(prog="python -m launchbay.runtime._netns")
    parser.add_argument("--host", action="append", default=[], metavar="NAME=LOG")
    hosts = [item.partition("=") for item in parser.parse_args(argv).host]
    addresses = {host_address(i): name for i, (name, _, _) in enumerate(hosts)}
    log_to_hosts({name: log for name, _, log in hosts if log})
    parent, child = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        parent.close()
        code = 0
        try:
            _switch(child)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                child.send(b"e" + str(exc).encode()[:500])
            code = 1
        os._exit(code)
    child.close()
    try:
        first = parent.recv(1)
        if first == b"m":
            _map_ids(pid)
            parent.send(b"m")
        message, fds, _, _ = socket.recv_fds(parent, 1000, 1)
        if not fds:
            raise OSError((first + message)[1:].decode(errors="replace") or "the switch ended")
    except OSError as exc:
        print(f"error {exc}", flush=True)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        return 1
    listener = socket.socket(fileno=fds[0])
    threading.Thread(target=serve, args=(listener, GATEWAY, addresses), daemon=True).start()
    print(f"ready {pid}", flush=True)
    with contextlib.suppress(OSError, KeyboardInterrupt):
        sys.stdin.buffer.read()  # the client's pipe: ends with the job, or with the client
    parent.close()
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    return 0


# --------------------------------------------------------------------------- the hosts


def join(holder: int, index: int, host: str) -> None:
    """Give this host its own network, mount and UTS namespaces on the job's bridge.

    ``holder`` is the switch's pid, ``index`` the host's (0-based). Call it while
    single-threaded, before anything is started. Raises OSError.
    """
    lib = libc()
    switch_net = os.open(f"/proc/{holder}/ns/net", os.O_RDONLY)
    try:
        setns(f"/proc/{holder}/ns/user", CLONE_NEWUSER, "the job's user namespace")
        check(lib.unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWUTS), "unshare")
        own_net = os.open("/proc/self/ns/net", os.O_RDONLY)
        try:
            own = _Netlink()
            check(lib.setns(switch_net, CLONE_NEWNET), "setns(the job's network)")
            switch = _Netlink()
            outer = f"h{index + 1}-{os.getpid()}"[:15]
            switch.add_veth(outer, "eth0", own_net)
            switch.set_up(outer, master=BRIDGE)
            switch.close()
            check(lib.setns(own_net, CLONE_NEWNET), "setns(this host's network)")
        finally:
            os.close(own_net)
        own.set_up("lo")
        own.add_address("eth0", host_address(index), PREFIX)
        own.set_up("eth0")
        own.close()
    finally:
        os.close(switch_net)
    name = host.encode()
    check(lib.sethostname(name, len(name)), "sethostname")
    if os.geteuid() != 0:
        _keep_ambient_capabilities((_CAP_SYS_ADMIN, _CAP_SYS_CHROOT, _CAP_NET_ADMIN))
    os.environ[HOST_PID_ENV] = str(os.getpid())


SHM = "/dev/shm"
SYSFS = "/sys"


def own_mounts() -> list[str]:
    """In this host's mount namespace (made by :func:`join`, already private): the host's own
    ``/dev/shm`` and ``/sys``, as a machine of its own has them. Returns what could not be made.

    * ``/dev/shm``: a tmpfs of the machine's ``/dev/shm`` size. Shared-memory files the
      host's processes make (Open MPI's ``vader_segment.algo-1.*``, torch's, POSIX
      semaphores) end with the host's last process, however the job ends.
    * ``/sys``: a sysfs of the host's network namespace, so ``/sys/class/net`` lists the
      host's interfaces (``lo``, ``eth0``), not the machine's; the mounts below the
      machine's ``/sys`` (cgroups) are bound back onto it.
    """
    problems = []
    for what, make in (("/dev/shm", _own_shm), ("/sys", _own_sysfs)):
        try:
            make()
        except OSError as exc:
            problems.append(f"{what}: {exc}")
    return problems


def _own_shm() -> None:
    if not os.path.isdir(SHM):
        return
    st = os.statvfs(SHM)
    size = max(st.f_frsize * st.f_blocks, 64 << 20)
    options = f"mode=1777,size={size}".encode()
    check(
        libc().mount(b"tmpfs", SHM.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options),
        f"mount tmpfs on {SHM}",
    )


def _mounts_below(path: str) -> tuple[list[str], bool]:
    """The topmost mount points below ``path`` (from mountinfo), and whether ``path`` is
    mounted read-only."""
    below: list[str] = []
    readonly = False
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            fields = line.split()
            if len(fields) < 6:
                continue
            point = fields[4].replace("\\040", " ")
            if point == path:
                readonly = "ro" in fields[5].split(",")
            elif point.startswith(path + "/"):
                below.append(point)
    top = sorted({p for p in below if not any(p.startswith(q + "/") for q in below)})
    return top, readonly


def _own_sysfs() -> None:
    lib = libc()
    below, readonly = _mounts_below(SYSFS)
    kept = {}
    for point in below:  # opened before the new sysfs covers them
        with contextlib.suppress(OSError):
            kept[point] = os.open(point, os.O_PATH | os.O_DIRECTORY)
    try:
        flags = MS_NOSUID | MS_NODEV | MS_NOEXEC | (MS_RDONLY if readonly else 0)
        check(lib.mount(b"sysfs", SYSFS.encode(), b"sysfs", flags, None), "mount sysfs")
        for point, fd in kept.items():
            if os.path.isdir(point):
                source = f"/proc/self/fd/{fd}".encode()
                check(
                    lib.mount(source, point.encode(), None, MS_BIND | MS_REC, None),
                    f"bind {point} back",
                )
    finally:
        for fd in kept.values():
            os.close(fd)


def enter_host(environ: Mapping[str, str]) -> bool:
    """A rank another host's launcher started enters its own host's namespaces.

    True when it did; False when the job has no network of its own or this
    process already is in that host's namespaces. Raises OSError.
    """
    pid = environ.get(HOST_PID_ENV)
    if not pid or not environ.get(HOLDER_ENV):
        return False
    if os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat("/proc/self/ns/net").st_ino:
        return False
    _join_host(pid, f"host pid {pid}")
    return True


def _join_host(pid: str, whose: str) -> None:
    """Enter the network, name and mount namespaces of the host whose runtime is ``pid``."""
    for kind, flag in (("net", CLONE_NEWNET), ("uts", CLONE_NEWUTS), ("mnt", CLONE_NEWNS)):
        setns(f"/proc/{pid}/ns/{kind}", flag, f"{kind} namespace of {whose}")


#: Where each host of a job network publishes its runtime's pid (``<shared dir>/netns/<host>``).
def host_pid_file(shared_dir: str, host: str) -> str:
    return os.path.join(shared_dir, "netns", host)


def publish(shared_dir: str, host: str) -> None:
    """Tell the other hosts' programs where this host's namespaces are (:func:`rsh`)."""
    path = host_pid_file(shared_dir, host)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(str(os.getpid()))
    os.replace(tmp, path)


#: What a job network's hosts get as Open MPI's remote shell (``plm_rsh_agent``).
def rsh_agent() -> str:
    return f"{sys.executable} -m launchbay.runtime._netns --rsh"


def rsh(argv: list[str]) -> int:
    """``--rsh <host> <command...>``: run a command on another host of the job, as ssh would.

    A script's own ``mpirun --host algo-1,algo-2`` starts its daemon on ``algo-2``
    through this: the command runs in ``algo-2``'s namespaces (network, name, mount),
    with ``/bin/sh -c`` and this environment. Needs a job network.
    """
    if len(argv) < 2:
        print(
            "usage: python -m launchbay.runtime._netns --rsh <host> <command...>", file=sys.stderr
        )
        return 255
    host, command = argv[0], argv[1:]
    host = host.rpartition("@")[2]
    shared = os.environ.get(ENV.SHARED_DIR, "")
    try:
        with open(host_pid_file(shared, host), encoding="utf-8") as f:
            pid = f.read().strip()
    except OSError as exc:
        print(f"launchbay rsh: {host} is not a host of this job: {exc}", file=sys.stderr)
        return 255
    if os.path.exists(f"/proc/{pid}/ns/net"):
        try:
            _join_host(pid, host)
        except OSError as exc:
            print(f"launchbay rsh: cannot reach {host} in this job: {exc}", file=sys.stderr)
            return 255
    # else: the host's own part of the job has ended (its namespaces with it); as before
    # job networks, the command runs here.
    with contextlib.suppress(OSError):
        os.chdir(os.environ.get("HOME") or "/")
    os.execv("/bin/sh", ["/bin/sh", "-c", " ".join(command)])
    return 255  # not reached


if __name__ == "__main__":
    if sys.argv[1:2] == ["--rsh"]:
        sys.exit(rsh(sys.argv[2:]))
    sys.exit(main())
