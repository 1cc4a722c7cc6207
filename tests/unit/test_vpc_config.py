"""launchbay.vpc without AWS: VpcConfig, estimator arguments, parameters, failure reports."""

from __future__ import annotations

import datetime as dt
import io

import boto3
import pytest
from botocore.stub import Stubber

from factories import sagemaker_estimator
from launchbay import ConfigurationError, ProvisioningError, vpc
from launchbay.vpc import VpcConfig

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
STACK_ID = "arn:aws:cloudformation:us-west-2:123456789012:stack/net/1"


def pytorch(tmp_path, **overrides):
    (tmp_path / "train.py").write_text("print('hi')\n")
    return sagemaker_estimator(source_dir=tmp_path, **overrides)


def test_vpc_config_values():
    config = VpcConfig(["subnet-1", "subnet-2"], ["sg-1"], vpc_id="vpc-1")
    assert config.subnets == ("subnet-1", "subnet-2")
    assert config.to_request_dict() == {
        "Subnets": ["subnet-1", "subnet-2"],
        "SecurityGroupIds": ["sg-1"],
    }
    assert hash(config) == hash(VpcConfig(("subnet-1", "subnet-2"), ("sg-1",), "vpc-1"))
    for bad in ([], "subnet-1", [""], [1]):
        with pytest.raises(ConfigurationError, match="VpcConfig.subnets"):
            VpcConfig(bad, ["sg-1"])
    assert VpcConfig.from_value({"Subnets": ["s"], "SecurityGroupIds": ["g"]}) == VpcConfig(
        ["s"], ["g"]
    )
    with pytest.raises(ConfigurationError, match="vpc_config"):
        VpcConfig.from_value({"Subnets": ["s"]})


@pytest.mark.parametrize(
    "value",
    [
        VpcConfig(["subnet-1"], ["sg-1"], "vpc-1"),
        {"Subnets": ["subnet-1"], "SecurityGroupIds": ["sg-1"]},
    ],
)
def test_estimator_takes_vpc_config(tmp_path, value):
    est = pytorch(tmp_path, vpc_config=value)
    assert est.subnets == ["subnet-1"] and est.security_group_ids == ["sg-1"]


def test_vpc_config_excludes_subnets_and_security_groups(tmp_path):
    config = VpcConfig(["subnet-1"], ["sg-1"])
    for extra in ({"subnets": ["subnet-2"]}, {"security_group_ids": ["sg-2"]}):
        with pytest.raises(
            ConfigurationError,
            match="vpc_config cannot be combined with subnets/security_group_ids",
        ):
            pytorch(tmp_path, vpc_config=config, **extra)
    with pytest.raises(ConfigurationError, match="Invalid vpc_config"):
        pytorch(tmp_path, vpc_config=["subnet-1"])


def test_cidr_parameters():
    assert vpc._subnet_cidrs("10.1.0.0/16") == {
        "VpcCidr": "10.1.0.0/16",
        "Subnet1Cidr": "10.1.0.0/24",
        "Subnet2Cidr": "10.1.1.0/24",
    }
    assert vpc._subnet_cidrs("192.168.4.0/26")["Subnet2Cidr"] == "192.168.4.32/27"
    for bad in ("10.0.0.0/8", "10.0.0.1/16", "fd00::/64", "nope", None):
        with pytest.raises(ConfigurationError, match="cidr"):
            vpc._subnet_cidrs(bad)


class FakeSession:
    """What launchbay.vpc needs of a Session, with a stubbed CloudFormation client."""

    boto_region_name = "us-west-2"

    def __init__(self):
        self.client = boto3.client(
            "cloudformation",
            region_name="us-west-2",
            aws_access_key_id="a",
            aws_secret_access_key="b",
        )
        self.stubber = Stubber(self.client)

    def _new_client(self, service):
        assert service == "cloudformation"
        return self.client


