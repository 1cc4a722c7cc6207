"""The CloudFormation templates in infra/: cfn-lint clean, installed with the package, safe."""

from __future__ import annotations

import configparser
import importlib.resources
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from launchbay import vpc

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted((ROOT / "infra").glob("*.yaml"))
INTERFACE_SERVICES = ("logs", "ecr.api", "ecr.dkr", "sts", "sagemaker.api")


def load(path: Path) -> dict:
    return yaml.load(path.read_text(), Loader=vpc._cfn_loader())


def test_cfn_lint_passes_on_every_template():
    assert TEMPLATES, "no templates in infra/"
    cfn_lint = shutil.which("cfn-lint") or str(Path(sys.executable).with_name("cfn-lint"))
    if not Path(cfn_lint).exists():  # pragma: no cover - the test extra installs it
        pytest.fail("cfn-lint is not installed: pip install -e '.[test]'")
    result = subprocess.run([cfn_lint, *map(str, TEMPLATES)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_installed_template_is_the_one_in_infra():
    installed = importlib.resources.files("launchbay.infra").joinpath("vpc.yaml")
    assert installed.read_text() == (ROOT / "infra" / "vpc.yaml").read_text()
    assert vpc.template_body() == installed.read_text()


def test_setup_cfg_lists_every_package():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    listed = set(config["options"]["packages"].split())
    found = {
        ".".join(p.parent.relative_to(ROOT / "sdk").parts)
        for p in (ROOT / "sdk" / "launchbay").rglob("__init__.py")
    }
    assert found | {"launchbay.infra"} == listed
    assert "launchbay.infra = infra" in config["options"]["package_dir"]
    assert "*.yaml" in config["options.package_data"]["launchbay.infra"]


def test_vpc_template_shape():
    template = load(ROOT / "infra" / "vpc.yaml")
    params, resources = template["Parameters"], template["Resources"]
    assert params["VpcCidr"]["Default"] == "10.0.0.0/16"
    assert params["Subnet1Cidr"]["Default"] == "10.0.0.0/24"
    assert params["Subnet2Cidr"]["Default"] == "10.0.1.0/24"
    assert params["InterfaceEndpoints"]["Default"] == "false"
    assert set(template["Outputs"]) >= set(vpc.OUTPUTS)

    props = resources["Vpc"]["Properties"]
    assert props["EnableDnsSupport"] is True and props["EnableDnsHostnames"] is True
    azs = [
        resources[n]["Properties"]["AvailabilityZone"]["Select"][0] for n in ("Subnet1", "Subnet2")
    ]
    assert azs == [0, 1]
    associations = [r for r in resources.values() if r["Type"].endswith("RouteTableAssociation")]
    assert len(associations) == 2
    s3 = resources["S3GatewayEndpoint"]["Properties"]
    assert s3["VpcEndpointType"] == "Gateway" and s3["RouteTableIds"] == [{"Ref": "RouteTable"}]


def test_vpc_template_network_rules():
    resources = load(ROOT / "infra" / "vpc.yaml")["Resources"]
    # The only ingress of the training group: all traffic from itself.
    ingress = [r for r in resources.values() if r["Type"] == "AWS::EC2::SecurityGroupIngress"]
    assert len(ingress) == 1
    rule = ingress[0]["Properties"]
    assert rule["IpProtocol"] == "-1"
    assert rule["GroupId"] == rule["SourceSecurityGroupId"] == {"GetAtt": "SecurityGroup.GroupId"}
    assert "SecurityGroupIngress" not in resources["SecurityGroup"]["Properties"]
    # No 0.0.0.0/0 ingress anywhere.
    text = yaml.safe_dump(
        [r["Properties"].get("SecurityGroupIngress") for r in resources.values()]
        + [r["Properties"] for r in ingress]
    )
    assert "0.0.0.0/0" not in text and "::/0" not in text


def test_interface_endpoints_are_conditional():
    resources = load(ROOT / "infra" / "vpc.yaml")["Resources"]
    interface = {
        name: r
        for name, r in resources.items()
        if r["Type"] == "AWS::EC2::VPCEndpoint"
        and r["Properties"]["VpcEndpointType"] == "Interface"
    }
    services = sorted(
        r["Properties"]["ServiceName"]["Sub"].rsplit("}.", 1)[1] for r in interface.values()
    )
    assert services == sorted(INTERFACE_SERVICES)
    for resource in interface.values():
        assert resource["Condition"] == "CreateInterfaceEndpoints"
        props = resource["Properties"]
        assert props["PrivateDnsEnabled"] is True
        assert props["SubnetIds"] == [{"Ref": "Subnet1"}, {"Ref": "Subnet2"}]
        assert {"GetAtt": "SecurityGroup.GroupId"} in props["SecurityGroupIds"]
    assert resources["EndpointSecurityGroup"]["Condition"] == "CreateInterfaceEndpoints"
