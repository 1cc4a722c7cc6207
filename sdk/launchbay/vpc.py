"""A training VPC from the CloudFormation template installed with launchbay.

Distributed training (MPI, NCCL, torchrun) needs every node to reach every other
node on all ports; private jobs need S3 without the internet. One call makes
both::

    from launchbay import vpc
    from launchbay.pytorch import PyTorch

    config = vpc.provision()                 # creates or reuses "launchbay-vpc"
    est = PyTorch(..., vpc_config=config)    # the request's VpcConfig carries it

The template (``infra/vpc.yaml`` in the repository, ``launchbay.infra`` when
installed) makes a VPC, two private subnets in two availability zones, a route
table with an S3 gateway endpoint, and a security group whose only ingress is
all traffic from itself; interface endpoints (CloudWatch Logs, ECR, STS,
SageMaker API) are optional. See docs/vpc.md.

:func:`provision` creates the stack, or reuses it (updating it when the
parameters or the template changed), waiting with CloudFormation's waiters and
printing the stack's events while it waits. A failure raises
:class:`~launchbay.errors.ProvisioningError` quoting the first failed
resource's reason; a stack that does not finish within ``timeout`` seconds
raises it too, naming the stack, its state and how to wait longer.
:func:`describe` reads a stack's outputs and :func:`teardown` deletes it.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import ipaddress
import logging
import math
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO, TypedDict

from launchbay.display import Display, progress_enabled
from launchbay.errors import ConfigurationError, ProvisioningError
from launchbay.session import Session

__all__ = [
    "DEFAULT_STACK_NAME",
    "DEFAULT_TIMEOUT",
    "VpcConfig",
    "describe",
    "provision",
    "teardown",
    "template_body",
]

logger = logging.getLogger("launchbay.vpc")

#: The stack :func:`provision` makes when no name is given.
DEFAULT_STACK_NAME = "launchbay-vpc"
#: Seconds to wait for CloudFormation (interface endpoints can take several minutes).
DEFAULT_TIMEOUT = 1800.0
#: Seconds between two looks at the stack while waiting.
DEFAULT_POLL_INTERVAL = 5.0
#: The outputs every launchbay VPC template must have.
OUTPUTS = ("VpcId", "Subnet1Id", "Subnet2Id", "SecurityGroupId")
TEMPLATE_PACKAGE = "launchbay.infra"
TEMPLATE_NAME = "vpc.yaml"

_READY = ("CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "IMPORT_COMPLETE")
_NO_UPDATES = "No updates are to be performed"


# --------------------------------------------------------------------------- VpcConfig


@dataclasses.dataclass(frozen=True)
class VpcConfig:
    """Where a training job runs: subnets and security groups (and the VPC they belong to).

    Estimators take it as ``vpc_config=``; :meth:`to_request_dict` is the
    CreateTrainingJob request's ``VpcConfig``. Lists are stored as tuples.

    Attributes:
        subnets: Subnet ids (at least one).
        security_group_ids: Security group ids (at least one).
        vpc_id: The VPC's id, when known (it is not part of the request).
    """

    subnets: Sequence[str]
    security_group_ids: Sequence[str]
    vpc_id: str | None = None

    def __post_init__(self) -> None:
        for name in ("subnets", "security_group_ids"):
            value = getattr(self, name)
            if (
                isinstance(value, (str, bytes))
                or not isinstance(value, Iterable)
                or not (items := tuple(value))
                or not all(isinstance(v, str) and v for v in items)
            ):
                raise ConfigurationError.invalid(
                    f"VpcConfig.{name}", value, "a non-empty list of non-empty strings"
                )
            object.__setattr__(self, name, items)
        if self.vpc_id is not None and (not isinstance(self.vpc_id, str) or not self.vpc_id):
            raise ConfigurationError.invalid("VpcConfig.vpc_id", self.vpc_id, "a VPC id or None")

    def to_request_dict(self) -> dict[str, list[str]]:
        """The request's ``VpcConfig``: ``{"Subnets": [...], "SecurityGroupIds": [...]}``."""
        return {"Subnets": list(self.subnets), "SecurityGroupIds": list(self.security_group_ids)}

    @classmethod
    def from_value(cls, value: Any, argument: str = "vpc_config") -> VpcConfig:
        """A :class:`VpcConfig`, or SDK v2's dict ``{"Subnets": [...], "SecurityGroupIds": [...]}``."""
        if isinstance(value, VpcConfig):
            return value
        if isinstance(value, Mapping) and set(value) <= {"Subnets", "SecurityGroupIds"}:
            if "Subnets" in value and "SecurityGroupIds" in value:
                try:
                    return cls(value["Subnets"], value["SecurityGroupIds"])
                except ConfigurationError:
                    pass
        raise ConfigurationError.invalid(
            argument,
            value,
            "a launchbay.vpc.VpcConfig or a dict {'Subnets': [...], 'SecurityGroupIds': [...]} "
            "with non-empty lists of ids",
        )