def event(number, logical, status, reason=""):
    item = {
        "StackId": STACK_ID,
        "EventId": f"e{number}",
        "StackName": "net",
        "LogicalResourceId": logical,
        "ResourceType": "AWS::EC2::Subnet" if logical != "net" else "AWS::CloudFormation::Stack",
        "Timestamp": dt.datetime(2024, 1, 1, 0, 0, number, tzinfo=dt.timezone.utc),
        "ResourceStatus": status,
    }
    if reason:
        item["ResourceStatusReason"] = reason
    return item


def test_failure_quotes_the_first_failed_resource():
    session = FakeSession()
    stub = session.stubber
    stub.add_client_error(
        "describe_stacks", "ValidationError", "Stack with id net does not exist", 400
    )
    stub.add_response("create_stack", {"StackId": STACK_ID})
    newest_first = [
        event(6, "net", "ROLLBACK_COMPLETE"),
        event(5, "Subnet1", "DELETE_COMPLETE"),
        event(
            4,
            "net",
            "ROLLBACK_IN_PROGRESS",
            "The following resource(s) failed to create: [Subnet2]",
        ),
        event(3, "Subnet1", "CREATE_FAILED", "Resource creation cancelled"),
        event(
            2, "Subnet2", "CREATE_FAILED", "The CIDR '10.0.0.0/24' conflicts with another subnet"
        ),
        event(1, "net", "CREATE_IN_PROGRESS", "User Initiated"),
        event(0, "net", "DELETE_COMPLETE"),  # an older operation
    ]
    stub.add_response("describe_stack_events", {"StackEvents": newest_first[-2:]})
    stub.add_response(
        "describe_stacks",
        {
            "Stacks": [
                {
                    "StackName": "net",
                    "StackId": STACK_ID,
                    "CreationTime": dt.datetime(2024, 1, 1),
                    "StackStatus": "ROLLBACK_COMPLETE",
                }
            ]
        },
    )
    stub.add_response("describe_stack_events", {"StackEvents": newest_first})
    stub.add_response("describe_stack_events", {"StackEvents": newest_first})
    out = io.StringIO()
    with stub, pytest.raises(ProvisioningError) as info:
        vpc.provision("net", session=session, progress=out, poll_interval=0.01, timeout=5)
    message = str(info.value)
    assert "CloudFormation stack 'net' in us-west-2 failed (ROLLBACK_COMPLETE)" in message
    assert (
        "Subnet2 (AWS::EC2::Subnet): The CIDR '10.0.0.0/24' conflicts with another subnet"
        in message
    )
    assert info.value.reason == "The CIDR '10.0.0.0/24' conflicts with another subnet"
    printed = out.getvalue()  # events as plain lines (not a terminal)
    assert "Subnet2" in printed and "CREATE_FAILED" in printed and "\r" not in printed


def test_stuck_stack_times_out_with_a_clear_message():
    session = FakeSession()
    stub = session.stubber
    stuck = {
        "Stacks": [
            {
                "StackName": "net",
                "StackId": STACK_ID,
                "CreationTime": dt.datetime(2024, 1, 1),
                "StackStatus": "CREATE_IN_PROGRESS",
            }
        ]
    }
    stub.add_response("describe_stacks", stuck)
    stub.add_response("describe_stack_events", {"StackEvents": []})
    for _ in range(3):
        stub.add_response("describe_stacks", stuck)
    stub.add_response("describe_stack_events", {"StackEvents": []})
    with stub, pytest.raises(ProvisioningError) as info:
        vpc.provision("net", session=session, progress=False, poll_interval=0.1, timeout=0.3)
    assert str(info.value).startswith(
        "CloudFormation stack 'net' in us-west-2 is still CREATE_IN_PROGRESS after 0.3 s."
    )
    assert "timeout=SECONDS" in str(info.value)


def test_bad_arguments():
    with pytest.raises(ConfigurationError, match="timeout"):
        vpc.provision(timeout=0)
    with pytest.raises(ConfigurationError, match="interface_endpoints"):
        vpc.provision(interface_endpoints="yes")
    with pytest.raises(ConfigurationError, match="template"):
        vpc.provision(template="/no/such/template.yaml")
