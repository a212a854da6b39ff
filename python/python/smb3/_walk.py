"""``walk`` as ``os.walk`` does it, over ``Share.scandir``."""

from __future__ import annotations

from typing import Callable, Iterator, List, Optional, Tuple


def _join(a: str, b: str) -> str:
    return f"{a}/{b}" if a else b


def walk(
    share,
    top: str = "",
    topdown: bool = True,
    onerror: Optional[Callable[[OSError], None]] = None,
) -> Iterator[Tuple[str, List[str], List[str]]]:
    """Yield ``(dirpath, dirnames, filenames)`` for each directory of the tree under ``top``
    (share-relative, ``""`` for the root), as :func:`os.walk`: top-down by default, where the
    caller may prune ``dirnames`` in place. A directory that cannot be listed is passed to
    ``onerror`` (when given) and skipped. For a fast flat listing of a whole tree (several
    directories listed at once) use ``Share.walk_entries``."""
    top = top.replace("\\", "/").strip("/")
    stack = [top]
    # For bottom-up: (dirpath, dirnames, filenames, children pending) unwound later.
    if not topdown:
        yield from _bottom_up(share, top, onerror)
        return
    while stack:
        d = stack.pop()
        try:
            with share.scandir(d) as it:
                dirs, files = [], []
                for e in it:
                    (dirs if e.is_dir() else files).append(e.name)
        except OSError as err:
            if onerror is not None:
                onerror(err)
            continue
        yield d, dirs, files
        for name in reversed(dirs):
            stack.append(_join(d, name))


def _bottom_up(share, top, onerror):
    try:
        with share.scandir(top) as it:
            dirs, files = [], []
            for e in it:
                (dirs if e.is_dir() else files).append(e.name)
    except OSError as err:
        if onerror is not None:
            onerror(err)
        return
    for name in dirs:
        yield from _bottom_up(share, _join(top, name), onerror)
    yield top, dirs, files
