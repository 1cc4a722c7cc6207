"""launchbay.vpc against the moto server: the stack, its resources, reuse, update, teardown.

moto creates CloudFormation stacks synchronously, cannot update a VPC or subnet
in place (it drops their outputs), does not record subnet-route-table
associations, and leaves a stack whose creation raised in CREATE_IN_PROGRESS.
The tests check what moto can show; none of these gaps is worked around in
launchbay's code.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap

import boto3
import pytest

from factories import sagemaker_estimator
from launchbay import ProvisioningError, vpc

REGION = "us-west-2"
STACK = "lb-test-vpc"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"

# moto reports EC2 errors raised inside CloudFormation with a shape botocore lacks.
pytestmark = pytest.mark.filterwarnings("ignore:Exception\\(.*does not match an error shape")


def clients():
    return boto3.client("cloudformation", region_name=REGION), boto3.client(
        "ec2", region_name=REGION
    )


def stack_of(cf, name=STACK):
    return cf.describe_stacks(StackName=name)["Stacks"][0]


def test_provision_creates_the_network(aws):
    config = vpc.provision(STACK, REGION, progress=False)
    cf, ec2 = clients()
    assert stack_of(cf)["StackStatus"] == "CREATE_COMPLETE"

    (v,) = ec2.describe_vpcs(VpcIds=[config.vpc_id])["Vpcs"]
    assert v["CidrBlock"] == "10.0.0.0/16"
    subnets = ec2.describe_subnets(SubnetIds=list(config.subnets))["Subnets"]
    assert {s["VpcId"] for s in subnets} == {config.vpc_id}
    assert sorted(s["CidrBlock"] for s in subnets) == ["10.0.0.0/24", "10.0.1.0/24"]
    assert len({s["AvailabilityZone"] for s in subnets}) == 2

    (group,) = ec2.describe_security_groups(GroupIds=list(config.security_group_ids))[
        "SecurityGroups"
    ]
    assert group["VpcId"] == config.vpc_id
    (rule,) = group["IpPermissions"]
    assert rule["IpProtocol"] == "-1" and rule["IpRanges"] == []
    assert [p["GroupId"] for p in rule["UserIdGroupPairs"]] == [group["GroupId"]]

    endpoints = ec2.describe_vpc_endpoints(Filters=[{"Name": "vpc-id", "Values": [config.vpc_id]}])[
        "VpcEndpoints"
    ]
    assert [(e["VpcEndpointType"], e["ServiceName"]) for e in endpoints] == [
        ("Gateway", f"com.amazonaws.{REGION}.s3")
    ]
    (route_table,) = ec2.describe_route_tables(RouteTableIds=endpoints[0]["RouteTableIds"])[
        "RouteTables"
    ]
    assert route_table["VpcId"] == config.vpc_id

    assert vpc.describe(STACK, REGION) == config
    assert config.to_request_dict() == {
        "Subnets": list(config.subnets),
        "SecurityGroupIds": list(config.security_group_ids),
    }


def test_provision_again_reuses_the_stack(aws):
    first = vpc.provision(STACK, REGION, progress=False)
    cf, ec2 = clients()
    before = stack_of(cf)
    events = cf.describe_stack_events(StackName=STACK)["StackEvents"]
    vpcs = ec2.describe_vpcs()["Vpcs"]

    again = vpc.provision(STACK, REGION, cidr="10.0.0.0/16", progress=False)

    assert again == first
    after = stack_of(cf)
    assert after["StackId"] == before["StackId"]
    assert after["StackStatus"] == "CREATE_COMPLETE"
    assert cf.describe_stack_events(StackName=STACK)["StackEvents"] == events
    assert ec2.describe_vpcs()["Vpcs"] == vpcs


def test_changed_cidr_updates_the_stack(aws):
    vpc.provision(STACK, REGION, progress=False)
    try:
        vpc.provision(STACK, REGION, cidr="10.1.0.0/16", progress=False)
    except ProvisioningError as exc:
        # moto cannot update a VPC or subnet in place and drops their outputs
        # (CloudFormation replaces them); the update itself is what it can show.
        assert "has no output" in str(exc) and STACK in str(exc)
    cf, _ = clients()
    stack = stack_of(cf)
    assert stack["StackStatus"] == "UPDATE_COMPLETE"
    params = {p["ParameterKey"]: p["ParameterValue"] for p in stack["Parameters"]}
    assert params["VpcCidr"] == "10.1.0.0/16"
    assert params["Subnet1Cidr"] == "10.1.0.0/24"
    assert params["Subnet2Cidr"] == "10.1.1.0/24"
    assert params["InterfaceEndpoints"] == "false"


def delete_what_moto_cannot(ec2, vpc_id):
    """Delete the S3 endpoint and the route table, which moto's CloudFormation cannot delete."""
    endpoints = ec2.describe_vpc_endpoints(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])
    ids = [e["VpcEndpointId"] for e in endpoints["VpcEndpoints"]]
    tables = {t for e in endpoints["VpcEndpoints"] for t in e.get("RouteTableIds", [])}
    ec2.delete_vpc_endpoints(VpcEndpointIds=ids)
    for table in tables:
        ec2.delete_route_table(RouteTableId=table)


