"""Runtime settings from ``LAUNCHBAY_*`` environment variables (documented in :mod:`.train`)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from launchbay.runtime.errors import TrainingSetupError
from launchbay.runtime.names import ENV

__all__ = [
    "RuntimeSettings",
    "DEFAULT_GRACE_SECONDS",
    "DEFAULT_STARTUP_TIMEOUT",
    "GRACE_ENV",
    "GRACE_ACCEPTED",
    "MAX_GRACE_SECONDS",
    "parse_grace_seconds",
]

DEFAULT_GRACE_SECONDS = 10.0
DEFAULT_STARTUP_TIMEOUT = 900.0
#: The variable that sets the grace period between SIGTERM and SIGKILL (client and runtime).
GRACE_ENV = ENV.GRACE_SECONDS
#: The longest grace period accepted: an hour (SageMaker itself gives 120 seconds).
MAX_GRACE_SECONDS = 3600.0
GRACE_ACCEPTED = (
    f"a finite number of seconds from 0 to {MAX_GRACE_SECONDS:g} (the time between SIGTERM "
    f"and SIGKILL when a job is stopped; default {DEFAULT_GRACE_SECONDS:g})"
)


def parse_grace_seconds(value: object, argument: str = GRACE_ENV) -> float:
    """The grace period ``value`` (a number, or its text) in seconds; the one rule for it.

    The client (``grace_seconds=``, ``LAUNCHBAY_GRACE_SECONDS`` from the caller or
    the request's Environment) and every host's runtime read the grace period
    with this function, so both refuse the same values: anything but a finite
    number from 0 to :data:`MAX_GRACE_SECONDS` (``nan`` would make a stop wait
    forever, ``inf`` overflows a timer, a negative number is a typo).

    Raises:
        ValueError: naming ``argument``, the value and what is accepted.
    """
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None:
        why = "it is not a number"
    elif not math.isfinite(number):
        why = "it is not a finite number"
    elif number < 0:
        why = "it is negative"
    elif number > MAX_GRACE_SECONDS:
        why = f"it is more than {MAX_GRACE_SECONDS:g} seconds"
    else:
        return number
    raise ValueError(f"Invalid {argument}={value!r}: {why}. Accepted: {GRACE_ACCEPTED}.")


def _number(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = environ.get(name)
    if raw in (None, ""):
        return default
    try:
        value = float(raw)
    except ValueError:
        raise TrainingSetupError(
            f"Invalid {name}={raw!r}. Accepted: a number of seconds."
        ) from None
    if not math.isfinite(value) or value < 0:
        raise TrainingSetupError(
            f"Invalid {name}={raw!r}. Accepted: a finite number of seconds >= 0."
        )
    return value


def _grace(environ: Mapping[str, str]) -> float:
    raw = environ.get(GRACE_ENV)
    if raw in (None, ""):
        return DEFAULT_GRACE_SECONDS
    try:
        return parse_grace_seconds(raw)
    except ValueError as exc:
        raise TrainingSetupError(str(exc)) from None


@dataclass(frozen=True)
class RuntimeSettings:
    """What the environment tells the runtime beyond the SageMaker contract."""

    local_process: bool = False
    shared_dir: str | None = None
    host_addresses: dict[str, str] = field(default_factory=dict)
    master_port: int | None = None
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    install_requirements: str | None = None
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    standins: bool = False
    #: A hosts file naming ``algo-N`` (read by :mod:`launchbay.runtime._hostnames`).
    hosts_file: str | None = None
    #: Each host is a Ray actor on its own node (one torchrun per host, as on SageMaker;
    #: the nodes of a one-machine test cluster share a network, so ports are per host).
    ray: bool = False

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> RuntimeSettings:
        """Parse ``LAUNCHBAY_*`` variables; a malformed value is a :class:`TrainingSetupError`."""
        environ = os.environ if environ is None else environ
        addresses: dict[str, str] = {}
        raw_addresses = environ.get(ENV.HOST_ADDRESSES)
        if raw_addresses:
            try:
                addresses = {str(k): str(v) for k, v in json.loads(raw_addresses).items()}
            except (ValueError, AttributeError):
                raise TrainingSetupError(
                    f"Invalid LAUNCHBAY_HOST_ADDRESSES={raw_addresses!r}. Accepted: a JSON object "
                    'mapping host names to addresses, e.g. {"algo-1": "127.0.0.1"}.'
                ) from None
        port = environ.get(ENV.MASTER_PORT)
        if port not in (None, "") and not (port.isdigit() and 0 < int(port) < 65536):
            raise TrainingSetupError(
                f"Invalid LAUNCHBAY_MASTER_PORT={port!r}. Accepted: a TCP port number (1-65535)."
            )
        return cls(
            local_process=environ.get(ENV.LOCAL_PROCESS) == "1",
            shared_dir=environ.get(ENV.SHARED_DIR) or None,
            host_addresses=addresses,
            master_port=int(port) if port else None,
            grace_seconds=_grace(environ),
            install_requirements=environ.get(ENV.INSTALL_REQUIREMENTS),
            startup_timeout=_number(environ, ENV.STARTUP_TIMEOUT, DEFAULT_STARTUP_TIMEOUT),
            standins=environ.get(ENV.STANDINS) == "1",
            hosts_file=environ.get(ENV.HOSTS_FILE) or None,
            ray=environ.get(ENV.RAY) == "1",
        )

    def to_environ(self) -> dict[str, str]:
        """The variables that make :meth:`from_environ` read these settings back.

        What a local backend puts in each host's environment; a setting left at
        its default is not written, so a value the caller's own environment
        carries (``LAUNCHBAY_STARTUP_TIMEOUT``, ``LAUNCHBAY_INSTALL_REQUIREMENTS``)
        passes through untouched.
        """
        env = {ENV.GRACE_SECONDS: f"{parse_grace_seconds(self.grace_seconds):g}"}
        if self.local_process:
            env[ENV.LOCAL_PROCESS] = "1"
        if self.shared_dir:
            env[ENV.SHARED_DIR] = self.shared_dir
        if self.host_addresses:
            env[ENV.HOST_ADDRESSES] = json.dumps(self.host_addresses)
        if self.master_port is not None:
            env[ENV.MASTER_PORT] = str(self.master_port)
        if self.install_requirements is not None:
            env[ENV.INSTALL_REQUIREMENTS] = self.install_requirements
        if self.startup_timeout != DEFAULT_STARTUP_TIMEOUT:
            env[ENV.STARTUP_TIMEOUT] = f"{self.startup_timeout:g}"
        if self.standins:
            env[ENV.STANDINS] = "1"
        if self.hosts_file:
            env[ENV.HOSTS_FILE] = self.hosts_file
        if self.ray:
            env[ENV.RAY] = "1"
        return env

    def address(self, host: str) -> str:
        """The address to reach ``host`` at (``LAUNCHBAY_HOST_ADDRESSES``, else the name)."""
        return self.host_addresses.get(host, host)
