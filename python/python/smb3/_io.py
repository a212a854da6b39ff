"""Files as io objects: :class:`SMBRawIO` is an :class:`io.RawIOBase` over the native file;
``Share.open`` wraps it in ``io.BufferedReader``/``BufferedWriter``/``BufferedRandom`` and, in
text mode, ``io.TextIOWrapper``, as the built-in ``open`` does for local files."""

from __future__ import annotations

import io

#: Buffer size when ``buffering`` is -1: large reads and writes go to the server in chunks
#: that are all in flight at once, so a big buffer costs little and saves round trips.
DEFAULT_BUFFER_SIZE = 1024 * 1024


class SMBRawIO(io.RawIOBase):
    """An unbuffered binary file on a share. Writes are sent behind (as many chunks in
    flight as keep the channels busy): ``flush()``, ``seek()``, reads and ``close()`` wait for
    them and raise a failed write's error; ``fsync()`` also asks the server to flush the file
    to stable storage."""

    def __init__(self, raw, mode: str):
        super().__init__()
        self._f = raw
        self.mode = mode.replace("t", "").replace("b", "") + "b"

    @property
    def name(self) -> str:
        return self._f.name

    def readable(self) -> bool:
        self._checkClosed()
        return self._f.readable()

    def writable(self) -> bool:
        self._checkClosed()
        return self._f.writable()

    def seekable(self) -> bool:
        self._checkClosed()
        return True

    def readinto(self, b) -> int:
        self._checkClosed()
        view = memoryview(b)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        data = self._f.read(len(view))
        n = len(data)
        view[:n] = data
        return n

    def read(self, size: int = -1) -> bytes:
        self._checkClosed()
        return self._f.read(size)

    def readall(self) -> bytes:
        self._checkClosed()
        return self._f.read(-1)

    def write(self, b) -> int:
        self._checkClosed()
        return self._f.write(b)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._checkClosed()
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        self._checkClosed()
        return self._f.tell()

    def truncate(self, size=None) -> int:
        self._checkClosed()
        return self._f.truncate(size)

    def flush(self) -> None:
        """Wait for the writes sent behind; an error of one is raised here."""
        if not self.closed:
            self._f.flush()

    def fsync(self) -> None:
        self._checkClosed()
        self._f.fsync()

    def stat(self):
        self._checkClosed()
        return self._f.stat()

    def read_at(self, offset: int, size: int) -> bytes:
        """Read up to ``size`` bytes at ``offset`` without moving the cursor (thread-safe)."""
        return self._f.read_at(offset, size)

    def write_at(self, offset: int, data) -> None:
        """Write ``data`` at ``offset`` without moving the cursor (thread-safe)."""
        self._f.write_at(offset, data)

    def close(self) -> None:
        if self.closed:
            return
        try:
            super().close()
        finally:
            self._f.close()

    def __repr__(self) -> str:
        return f"<smb3.SMBRawIO name={self.name!r} mode={self.mode!r}>"


def _wrap(raw, mode: str, buffering: int, encoding, errors, newline):
    """Build what ``open(path, mode, buffering, ...)`` returns around the native file."""
    text = "b" not in mode
    f = SMBRawIO(raw, mode)
    try:
        if buffering == 0:
            if text:
                raise ValueError("can't have unbuffered text I/O")
            return f
        if buffering in (-1, 1) or buffering < 0:
            size = DEFAULT_BUFFER_SIZE
        else:
            size = buffering
        if "+" in mode:
            buf = io.BufferedRandom(f, size)
        elif "r" in mode:
            buf = io.BufferedReader(f, size)
        else:
            buf = io.BufferedWriter(f, size)
        if not text:
            return buf
        t = io.TextIOWrapper(
            buf,
            encoding=encoding or "utf-8",
            errors=errors,
            newline=newline,
            line_buffering=buffering == 1,
        )
        t.mode = mode
        return t
    except BaseException:
        f.close()
        raise