def test_teardown_leaves_no_stack(aws):
    config = vpc.provision(STACK, REGION, progress=False)
    cf, ec2 = clients()
    delete_what_moto_cannot(ec2, config.vpc_id)
    assert vpc.teardown(STACK, REGION, progress=False) is True
    assert [s["StackName"] for s in cf.describe_stacks()["Stacks"]] == []
    with pytest.raises(ProvisioningError, match=f"no CloudFormation stack '{STACK}' in {REGION}"):
        vpc.describe(STACK, REGION)
    assert vpc.teardown(STACK, REGION, progress=False) is False  # missing is fine


def test_template_failure_is_reported_then_times_out_quickly(aws, tmp_path):
    # One CIDR for both subnets: the second subnet cannot be created.
    bad = {"Subnet1Cidr": "10.0.0.0/24", "Subnet2Cidr": "10.0.0.0/24"}
    with pytest.raises(ProvisioningError) as info:
        vpc.provision(STACK, REGION, parameters=bad, timeout=5, poll_interval=0.2, progress=False)
    message = str(info.value)
    assert STACK in message and REGION in message
    assert "conflicts with another subnet" in message

    # moto leaves such a stack CREATE_IN_PROGRESS (it cannot even describe this one,
    # whose outputs need the missing subnet). A template without outputs shows
    # the wait ending in a clear timeout.
    template = tmp_path / "bad.yaml"
    template.write_text(
        textwrap.dedent(
            """
            Resources:
              Vpc: {Type: AWS::EC2::VPC, Properties: {CidrBlock: 10.9.0.0/16}}
              A: {Type: AWS::EC2::Subnet, Properties: {VpcId: !Ref Vpc, CidrBlock: 10.9.0.0/24}}
              B: {Type: AWS::EC2::Subnet, Properties: {VpcId: !Ref Vpc, CidrBlock: 10.9.0.0/24}}
            """
        )
    )
    with pytest.raises(ProvisioningError, match="conflicts with another subnet"):
        vpc.provision("stuck", REGION, template=template, timeout=5, progress=False)
    with pytest.raises(ProvisioningError) as info:
        vpc.provision("stuck", REGION, template=template, timeout=1, poll_interval=0.2)
    message = str(info.value)
    assert "'stuck' in us-west-2 is still CREATE_IN_PROGRESS after 1 s" in message
    assert "timeout=SECONDS" in message and "--timeout" in message
    assert info.value.status == "CREATE_IN_PROGRESS"


def test_training_request_carries_the_provisioned_vpc(session, tmp_path):
    config = vpc.provision(STACK, session=session, progress=False)
    (tmp_path / "train.py").write_text("print('hi')\n")
    est = sagemaker_estimator(
        source_dir=tmp_path,
        instance_count=2,
        instance_type="ml.g5.12xlarge",
        sagemaker_session=session,
        vpc_config=config,
        distribution={"torch_distributed": {"enabled": True}},
    )
    request = est.create_training_job_request("s3://bucket/train", job_name="vpc-job")
    assert request["VpcConfig"] == {
        "Subnets": list(config.subnets),
        "SecurityGroupIds": list(config.security_group_ids),
    }


def run(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "launchbay.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=env or dict(os.environ),
        timeout=120,
    )


