"""CloudFormation templates installed with launchbay (``launchbay.infra``).

This directory is the one copy of the templates: setup.cfg maps the package
``launchbay.infra`` here, so ``importlib.resources.files("launchbay.infra")``
finds them in a wheel install as well as an editable one. See docs/vpc.md.
"""
