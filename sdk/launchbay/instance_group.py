"""``from launchbay.instance_group import InstanceGroup``, where SDK v2 keeps it."""

from launchbay.inputs import InstanceGroup

__all__ = ["InstanceGroup"]
