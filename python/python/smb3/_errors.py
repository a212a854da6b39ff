"""The exception hierarchy of smb3.

Every error the package raises for the server or the network is an :class:`SMBError`, which
is an :class:`OSError` (``errno``, ``strerror``, ``filename``) with two more attributes:

* ``ntstatus``: the NTSTATUS the server answered with (e.g. ``0xC0000034``), or ``None``;
* ``status_name``: its name (``"STATUS_OBJECT_NAME_NOT_FOUND"``), or ``None``.

The subclasses also derive from the matching built-in exception, so code written for local
files keeps working: ``except FileNotFoundError`` catches :class:`NotFoundError`.
"""

from __future__ import annotations

from typing import Optional


class SMBError(OSError):
    """Base class of the package's errors."""

    ntstatus: Optional[int] = None
    status_name: Optional[str] = None


class AuthError(SMBError, PermissionError):
    """Authentication failed: wrong user or password (STATUS_LOGON_FAILURE), a disabled or
    expired account, or no Kerberos ticket."""


class NotFoundError(SMBError, FileNotFoundError):
    """The file, directory or share does not exist."""


class PermissionDenied(SMBError, PermissionError):
    """The server refused access (STATUS_ACCESS_DENIED, ...)."""


class FileExists(SMBError, FileExistsError):
    """The name is taken (STATUS_OBJECT_NAME_COLLISION)."""


class IsADirectory(SMBError, IsADirectoryError):
    """A file operation on a directory."""


class NotADirectory(SMBError, NotADirectoryError):
    """A directory operation on a file, or a path through a file."""


class DirectoryNotEmpty(SMBError):
    """rmdir of a directory that still has entries (STATUS_DIRECTORY_NOT_EMPTY)."""


class SMBConnectionError(SMBError, ConnectionError):
    """The network failed: refused, reset, every channel lost, an open lost with it."""


class SMBTimeoutError(SMBError, TimeoutError):
    """No reply in time."""


class ProtocolError(SMBError):
    """The server broke the protocol (malformed reply, bad signature, unsafe name)."""


class NotSupportedError(SMBError):
    """The server does not offer what was asked (STATUS_NOT_SUPPORTED)."""


class InvalidArgument(SMBError, ValueError):
    """An argument the package cannot use (a bad mode, URL or setting)."""


# The names the issue uses.
NotFound = NotFoundError

__all__ = [
    "SMBError",
    "AuthError",
    "NotFoundError",
    "NotFound",
    "PermissionDenied",
    "FileExists",
    "IsADirectory",
    "NotADirectory",
    "DirectoryNotEmpty",
    "SMBConnectionError",
    "SMBTimeoutError",
    "ProtocolError",
    "NotSupportedError",
    "InvalidArgument",
]
