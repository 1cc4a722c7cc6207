"""What the runtime lends the client: the parts both sides of a local job must share.

The local backends watch hosts whose runtime is this package: they read the rank
records the ranks write, name a process's exit as the runtime names a rank's, open
what a job wrote without following its links, and write the hosts file the
runtime makes its ``/etc/hosts``. Those helpers live in the runtime's private
modules, next to the code that uses them inside a host; this module is their one
public face, so the client never imports a private module of the runtime.

Standard library only, as the whole runtime.
"""

from __future__ import annotations

from launchbay.runtime._confine import (
    TreeEntry,
    open_regular,
    reached_without_links,
    read_beneath,
    rmtree_beneath,
    scan_tree,
    unlink_beneath,
)
from launchbay.runtime._hostnames import namespace_problem, write_hosts_file
from launchbay.runtime._linux import libc, readable
from launchbay.runtime._netns import (
    GATEWAY,
    HOLDER_ENV,
    MAX_HOSTS,
    host_address,
    proxy_environment,
)
from launchbay.runtime._procs import descendants, describe_exit, fit_lines, is_alive
from launchbay.runtime._records import read_records
from launchbay.runtime._relay import CLIENT_HOST

__all__ = [
    "CLIENT_HOST",
    "GATEWAY",
    "HOLDER_ENV",
    "MAX_HOSTS",
    "TreeEntry",
    "describe_exit",
    "descendants",
    "fit_lines",
    "host_address",
    "is_alive",
    "libc",
    "namespace_problem",
    "open_regular",
    "proxy_environment",
    "reached_without_links",
    "read_beneath",
    "read_records",
    "readable",
    "rmtree_beneath",
    "scan_tree",
    "unlink_beneath",
    "write_hosts_file",
]
