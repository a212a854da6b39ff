"""An fsspec filesystem over smb3, registered as the protocol ``smb3``.

>>> import fsspec
>>> with fsspec.open("smb3://nas.example/data/reports/q3.csv", "rt",
...                  username="alice", password="secret") as f:
...     header = f.readline()
>>> fs = fsspec.filesystem("smb3", host="nas.example", username="alice", password="secret")
>>> fs.ls("/data/reports")
>>> fs.get_file("/data/big.iso", "/tmp/big.iso")   # multichannel, every channel busy

Paths are ``/share/path`` (the host comes from the URL or the ``host`` option), as in
fsspec's own ``smb`` filesystem, whose storage options (``host``, ``port``, ``username``,
``password``, ``domain``) this one takes too, plus the keyword arguments of
:class:`smb3.Client` (``multichannel``, ``max_channels``, ``kerberos_ccache``, ...).
"""

from __future__ import annotations

import datetime
import os
import threading

from fsspec.callbacks import DEFAULT_CALLBACK
from fsspec.spec import AbstractFileSystem
from fsspec.utils import infer_storage_options

from . import _smb3
from ._errors import NotFoundError


def _ts(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)


class SMB3FileSystem(AbstractFileSystem):
    """fsspec filesystem for SMB3 shares through one multichannel session.

    ``host`` is required (it comes from the URL with ``fsspec.open``); ``port`` 445 by
    default; ``username``/``password``/``domain`` for NTLM, or no password for Kerberos from
    the ticket cache or keytab. Other keyword arguments go to :class:`smb3.Client`.
    """

    protocol = ("smb3",)
    root_marker = "/"

    def __init__(
        self,
        host: str,
        port: int | None = None,
        username: str | None = None,
        password: str | None = None,
        domain: str | None = None,
        timeout: float | None = None,
        auto_mkdir: bool = True,
        **kwargs,
    ):
        # fsspec's own options (skip_instance_cache, use_listings_cache, ...) go to fsspec;
        # the rest are the client's.
        fs_keys = {"skip_instance_cache", "use_listings_cache", "listings_expiry_time",
                   "max_paths", "asynchronous", "loop"}
        fs_opts = {k: v for k, v in kwargs.items() if k in fs_keys}
        client_opts = {k: v for k, v in kwargs.items() if k not in fs_keys}
        # fsspec's smb options that have no meaning here.
        for k in ("encrypt_", "share_access", "register_session_retries",
                  "register_session_retry_wait",
                  "register_session_retry_factor"):
            client_opts.pop(k, None)
        if timeout is not None:
            client_opts.setdefault("connect_timeout", float(timeout))
        super().__init__(**fs_opts)
        self.host = host
        self.auto_mkdir = auto_mkdir
        self.port = port or 445
        self.username = username
        self.domain = domain
        self._client = _smb3.Client(
            host,
            username=username,
            password=password,
            domain=domain,
            port=self.port,
            **client_opts,
        )
        self._shares: dict = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ paths

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        if path.startswith("smb3://"):
            path = infer_storage_options(path)["path"]
        path = path.replace("\\", "/")
        path = "/" + path.strip("/")
        return path

    @staticmethod
    def _get_kwargs_from_urls(path):
        out = {}
        o = infer_storage_options(path)
        if o.get("host"):
            out["host"] = o["host"]
        if o.get("port"):
            out["port"] = int(o["port"])
        if o.get("username"):
            out["username"] = o["username"]
        if o.get("password"):
            out["password"] = o["password"]
        return out

    def _split(self, path):
        """(share, share-relative path) of ``path``."""
        p = self._strip_protocol(path).lstrip("/")
        share, _, rel = p.partition("/")
        if not share:
            raise NotImplementedError(
                "smb3: the server's list of shares is not available; use /share/path"
            )
        return self._share(share), rel

    def _share(self, name):
        with self._lock:
            s = self._shares.get(name)
            if s is None:
                s = self._shares[name] = self._client.share(name)
            return s

    @property
    def client(self):
        """The :class:`smb3.Client` behind this filesystem."""
        return self._client

    # ------------------------------------------------------------------ metadata

    @staticmethod
    def _info(name, st):
        return {
            "name": name,
            "size": st.st_size if not st.is_dir() else 0,
            "type": "directory" if st.is_dir() else "file",
            "created": st.st_birthtime,
            "mtime": st.st_mtime,
            "mode": st.st_mode,
            "ino": st.st_ino,
            "nlink": st.st_nlink,
            "attributes": st.st_file_attributes,
        }

    def info(self, path, **kwargs):
        path = self._strip_protocol(path)
        share, rel = self._split(path)
        return self._info(path, share.stat(rel))

    def ls(self, path, detail=True, **kwargs):
        path = self._strip_protocol(path)
        share, rel = self._split(path)
        st = share.stat(rel)
        if not st.is_dir():
            out = [self._info(path, st)]
        else:
            with share.scandir(rel) as it:
                out = [
                    self._info(path.rstrip("/") + "/" + e.name, e.stat()) for e in it
                ]
            out.sort(key=lambda d: d["name"])
        return out if detail else [d["name"] for d in out]

    def created(self, path):
        return _ts(self.info(path)["created"])

    def modified(self, path):
        return _ts(self.info(path)["mtime"])

    # ------------------------------------------------------------------ files

    def _writing(self, share, rel, action):
        """Run ``action()``, which creates ``rel``; when its parent directory is missing and
        ``auto_mkdir`` is on (the default, as fsspec's ``smb``), make it and run it again."""
        try:
            return action()
        except NotFoundError:
            parent = rel.rpartition("/")[0]
            if not self.auto_mkdir or not parent or share.exists(parent):
                raise
            share.makedirs(parent, exist_ok=True)
            return action()

    def _open(self, path, mode="rb", block_size=None, autocommit=True,
              cache_options=None, **kwargs):
        share, rel = self._split(path)
        buffering = block_size if block_size and block_size != "default" else -1
        if "r" in mode:
            return share.open(rel, mode, buffering=buffering)
        return self._writing(share, rel, lambda: share.open(rel, mode, buffering=buffering))

    def cat_file(self, path, start=None, end=None, **kwargs):
        share, rel = self._split(path)
        if start is None and end is None:
            # The whole file: one round trip for a small one.
            return share.read_bytes(rel)
        return super().cat_file(path, start=start, end=end, **kwargs)

    def pipe_file(self, path, value, mode="overwrite", **kwargs):
        share, rel = self._split(path)
        if mode == "create" and share.exists(rel):
            raise FileExistsError(path)
        self._writing(share, rel, lambda: share.write_bytes(rel, value))

    def mkdir(self, path, create_parents=True, **kwargs):
        share, rel = self._split(path)
        if create_parents:
            share.makedirs(rel, exist_ok=False)
        else:
            share.mkdir(rel)

    def makedirs(self, path, exist_ok=False):
        share, rel = self._split(path)
        share.makedirs(rel, exist_ok=exist_ok)

    def rmdir(self, path):
        share, rel = self._split(path)
        share.rmdir(rel)

    def rm_file(self, path):
        # fsspec's rm(recursive=True) passes the directories of the tree here too, deepest
        # first.
        self._rm(path)

    def _rm(self, path):
        share, rel = self._split(path)
        if share.isdir(rel):
            share.rmdir(rel)
        else:
            share.remove(rel)

    def mv(self, path1, path2, recursive=False, maxdepth=None, **kwargs):
        s1, r1 = self._split(path1)
        s2, r2 = self._split(path2)
        if s1.name == s2.name:
            s1.rename(r1, r2, replace=True)
            self.invalidate_cache(self._parent(path1))
            self.invalidate_cache(self._parent(path2))
        else:
            super().mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)

    def cp_file(self, path1, path2, **kwargs):
        s1, r1 = self._split(path1)
        s2, r2 = self._split(path2)
        if s1.isdir(r1):
            s2.makedirs(r2, exist_ok=True)
            return
        if s1.name == s2.name:
            try:
                self._writing(s2, r2, lambda: s1.copy(r1, r2))
                return
            except OSError as e:
                if isinstance(e, NotFoundError):
                    raise
                # A server without server-side copy: through the client.
        with s1.open(r1, "rb") as src, self._writing(s2, r2, lambda: s2.open(r2, "wb")) as dst:
            while True:
                chunk = src.read(4 << 20)
                if not chunk:
                    break
                dst.write(chunk)

    def put_file(self, lpath, rpath, callback=DEFAULT_CALLBACK, mode="overwrite", **kwargs):
        share, rel = self._split(rpath)
        if os.path.isdir(lpath):
            share.makedirs(rel, exist_ok=True)
            return
        size = os.path.getsize(lpath)
        callback.set_size(size)
        if mode == "create" and share.exists(rel):
            raise FileExistsError(rpath)
        self._writing(share, rel, lambda: share.upload(lpath, rel))
        callback.relative_update(size)

    def get_file(self, rpath, lpath, callback=DEFAULT_CALLBACK, outfile=None, **kwargs):
        share, rel = self._split(rpath)
        if outfile is not None:
            # A file object to write to: stream it.
            with share.open(rel, "rb") as src:
                while True:
                    chunk = src.read(4 << 20)
                    if not chunk:
                        break
                    outfile.write(chunk)
                    callback.relative_update(len(chunk))
            return
        if share.isdir(rel):
            os.makedirs(lpath, exist_ok=True)
            return
        parent = os.path.dirname(os.fspath(lpath))
        if parent:
            os.makedirs(parent, exist_ok=True)
        n = share.download(rel, os.fspath(lpath))
        callback.set_size(n)
        callback.relative_update(n)
