"""Atomic outputs: a reader sees the old result or the new one, never a half-written one.

A directory is built beside its final name as `.NAME.PID-XXXX.tmp` and swapped in at the end.
On Linux the swap is one `renameat2(RENAME_EXCHANGE)`, so NAME holds the previous directory or
the new one at every instant. Elsewhere (or on a filesystem that cannot exchange) it is two
renames, NAME -> `.NAME.old-PID-XXXX` then tmp -> NAME; a crash between them leaves NAME
missing, and the next build or load puts the previous directory back. The pid in each name
tells debris of a killed build (pid gone) from the work of a live one, which is never touched.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import logging
import os
import re
import secrets
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

AT_FDCWD = -100
RENAME_EXCHANGE = 2


def _read_umask() -> int:
    """Read once, at import: setting it to read it is not safe once other threads write."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


UMASK = _read_umask()


def _mode_of_a_new(path: Path, mode: int) -> None:
    """mkstemp and mkdtemp make private files (0600, 0700); what we write is shared as
    open() and mkdir() would share it (say, an index built by root for a service user)."""
    os.chmod(path, mode & ~UMASK)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        _mode_of_a_new(Path(tmp), 0o666)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


@functools.cache
def _renameat2() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    function = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if function is not None:
        function.argtypes = [ctypes.c_int, ctypes.c_char_p] * 2 + [ctypes.c_uint]
        function.restype = ctypes.c_int
    return function


def exchange(first: Path, second: Path) -> None:
    """Swap two existing paths in one step. OSError ENOSYS where the C library cannot, EINVAL
    where the filesystem cannot."""
    renameat2 = _renameat2()
    if renameat2 is None:
        raise OSError(errno.ENOSYS, "renameat2 is not available", str(first))
    if renameat2(AT_FDCWD, os.fsencode(first), AT_FDCWD, os.fsencode(second), RENAME_EXCHANGE):
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(first), None, str(second))


def _leftovers(final: Path) -> Iterator[tuple[Path, str, int]]:
    """(path, "tmp" or "old", pid) of every entry beside `final` named as this module names."""
    pattern = re.compile(
        rf"\.{re.escape(final.name)}\.(?:(?P<tmp>\d+)-[a-z0-9_]+\.tmp|old-(?P<old>\d+)-[0-9a-f]+)"
    )
    for entry in final.parent.iterdir():
        match = pattern.fullmatch(entry.name)
        if match:
            kind = "tmp" if match["tmp"] else "old"
            yield entry, kind, int(match[kind])


def _alive(pid: int) -> bool:
    """Whether a process with this pid exists; where that cannot be asked, assume it does."""
    if os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, and someone else's
        pass
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def recover(final: str | Path) -> None:
    """If a crash between the two renames left `final` missing, put the previous one back."""
    final = Path(os.path.abspath(final))
    if os.path.lexists(final) or not final.parent.is_dir():
        return
    aside = [path for path, kind, pid in _leftovers(final) if kind == "old" and not _alive(pid)]
    if not aside:
        return
    previous = max(aside, key=lambda path: path.lstat().st_ctime)
    try:
        os.rename(previous, final)
    except OSError:
        if os.path.lexists(final):  # another process restored it, or a build just finished
            return
        raise
    log.warning("%s: restored from %s, left by an interrupted build", final, previous.name)


def clean_stale(final: Path) -> None:
    """Delete what killed builds left beside `final`: only names of our pattern, only when the
    pid in the name is gone, and a moved-aside previous directory only once `final` exists."""
    for path, kind, pid in _leftovers(final):
        if not _alive(pid) and (kind == "tmp" or os.path.lexists(final)):
            _remove(path)


def _swap_in(tmp: Path, final: Path) -> Path | None:
    """Put `tmp` at `final`; return where the previous `final` now is, if there was one."""
    if not os.path.lexists(final):
        os.rename(tmp, final)
        return None
    try:
        exchange(tmp, final)
        return tmp
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOSYS):
            raise
    aside = final.with_name(f".{final.name}.old-{os.getpid()}-{secrets.token_hex(4)}")
    os.rename(final, aside)
    try:
        os.rename(tmp, final)
    except BaseException:
        os.rename(aside, final)
        raise
    return aside


@contextmanager
def atomic_directory(
    final: str | Path, *, before_swap: Callable[[], None] = lambda: None
) -> Iterator[Path]:
    """Yield a temp directory beside `final`; on success it takes `final`'s place atomically.

    `before_swap` runs just before the swap and may refuse it by raising (the caller's last
    look at what is about to be replaced). The previous `final` is deleted only once the new
    one is in place.
    """
    final = Path(os.path.abspath(final))
    final.parent.mkdir(parents=True, exist_ok=True)
    recover(final)
    clean_stale(final)
    tmp = Path(
        tempfile.mkdtemp(prefix=f".{final.name}.{os.getpid()}-", suffix=".tmp", dir=final.parent)
    )
    try:
        _mode_of_a_new(tmp, 0o777)
        yield tmp
        before_swap()
        previous = _swap_in(tmp, final)
    except BaseException:
        _remove(tmp)
        raise
    if previous is not None:
        _remove(previous)
