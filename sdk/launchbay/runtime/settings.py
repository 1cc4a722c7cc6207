"""Runtime settings from ``LAUNCHBAY_*`` environment variables (documented in :mod:`.train`)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from launchbay.runtime.errors import TrainingSetupError

__all__ = ["RuntimeSettings", "DEFAULT_GRACE_SECONDS", "DEFAULT_STARTUP_TIMEOUT"]

DEFAULT_GRACE_SECONDS = 10.0
DEFAULT_STARTUP_TIMEOUT = 900.0


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
    if value < 0:
        raise TrainingSetupError(f"Invalid {name}={raw!r}. Accepted: a number of seconds >= 0.")
    return value


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

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> RuntimeSettings:
        """Parse ``LAUNCHBAY_*`` variables; a malformed value is a :class:`TrainingSetupError`."""
        environ = os.environ if environ is None else environ
        addresses: dict[str, str] = {}
        raw_addresses = environ.get("LAUNCHBAY_HOST_ADDRESSES")
        if raw_addresses:
            try:
                addresses = {str(k): str(v) for k, v in json.loads(raw_addresses).items()}
            except (ValueError, AttributeError):
                raise TrainingSetupError(
                    f"Invalid LAUNCHBAY_HOST_ADDRESSES={raw_addresses!r}. Accepted: a JSON object "
                    'mapping host names to addresses, e.g. {"algo-1": "127.0.0.1"}.'
                ) from None
        port = environ.get("LAUNCHBAY_MASTER_PORT")
        if port not in (None, "") and not (port.isdigit() and 0 < int(port) < 65536):
            raise TrainingSetupError(
                f"Invalid LAUNCHBAY_MASTER_PORT={port!r}. Accepted: a TCP port number (1-65535)."
            )
        return cls(
            local_process=environ.get("LAUNCHBAY_LOCAL_PROCESS") == "1",
            shared_dir=environ.get("LAUNCHBAY_SHARED_DIR") or None,
            host_addresses=addresses,
            master_port=int(port) if port else None,
            grace_seconds=_number(environ, "LAUNCHBAY_GRACE_SECONDS", DEFAULT_GRACE_SECONDS),
            install_requirements=environ.get("LAUNCHBAY_INSTALL_REQUIREMENTS"),
            startup_timeout=_number(environ, "LAUNCHBAY_STARTUP_TIMEOUT", DEFAULT_STARTUP_TIMEOUT),
            standins=environ.get("LAUNCHBAY_STANDINS") == "1",
        )

    def address(self, host: str) -> str:
        """The address to reach ``host`` at (``LAUNCHBAY_HOST_ADDRESSES``, else the name)."""
        return self.host_addresses.get(host, host)
