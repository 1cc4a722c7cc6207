"""``launchbay.images.ensure_image``'s refusals. With the real engine, a present image is used
as it is (tests/docker/test_images.py) and the notebooks' Docker cells call it
(tests/notebooks); the build itself is tested in tests/docker/test_images.py.
"""

from __future__ import annotations

import pytest

from launchbay import images
from launchbay.errors import ConfigurationError
from launchbay.images import ensure


def test_only_launchbay_images_can_be_ensured():
    # refused before any engine is asked
    with pytest.raises(ConfigurationError, match="a launchbay image name"):
        images.ensure_image("python:3.11-slim", client=object())


def test_the_checkout_has_the_horovod_script():
    assert ensure._horovod_script().is_file()