# --------------------------------------------------------------------------- template


def template_body() -> str:
    """The text of the VPC template installed with launchbay (``launchbay.infra/vpc.yaml``)."""
    return importlib.resources.files(TEMPLATE_PACKAGE).joinpath(TEMPLATE_NAME).read_text("utf-8")


def _subnet_cidrs(cidr: Any) -> dict[str, str]:
    """Template parameters for a VPC CIDR: the VPC and its first two /24 (or smaller) subnets."""
    accepted = "an IPv4 network from /16 to /27 such as '10.0.0.0/16'"
    try:
        network = ipaddress.ip_network(cidr, strict=True)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError.invalid("cidr", cidr, accepted, reason=str(exc)) from exc
    if network.version != 4 or not 16 <= network.prefixlen <= 27:
        raise ConfigurationError.invalid("cidr", cidr, accepted)
    prefix = max(24, network.prefixlen + 1)
    first, second = list(network.subnets(new_prefix=prefix))[:2]
    return {"VpcCidr": str(network), "Subnet1Cidr": str(first), "Subnet2Cidr": str(second)}


# --------------------------------------------------------------------------- AWS plumbing


class _Stack:
    """One stack in one region: the CloudFormation client and error translation."""

    def __init__(self, name: str, region: str | None, session: Any) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigurationError.invalid("stack_name", name, "a CloudFormation stack name")
        if session is None:
            session = Session(region_name=region)
        self.name = name
        self.region = session.boto_region_name
        new_client = getattr(session, "_new_client", None)  # a launchbay Session
        if new_client is not None:
            self.client = new_client("cloudformation")
        else:  # e.g. a sagemaker.Session: anything with a boto_session
            self.client = session.boto_session.client("cloudformation", region_name=self.region)
        import botocore.exceptions

        self.errors: tuple[type[BaseException], ...] = (
            botocore.exceptions.ClientError,
            botocore.exceptions.BotoCoreError,
        )

    @property
    def where(self) -> str:
        return f"CloudFormation stack {self.name!r} in {self.region}"

    def error(self, message: str, **fields: str) -> ProvisioningError:
        return ProvisioningError(message, stack_name=self.name, region=self.region, **fields)

    def call(self, what: str, method: str, **kwargs: Any) -> Any:
        try:
            return getattr(self.client, method)(**kwargs)
        except self.errors as exc:
            raise self.error(f"Could not {what} {self.where}: {_message(exc)}") from exc

    def find(self) -> dict[str, Any] | None:
        """The stack's description, or None when there is no such stack."""
        try:
            stacks = self.client.describe_stacks(StackName=self.name)["Stacks"]
        except self.errors as exc:
            if _code(exc) == "ValidationError" and "does not exist" in _message(exc):
                return None
            raise self.error(f"Could not read {self.where}: {_message(exc)}") from exc
        return stacks[0] if stacks else None

    def events(self, stack_id: str | None = None) -> list[dict[str, Any]]:
        """Every event of the stack, oldest first."""
        events: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"StackName": stack_id or self.name}
        while True:
            page = self.call("read the events of", "describe_stack_events", **kwargs)
            events.extend(page.get("StackEvents", []))
            token = page.get("NextToken")
            if not token:
                break
            kwargs["NextToken"] = token
        events.reverse()
        return events


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _message(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Message") or exc)


def _current_operation(events: list[dict[str, Any]], stack_name: str) -> list[dict[str, Any]]:
    """The events (oldest first) since the stack's last user-initiated operation began."""
    start = 0
    for index, event in enumerate(events):
        if event.get("LogicalResourceId") == stack_name and event.get(
            "ResourceStatus", ""
        ).endswith("_IN_PROGRESS"):
            if event.get("ResourceStatusReason") == "User Initiated":
                start = index
    return events[start:]


def _first_failure(events: list[dict[str, Any]], stack_name: str) -> dict[str, Any] | None:
    """The oldest ``*_FAILED`` event of the current operation that has a reason."""
    for event in _current_operation(events, stack_name):
        if event.get("ResourceStatus", "").endswith("_FAILED") and event.get(
            "ResourceStatusReason"
        ):
            return event
    return None


# --------------------------------------------------------------------------- progress


class _Events:
    """Prints a stack's new events while CloudFormation works.

    Through :class:`launchbay.display.Display`: in a terminal or a notebook a status
    line (state and seconds waited) is redrawn below the events and erased at the
    end; elsewhere (when forced on) each event is one plain line. Every event is
    also logged at DEBUG on ``launchbay.vpc``.
    """

    def __init__(self, stack: _Stack, progress: bool | TextIO | None) -> None:
        self.stack = stack
        stream: TextIO = sys.stderr
        if progress is not None and not isinstance(progress, bool):
            stream, progress = progress, True
        enabled = progress_enabled(progress, stream)
        self.display = Display(stream, None if enabled else "quiet", transient=True)
        self.enabled = enabled
        self.seen: set[str] = set()
        self.started = time.monotonic()

    def prime(self, stack_id: str | None) -> None:
        """Mark the events that exist now as seen (only new ones are printed)."""
        if stack_id:
            self.seen.update(e["EventId"] for e in self.stack.events(stack_id))

    def poll(self, stack_id: str, status: str = "") -> None:
        """Print the events not seen yet, then (when live) the status line."""
        try:
            events = self.stack.events(stack_id)
        except ProvisioningError as exc:  # progress must never break the wait
            logger.debug("Could not read stack events: %s", exc)
            events = []
        for event in events:
            if event["EventId"] in self.seen:
                continue
            self.seen.add(event["EventId"])
            line = _event_line(event)
            logger.debug("%s", line)
            self.display.print(line)
        if status:
            elapsed = time.monotonic() - self.started
            self.display.update(f"  {self.stack.name}: {status} ({elapsed:.0f} s)")

    def close(self) -> None:
        self.display.close()


def _event_line(event: Mapping[str, Any]) -> str:
    stamp = event.get("Timestamp")
    clock = stamp.strftime("%H:%M:%S") if stamp is not None and hasattr(stamp, "strftime") else ""
    reason = event.get("ResourceStatusReason") or ""
    text = (
        f"{clock} {event.get('LogicalResourceId', ''):<30} "
        f"{event.get('ResourceStatus', ''):<20} {event.get('ResourceType', '')}"
    )
    return f"{text}  {reason}".rstrip() if reason else text.rstrip()


# --------------------------------------------------------------------------- waiting


class _WaitArgs(TypedDict):
    """The keyword arguments of :func:`_wait` that one ``ensure_vpc`` call passes to each wait."""

    timeout: float
    poll_interval: float
    events: _Events


def _wait(
    stack: _Stack,
    stack_id: str,
    waiter_name: str,
    *,
    timeout: float,
    poll_interval: float,
    events: _Events,
) -> None:
    """Wait with the CloudFormation waiter ``waiter_name``; raise ProvisioningError on failure.

    The waiter gets ``WaiterConfig`` from ``timeout`` and ``poll_interval``. While
    progress is shown, it runs one attempt at a time so new events are printed
    between attempts.
    """
    import botocore.exceptions

    waiter = stack.client.get_waiter(waiter_name)
    total = max(1, math.ceil(timeout / poll_interval))
    deadline = time.monotonic() + timeout
    per_round = 1 if events.enabled else total
    status = ""
    try:
        while True:
            events.poll(stack_id, status)
            try:
                waiter.wait(
                    StackName=stack_id,
                    WaiterConfig={"Delay": poll_interval, "MaxAttempts": per_round},
                )
            except botocore.exceptions.WaiterError as exc:
                stacks = (exc.last_response or {}).get("Stacks") or [{}]
                status = str(stacks[0].get("StackStatus", ""))
                if "Max attempts exceeded" not in str(exc):
                    events.poll(stack_id)
                    raise _failure(stack, stack_id, status, exc) from exc
                if per_round != 1 or time.monotonic() + poll_interval >= deadline:
                    events.poll(stack_id)
                    raise stack.error(
                        f"{stack.where} is still {status or 'not ready'} after {timeout:g} s. "
                        "CloudFormation may still finish it: wait longer with "
                        "provision(..., timeout=SECONDS) or 'launchbay vpc up --timeout SECONDS', "
                        "or look at the stack's events in the CloudFormation console.",
                        status=status,
                    ) from exc
                if per_round == 1:
                    time.sleep(poll_interval)
                continue
            events.poll(stack_id)
            return
    finally:
        events.close()


def _failure(stack: _Stack, stack_id: str, status: str, exc: BaseException) -> ProvisioningError:
    try:
        first = _first_failure(stack.events(stack_id), stack.name)
    except ProvisioningError:
        first = None
    if first is not None:
        reason = str(first["ResourceStatusReason"])
        culprit = f"{first.get('LogicalResourceId')} ({first.get('ResourceType', '')}): {reason}"
    else:
        reason = _message(exc)
        culprit = reason
    return stack.error(
        f"{stack.where} failed ({status or 'unknown state'}). First failure: {culprit}",
        status=status,
        reason=reason,
    )


# --------------------------------------------------------------------------- the API


def _config_from(stack: _Stack, description: Mapping[str, Any]) -> VpcConfig:
    status = description.get("StackStatus", "")
    if status not in _READY:
        raise stack.error(
            f"{stack.where} is {status}, not ready to use"
            + (
                f": {description['StackStatusReason']}"
                if description.get("StackStatusReason")
                else ""
            )
            + ". Run 'launchbay vpc up' to finish or repair it, or 'launchbay vpc down' "
            "to delete it.",
            status=status,
        )
    outputs = {o["OutputKey"]: o.get("OutputValue") for o in description.get("Outputs") or []}
    missing = [name for name in OUTPUTS if not outputs.get(name)]
    if missing:
        raise stack.error(
            f"{stack.where} has no output {', '.join(missing)}: it was not made from "
            f"launchbay's VPC template (outputs needed: {', '.join(OUTPUTS)}).",
            status=status,
        )
    return VpcConfig(
        subnets=(outputs["Subnet1Id"], outputs["Subnet2Id"]),
        security_group_ids=(outputs["SecurityGroupId"],),
        vpc_id=outputs["VpcId"],
    )


def describe(stack_name: str, region: str | None = None, *, session: Any = None) -> VpcConfig:
    """The :class:`VpcConfig` of an existing stack made by :func:`provision`.

    Args:
        stack_name: The CloudFormation stack's name.
        region: Its region (default: the session's, e.g. ``AWS_DEFAULT_REGION``).
        session: A :class:`launchbay.Session` to use instead of a new one.

    Raises:
        ProvisioningError: there is no such stack, it is not complete, or it lacks
            the outputs ``VpcId``, ``Subnet1Id``, ``Subnet2Id``, ``SecurityGroupId``.
    """
    stack = _Stack(stack_name, region, session)
    description = stack.find()
    if description is None:
        raise stack.error(
            f"There is no {stack.where}. Create it with 'launchbay vpc up --stack "
            f"{stack_name} --region {stack.region}' or launchbay.vpc.provision("
            f"{stack_name!r}, {stack.region!r})."
        )
    return _config_from(stack, description)


def provision(
    stack_name: str = DEFAULT_STACK_NAME,
    region: str | None = None,
    cidr: str | None = None,
    interface_endpoints: bool | None = None,
    *,
    session: Any = None,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool | TextIO | None = None,
    poll_interval: float = DEFAULT_POLL_INTERVAL,
    parameters: Mapping[str, str] | None = None,
    template: str | os.PathLike[str] | None = None,
) -> VpcConfig:
    """Create the VPC stack, or reuse it; returns its :class:`VpcConfig`.

    An existing stack is updated only when the template or a parameter changed
    (otherwise nothing is called but reads). A stack still in progress is waited
    for.

    Args:
        stack_name: The CloudFormation stack's name.
        region: The region (default: the session's, e.g. ``AWS_DEFAULT_REGION``).
        cidr: The VPC's IPv4 CIDR (/16 to /27); the subnets are its first two /24s
            (or halves, for smaller networks). None: 10.0.0.0/16 for a new stack,
            the current one for an existing stack.
        interface_endpoints: Add interface endpoints for CloudWatch Logs, ECR api
            and dkr, STS and the SageMaker API (billed hourly, see docs/vpc.md).
            None: off for a new stack, unchanged for an existing one.
        session: A :class:`launchbay.Session` to use instead of a new one.
        timeout: Seconds to wait for CloudFormation before giving up.
        progress: Print the stack's events while waiting: True, False, a stream,
            or None (when stderr is a terminal or a notebook).
        poll_interval: Seconds between two looks at the stack.
        parameters: More template parameters (they win over ``cidr``).
        template: Path of another template with the same outputs (default: the
            one installed with launchbay).

    Raises:
        ProvisioningError: CloudFormation refused or failed (the message quotes
            the first failed resource's reason), or ``timeout`` passed.
        ConfigurationError: an invalid argument.
    """
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise ConfigurationError.invalid("timeout", timeout, "a number of seconds above 0")
    if not isinstance(poll_interval, (int, float)) or poll_interval <= 0:
        raise ConfigurationError.invalid(
            "poll_interval", poll_interval, "a number of seconds above 0"
        )
    wanted: dict[str, str] = {}
    if cidr is not None:
        wanted.update(_subnet_cidrs(cidr))
    if interface_endpoints is not None:
        if not isinstance(interface_endpoints, bool):
            raise ConfigurationError.invalid(
                "interface_endpoints", interface_endpoints, "True, False or None"
            )
        wanted["InterfaceEndpoints"] = "true" if interface_endpoints else "false"
    for key, value in (parameters or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ConfigurationError.invalid("parameters", parameters, "a dict of str to str")
        wanted[key] = value
    if template is None:
        body = template_body()
    else:
        try:
            with open(os.fspath(template), encoding="utf-8") as f:
                body = f.read()
        except OSError as exc:
            raise ConfigurationError.invalid(
                "template", template, "a readable CloudFormation template file", reason=str(exc)
            ) from exc

    stack = _Stack(stack_name, region, session)
    events = _Events(stack, progress)
    wait: _WaitArgs = {"timeout": timeout, "poll_interval": poll_interval, "events": events}
    description = stack.find()

    if description is not None and description["StackStatus"] == "DELETE_IN_PROGRESS":
        logger.info("Waiting for the deletion of %s to finish", stack.where)
        _wait(stack, description["StackId"], "stack_delete_complete", **wait)
        description = None
    if description is not None and description["StackStatus"].endswith("_IN_PROGRESS"):
        status = description["StackStatus"]
        logger.info("%s is %s: waiting for it", stack.where, status)
        waiter = "stack_update_complete" if status.startswith("UPDATE") else "stack_create_complete"
        _wait(stack, description["StackId"], waiter, **wait)
        description = stack.find()
    if description is None:
        return _create(stack, body, wanted, wait)
    status = description["StackStatus"]
    if status not in _READY:
        first = _first_failure(stack.events(description["StackId"]), stack.name)
        why = f" First failure: {first['ResourceStatusReason']}" if first else ""
        raise stack.error(
            f"{stack.where} is {status} and cannot be reused.{why} Delete it with "
            f"'launchbay vpc down --stack {stack.name} --region {stack.region}' and try again.",
            status=status,
            reason=str(first["ResourceStatusReason"]) if first else "",
        )
    _update_if_changed(stack, description, body, wanted, wait)
    return _config_from(stack, stack.find() or description)


def _create(stack: _Stack, body: str, wanted: Mapping[str, str], wait: _WaitArgs) -> VpcConfig:
    logger.info("Creating %s", stack.where)
    created = stack.call(
        "create",
        "create_stack",
        StackName=stack.name,
        TemplateBody=body,
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in wanted.items()],
        Tags=[{"Key": "launchbay:stack", "Value": "vpc"}],
    )
    _wait(stack, created["StackId"], "stack_create_complete", **wait)
    description = stack.find()
    if description is None:  # deleted meanwhile
        raise stack.error(f"{stack.where} disappeared while it was being created.")
    return _config_from(stack, description)


def _update_if_changed(
    stack: _Stack,
    description: Mapping[str, Any],
    body: str,
    wanted: Mapping[str, str],
    wait: _WaitArgs,
) -> None:
    current = {
        p["ParameterKey"]: p.get("ParameterValue", "") for p in description.get("Parameters") or []
    }
    changed = {k: v for k, v in wanted.items() if current.get(k) != v}
    deployed = stack.call("read the template of", "get_template", StackName=stack.name)
    template_changed = _normalize(deployed.get("TemplateBody")) != _normalize(body)
    if not changed and not template_changed:
        logger.info("%s is up to date", stack.where)
        return
    logger.info(
        "Updating %s (%s)",
        stack.where,
        ", ".join(f"{k}={v}" for k, v in changed.items()) or "new template",
    )
    events = wait["events"]
    events.prime(description["StackId"])
    keys = set(current) | set(wanted)
    params: list[dict[str, Any]] = []
    for key in sorted(keys):
        value = wanted.get(key, current.get(key))
        if value is None or (key not in wanted and value == "****"):  # NoEcho: keep as is
            params.append({"ParameterKey": key, "UsePreviousValue": True})
        else:
            params.append({"ParameterKey": key, "ParameterValue": value})
    try:
        stack.client.update_stack(StackName=stack.name, TemplateBody=body, Parameters=params)
    except stack.errors as exc:
        if _NO_UPDATES in _message(exc):
            logger.info("%s is up to date", stack.where)
            return
        raise stack.error(f"Could not update {stack.where}: {_message(exc)}") from exc
    _wait(stack, description["StackId"], "stack_update_complete", **wait)


def _normalize(template: Any) -> Any:
    """A template as data, so formatting differences do not count as changes."""
    if isinstance(template, str):
        import yaml

        try:
            return yaml.load(template, Loader=_cfn_loader())  # a SafeLoader subclass
        except yaml.YAMLError:
            return template
    return template


@functools.cache
def _cfn_loader() -> type:
    """A SafeLoader that reads CloudFormation's short tags (!Ref, !Sub ...) as plain data."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def construct(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]  # not scalar nor sequence: a MappingNode
        return {suffix: value}

    Loader.add_multi_constructor("!", construct)
    return Loader


def teardown(
    stack_name: str = DEFAULT_STACK_NAME,
    region: str | None = None,
    *,
    session: Any = None,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool | TextIO | None = None,
    poll_interval: float = DEFAULT_POLL_INTERVAL,
) -> bool:
    """Delete the stack and wait until it is gone.

    Returns True when a stack was deleted, False when there was none (not an error).

    Raises:
        ProvisioningError: CloudFormation could not delete a resource (the message
            quotes its reason), or ``timeout`` passed.
    """
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise ConfigurationError.invalid("timeout", timeout, "a number of seconds above 0")
    stack = _Stack(stack_name, region, session)
    description = stack.find()
    if description is None:
        logger.info("There is no %s: nothing to delete", stack.where)
        return False
    stack_id = description["StackId"]
    events = _Events(stack, progress)
    events.prime(stack_id)
    logger.info("Deleting %s", stack.where)
    stack.call("delete", "delete_stack", StackName=stack_id)
    _wait(
        stack,
        stack_id,
        "stack_delete_complete",
        timeout=timeout,
        poll_interval=poll_interval,
        events=events,
    )
    return True
