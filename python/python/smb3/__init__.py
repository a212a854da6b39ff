"""smb3: an SMB3 multichannel client for Python, over the Rust library smb3-client.

>>> import smb3, shutil
>>> client = smb3.Client("nas.example", username="alice", password="secret")
>>> share = client.share("data")
>>> with share.open("reports/q3.csv", "rb") as src, open("q3.csv", "wb") as dst:
...     shutil.copyfileobj(src, dst, 4 << 20)
>>> share.download("big.iso", "/tmp/big.iso")   # every channel busy at once

Calls block the calling thread with the GIL released; see docs/PYTHON.md.
"""

from __future__ import annotations

from . import _smb3
from ._errors import (
    AuthError,
    DirectoryNotEmpty,
    FileExists,
    InvalidArgument,
    IsADirectory,
    NotADirectory,
    NotFound,
    NotFoundError,
    NotSupportedError,
    PermissionDenied,
    ProtocolError,
    SMBConnectionError,
    SMBError,
    SMBTimeoutError,
)
from ._io import SMBRawIO
from ._walk import walk

Client = _smb3.Client
Share = _smb3.Share
File = _smb3.File
DirEntry = _smb3.DirEntry
StatResult = _smb3.StatResult
__version__ = _smb3.__version__


def parse_url(url: str) -> dict:
    """Split ``smb://[DOMAIN;]USER@HOST[:PORT]/SHARE/PATH`` (or ``//HOST/SHARE/PATH``) into
    a dict with ``host``, ``port``, ``username``, ``domain``, ``share`` and ``path``."""
    return _smb3.parse_url(url)


def connect(url: str, password=None, *, username=None, domain=None, **options) -> Share:
    """Connect to the server and share an URL names (``smb://[DOMAIN;]USER@HOST[:PORT]/SHARE``)
    and return the :class:`Share`. ``username``/``domain`` override the URL's; ``options``
    are :class:`Client`'s keyword arguments (multichannel and Kerberos settings)."""
    u = _smb3.parse_url(url)
    client = Client(
        u["host"],
        username=username if username is not None else u["username"],
        password=password,
        domain=domain if domain is not None else u["domain"],
        port=u["port"],
        **options,
    )
    return client.share(u["share"])


__all__ = [
    "Client",
    "Share",
    "File",
    "DirEntry",
    "StatResult",
    "SMBRawIO",
    "connect",
    "parse_url",
    "walk",
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
