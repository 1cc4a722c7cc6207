"""Errors the runtime raises before the user's code runs.

::

    TrainingSetupError (RuntimeError)   the job cannot start: bad entry point,
    │                                   code that cannot be fetched, missing tool
    └── UnsafeArchiveError              sourcedir.tar.gz has members escaping the code dir

Each message names what was given and what is accepted; ``train`` turns them
into the failure file and exit status 1.
"""

from __future__ import annotations

__all__ = ["TrainingSetupError", "UnsafeArchiveError"]


class TrainingSetupError(RuntimeError):
    """The training job cannot be started as configured."""


class UnsafeArchiveError(TrainingSetupError):
    """A code archive has members that would land outside the code directory."""

    def __init__(self, archive: str, members: list[str]):
        self.archive = archive
        self.members = members
        shown = ", ".join(repr(m) for m in members[:10])
        more = f" (and {len(members) - 10} more)" if len(members) > 10 else ""
        super().__init__(
            f"Refusing to unpack {archive}: member(s) {shown}{more} would be written outside "
            "the code directory (absolute paths, '..' segments, symbolic or hard links that "
            "resolve outside, also through other links in the archive, link loops, devices or "
            "FIFOs). Nothing was unpacked. Rebuild the archive with paths and links relative to "
            "the source directory."
        )