def test_spec_with_vpc_stack_dry_run(aws, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('hi')\n")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        textwrap.dedent(
            f"""
            framework: pytorch
            framework_version: "2.3"
            py_version: py311
            entry_point: train.py
            source_dir: src
            role: {ROLE}
            instance_type: ml.c5.xlarge
            job_name: vpc-spec-job
            vpc:
              stack: {STACK}
            """
        ).lstrip()
    )
    missing = run("submit", spec, "--dry-run")
    assert missing.returncode == 1, missing.stderr
    assert "job.yaml:10: vpc.stack:" in missing.stderr
    assert f"no CloudFormation stack '{STACK}'" in missing.stderr
    assert "Traceback" not in missing.stderr

    valid = run("validate", spec)  # no AWS call: the stack is read at submission
    assert valid.returncode == 0, valid.stderr
    assert f"VPC of stack {STACK}" in valid.stdout

    config = vpc.provision(STACK, REGION, progress=False)
    result = run("submit", spec, "--dry-run")
    assert result.returncode == 0, result.stderr
    request = json.loads(result.stdout)
    assert request["VpcConfig"] == config.to_request_dict()


def test_vpc_command_up_show_down(aws):
    up = run("vpc", "up", "--stack", STACK, "--region", REGION, "--output", "json")
    assert up.returncode == 0, up.stderr
    shown = json.loads(up.stdout)
    assert shown["stack"] == STACK and len(shown["subnets"]) == 2
    assert f"Creating CloudFormation stack '{STACK}' in {REGION}" in up.stderr
    assert "CREATE_COMPLETE" in up.stderr  # the stack's events, as plain lines
    config = vpc.describe(STACK, REGION)
    assert shown["vpc_id"] == config.vpc_id
    assert shown["security_group_ids"] == list(config.security_group_ids)

    show = run("vpc", "show", "--stack", STACK, "--region", REGION)
    assert show.returncode == 0, show.stderr
    assert config.vpc_id in show.stdout and config.subnets[1] in show.stdout

    again = run("vpc", "up", "--stack", STACK, "--region", REGION)
    assert again.returncode == 0 and "is up to date" in again.stderr

    delete_what_moto_cannot(clients()[1], config.vpc_id)
    down = run("vpc", "down", "--stack", STACK, "--region", REGION)
    assert down.returncode == 0, down.stderr
    assert f"deleted stack {STACK}" in down.stderr

    gone = run("vpc", "show", "--stack", STACK, "--region", REGION)
    assert gone.returncode == 1
    assert f"no CloudFormation stack '{STACK}' in {REGION}" in gone.stderr
    assert "Traceback" not in gone.stderr

    bad = run("vpc", "up", "--stack", STACK, "--cidr", "10.0.0.0/8")
    assert bad.returncode == 2 and "cidr" in bad.stderr
    assert run("vpc", "up", "--timeout", "0").returncode == 2
    assert run("vpc").returncode == 2


STUCK_TEMPLATE = """
Resources:
  Vpc: {Type: AWS::EC2::VPC, Properties: {CidrBlock: 10.8.0.0/16}}
  A: {Type: AWS::EC2::Subnet, Properties: {VpcId: !Ref Vpc, CidrBlock: 10.8.0.0/24}}
  B: {Type: AWS::EC2::Subnet, Properties: {VpcId: !Ref Vpc, CidrBlock: 10.8.0.0/24}}
"""


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("stream", [Terminal, io.StringIO])
def test_stack_events_drawn_on_a_terminal_and_in_a_log(aws, tmp_path, stream):
    """moto leaves this stack CREATE_IN_PROGRESS, so the wait shows its status for a second."""
    template = tmp_path / "stuck.yaml"
    template.write_text(STUCK_TEMPLATE)
    with pytest.raises(ProvisioningError, match="conflicts with another subnet"):
        vpc.provision("stuck", REGION, template=template, progress=False)
    out = stream()
    with pytest.raises(ProvisioningError, match="still CREATE_IN_PROGRESS"):
        vpc.provision(
            "stuck", REGION, template=template, timeout=1, poll_interval=0.2, progress=out
        )
    text = out.getvalue()
    assert "stuck                          CREATE_IN_PROGRESS   AWS::CloudFormation::Stack" in text
    if stream is Terminal:  # a status line redrawn in place, erased at the end
        assert "  stuck: CREATE_IN_PROGRESS (" in text and "\r\x1b[2K" in text
        assert "\x1b[1A\x1b[2K" in text and text.endswith("\n\r\x1b[1A\x1b[2K")
    else:  # forced on in a log: no status line, no control character
        assert "CREATE_IN_PROGRESS (" not in text
        assert "\r" not in text and "\x1b" not in text
