"""The one bounded YAML reader: every YAML text launchbay reads at run time comes through here.

Job specs and their ``--set`` values (:mod:`launchbay._specyaml`), the SageMaker SDK
defaults files and SDK v2 local mode's ``~/.sagemaker/config.yaml``
(:mod:`launchbay._sagemaker_config`, from disk or from S3) are read with the same
limits (docs/jobspec.md, "Limits"), so that no file can make launchbay block, run out
of memory or recurse without end:

* regular files only: a FIFO, a device, a socket or a directory is refused before it
  is opened for reading (``os.stat``); what is opened is opened with ``O_NONBLOCK``
  and checked again with ``fstat``, so a FIFO swapped in between never blocks either;
* at most :data:`MAX_BYTES` (1 MiB): one byte past the limit is read, never more,
  also from an S3 object's body;
* UTF-8 text (a leading byte order mark is skipped), no NUL or other control characters;
* lists and mappings at most :data:`MAX_DEPTH` levels deep, at most
  :data:`MAX_ALIASES` aliases (checked over the parser's events, before PyYAML's
  recursive composer sees the text);
* at most :data:`MAX_NODES` values and :data:`MAX_TEXT` characters once aliases are
  expanded (a "billion laughs" file is refused before anything walks it).

Every problem raises :class:`YamlFileError` (a :class:`~launchbay.errors.ConfigurationError`)
naming the file (and line) and what is accepted; callers add what the file is for.

The CloudFormation templates that ship with launchbay (:mod:`launchbay.vpc`) keep
their own loader: they are launchbay's own files, not input. yaml is imported by
the functions that use it, never by ``import launchbay``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from launchbay.errors import ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    import yaml

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_ALIASES",
    "MAX_NODES",
    "MAX_TEXT",
    "YamlFileError",
    "Budget",
    "read_bytes",
    "read_stream",
    "decode",
    "check_text",
    "compose",
    "load",
    "read",
]

#: A YAML file launchbay reads is a few kilobytes: these leave room while a hostile
#: file fails fast (docs/jobspec.md, "Limits").
MAX_BYTES = 1024 * 1024
MAX_DEPTH = 64
MAX_ALIASES = 1000
MAX_NODES = 100_000
#: Characters of scalar text (keys and values) once aliases are expanded: a 1 MiB file
#: without aliases is far below it; 1000 aliases of one long string are not.
MAX_TEXT = 8 * MAX_BYTES
_CHUNK = 64 * 1024


class YamlFileError(ConfigurationError):
    """A YAML text refused by the bounded reader.

    ``filename`` names the file (or an S3 URI, or a label such as ``--set ...``),
    ``line`` the 1-based line when known, ``reason`` what is wrong and what is accepted.
    """

    def __init__(
        self, filename: str, reason: str, line: int | None = None, *, argument: str | None = None
    ) -> None:
        self.filename = filename
        self.reason = reason
        self.line = line
        self.where = f"{filename}:{line}" if line is not None and filename else filename
        prefix = f"{self.where}: " if self.where else ""
        super().__init__(prefix + reason, argument=argument, value=filename or None)


class Budget:
    """Counts values and characters while expanded data is walked (aliases counted each time)."""

    def __init__(self) -> None:
        self.values = 0
        self.chars = 0

    def spend(self, chars: int = 0, *, values: int = 1) -> str | None:
        """Count ``values`` values and ``chars`` characters: None while within the limits,
        else what was exceeded (``"more than 100000 values"``)."""
        self.values += values
        self.chars += chars
        if self.values > MAX_NODES:
            return f"more than {MAX_NODES} values"
        if self.chars > MAX_TEXT:
            return f"more than {MAX_TEXT} characters of text"
        return None

    @staticmethod
    def message(what: str, over: str) -> str:
        return (
            f"{what} expands to {over} (YAML aliases repeat what they refer to); accepted: at "
            f"most {MAX_NODES} values and {MAX_TEXT} characters once aliases are expanded"
        )


# --------------------------------------------------------------------------- bytes


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _not_regular(path: str, what: str, mode: int) -> YamlFileError:
    target = os.path.realpath(path)
    via = f" ({path} leads to {target})" if os.path.abspath(path) != target else ""
    return YamlFileError(
        path,
        f"cannot read {what}: it is {_kind(mode)}{via}, not a regular file; accepted: a "
        "regular file",
    )


def read_bytes(path: str, *, what: str) -> bytes:
    """At most :data:`MAX_BYTES` + 1 bytes of the regular file at ``path`` (links followed).

    Never opens a FIFO, device or socket for reading, and never blocks: the path is
    checked with ``os.stat`` first, opened with ``O_NONBLOCK``, and checked again
    on the open descriptor.

    Raises:
        YamlFileError: the file cannot be read, is not a regular file, or is larger
            than the limit (``what`` names it in the message: ``"the job spec"``).
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise YamlFileError(path, f"cannot read {what}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(mode):
        raise _not_regular(path, what, mode)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise YamlFileError(path, f"cannot read {what}: {exc.strerror or exc}") from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # swapped for something else after the first look
            raise _not_regular(path, what, mode)
        chunks: list[bytes] = []
        left = MAX_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, _CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise YamlFileError(path, f"cannot read {what}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    _check_size(len(raw), path, what)
    return raw


def read_stream(stream: Any, where: str, *, what: str, size: int | None = None) -> bytes:
    """At most :data:`MAX_BYTES` + 1 bytes of a file-like ``stream`` (an S3 object's ``Body``).

    ``size`` (``ContentLength``, when known) refuses a large object before any byte is read.

    Raises:
        YamlFileError: the object is larger than the limit.
    """
    if size is not None:
        _check_size(size, where, what)
    raw = stream.read(MAX_BYTES + 1)
    _check_size(len(raw), where, what)
    return bytes(raw)


def _check_size(size: int, where: str, what: str) -> None:
    if size > MAX_BYTES:
        raise YamlFileError(
            where,
            f"{what} is larger than {MAX_BYTES} bytes; accepted: at most {MAX_BYTES} bytes of YAML",
        )


def decode(raw: bytes, where: str, *, what: str) -> str:
    """``raw`` as text: UTF-8, a leading byte order mark dropped.

    Raises:
        YamlFileError: larger than the limit, or not UTF-8 (naming the line, byte and offset).
    """
    _check_size(len(raw), where, what)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise YamlFileError(
            where,
            f"{what} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
            "accepted: UTF-8 YAML",
            line,
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


# --------------------------------------------------------------------------- text


def check_text(text: str, where: str, *, what: str) -> None:
    """Refuse ``text`` that breaks a limit (size, NUL and control characters, depth, aliases).

    Runs over the parser's events, which come one at a time, so a file of 100k ``[``
    is refused at the first level too deep, before PyYAML's recursive composer sees
    it. A syntax error is left to :func:`compose`, which reports it with its line.

    Raises:
        YamlFileError: the first limit broken, at its line.
    """
    import yaml

    if len(text) > MAX_BYTES:
        raise YamlFileError(
            where,
            f"{what} is {len(text)} characters long; accepted: at most {MAX_BYTES} bytes",
        )
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise YamlFileError(
            where, f"{what} holds a NUL byte (a binary file?); accepted: UTF-8 YAML text", line
        )
    try:
        loader = yaml.SafeLoader(text)  # the reader refuses control characters here
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, max(0, exc.position)) + 1
        raise YamlFileError(
            where,
            f"invalid YAML: unacceptable character #x{exc.character:04x} (control characters "
            "are not allowed)",
            line,
        ) from None
    depth = aliases = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise YamlFileError(
                        where,
                        f"lists and mappings nest more than {MAX_DEPTH} levels deep; "
                        f"accepted: at most {MAX_DEPTH}",
                        _line(event),
                    )
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_ALIASES:
                    raise YamlFileError(
                        where,
                        f"more than {MAX_ALIASES} YAML aliases (*name); accepted: at most "
                        f"{MAX_ALIASES}",
                        _line(event),
                    )
    except yaml.YAMLError:
        return  # reported by compose(), with its line
    finally:
        loader.dispose()


def _line(event: yaml.Event) -> int | None:
    return event.start_mark.line + 1 if event.start_mark is not None else None


@contextmanager
def compose(text: str, where: str, *, what: str) -> Iterator[tuple[yaml.SafeLoader, Any]]:
    """``(loader, node)``: ``text`` checked (:func:`check_text`) and composed into one node.

    ``node`` is None for an empty document. The loader (a ``yaml.SafeLoader``) builds
    values from the node (``construct_object``) until the ``with`` block ends. The
    caller that walks the node counts what it builds with a :class:`Budget`.

    Raises:
        YamlFileError: a limit is broken, or the text is not YAML (at its line).
    """
    import yaml

    check_text(text, where, what=what)
    loader = yaml.SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark else None
            message = " ".join(str(p) for p in (exc.context, exc.problem) if p)
            raise YamlFileError(where, f"invalid YAML: {message}", line) from exc
        except yaml.YAMLError as exc:
            raise YamlFileError(where, f"invalid YAML: {exc}") from exc
        yield loader, node
    finally:
        loader.dispose()


def load(text: str, where: str, *, what: str) -> Any:
    """``text`` as plain data, as ``yaml.safe_load`` gives it, within every limit.

    Raises:
        YamlFileError: a limit is broken, or the text is not YAML.
    """
    import yaml

    with compose(text, where, what=what) as (loader, node):
        if node is None:
            return None
        try:
            data = loader.construct_document(node)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark else None
            message = " ".join(str(p) for p in (exc.context, exc.problem) if p)
            raise YamlFileError(where, f"invalid YAML: {message}", line) from exc
        except yaml.YAMLError as exc:
            raise YamlFileError(where, f"invalid YAML: {exc}") from exc
    over = _expanded(data)
    if over is not None:
        raise YamlFileError(where, Budget.message(what, over))
    return data


def _expanded(value: Any) -> str | None:
    """What ``value`` exceeds with shared parts counted each time (stops at the limit), or None."""
    budget = Budget()
    pending = [value]
    while pending:
        item = pending.pop()
        over = budget.spend(len(item) if isinstance(item, (str, bytes)) else 0)
        if over is not None:
            return over
        if isinstance(item, dict):
            keys = sum(len(k) for k in item if isinstance(k, (str, bytes)))
            over = budget.spend(keys, values=0)  # keys are text, not values
            if over is not None:
                return over
            pending.extend(item.values())
        elif isinstance(item, (list, tuple, set)):
            pending.extend(item)
    return None


def read(path: str, *, what: str) -> Any:
    """The regular file at ``path`` as plain data (:func:`read_bytes`, :func:`decode`, :func:`load`).

    Raises:
        YamlFileError: naming ``path`` (and the line) and what is wrong.
    """
    return load(decode(read_bytes(path, what=what), path, what=what), path, what=what)
