"""Make this Python's tarfile look like one without extraction filters (3.11 before 3.11.4).

Put this folder first on ``PYTHONPATH`` (every Python process started with it
then loads it) or call :func:`strip` in a test: ``tarfile.data_filter`` and its
kin are gone, and ``extractall()``/``extract()`` take no ``filter=`` argument
(a ``TypeError``, as on Debian 12's ``/usr/bin/python3`` 3.11.2); they extract
as such a Python does, trusting every member.
"""

from __future__ import annotations

import tarfile

_NAMES = ("data_filter", "tar_filter", "fully_trusted_filter", "FilterError")


def strip() -> None:
    """Take the filters out of ``tarfile`` in this process (idempotent)."""
    if not hasattr(tarfile, "data_filter"):
        return
    for name in _NAMES:
        delattr(tarfile, name)
    extractall, extract = tarfile.TarFile.extractall, tarfile.TarFile.extract

    def old_extractall(self, path=".", members=None, *, numeric_owner=False):
        return extractall(self, path, members, numeric_owner=numeric_owner, filter="fully_trusted")

    def old_extract(self, member, path="", set_attrs=True, *, numeric_owner=False):
        return extract(
            self, member, path, set_attrs, numeric_owner=numeric_owner, filter="fully_trusted"
        )

    tarfile.TarFile.extractall = old_extractall  # type: ignore[method-assign]
    tarfile.TarFile.extract = old_extract  # type: ignore[method-assign]


strip()
