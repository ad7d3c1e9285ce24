"""`tf.gfile` of TensorFlow 1.x on the local file system (rill has no other file systems):
TensorFlow's names over Python's os, shutil and glob, with TensorFlow's errors (NotFoundError
for a missing path, AlreadyExistsError where TensorFlow refuses to overwrite).
"""

from __future__ import annotations

import glob as _glob
import os
import shutil
from typing import NamedTuple

from rill.graph.errors import AlreadyExistsError, NotFoundError

__all__ = [
    "GFile", "FastGFile", "Open", "Exists", "MakeDirs", "MkDir", "Glob", "ListDirectory",
    "Remove", "Rename", "Copy", "DeleteRecursively", "IsDirectory", "Stat", "Walk",
]  # fmt: skip


class GFile:
    """A file object (`tf.gfile.GFile(name, mode)`): read, write, readline(s), iteration,
    seek/tell, flush, close, and `size()`. Text modes read and write str, "b" modes bytes."""

    def __init__(self, name, mode: str = "r"):
        self.name = os.fspath(name)
        self.mode = mode
        try:
            self._f = open(self.name, mode)  # noqa: SIM115 - closed by close() / __exit__
        except FileNotFoundError as e:
            raise NotFoundError(f"{self.name}; No such file or directory") from e
        except IsADirectoryError as e:
            raise NotFoundError(f"{self.name} is a directory") from e

    def read(self, n: int = -1):
        return self._f.read(n)

    def readline(self):
        return self._f.readline()

    def readlines(self):
        return self._f.readlines()

    def write(self, data) -> None:
        self._f.write(data)

    def seek(self, offset: int, whence: int = 0):
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def size(self) -> int:
        return os.path.getsize(self.name)

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    def __iter__(self):
        return iter(self._f)

    def __next__(self):
        return next(self._f)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


FastGFile = GFile
Open = GFile


def Exists(filename) -> bool:
    return os.path.exists(os.fspath(filename))


def IsDirectory(dirname) -> bool:
    return os.path.isdir(os.fspath(dirname))


def MakeDirs(dirname) -> None:
    """Creates `dirname` and its missing parents (no error if it exists)."""
    os.makedirs(os.fspath(dirname), exist_ok=True)


def MkDir(dirname) -> None:
    """Creates `dirname`; its parent must exist (NotFoundError otherwise)."""
    try:
        os.mkdir(os.fspath(dirname))
    except FileExistsError:
        pass
    except FileNotFoundError as e:
        raise NotFoundError(f"{dirname}: parent directory does not exist") from e


def Glob(filename) -> list[str]:
    """The paths matching the pattern `filename` (a str or a list of patterns)."""
    patterns = [filename] if isinstance(filename, (str, os.PathLike)) else list(filename)
    out: list[str] = []
    for p in patterns:
        out.extend(sorted(_glob.glob(os.fspath(p))))
    return out


def ListDirectory(dirname) -> list[str]:
    """The entries of `dirname` (names only, no "." or "..")."""
    try:
        return sorted(os.listdir(os.fspath(dirname)))
    except FileNotFoundError as e:
        raise NotFoundError(f"Could not find directory {dirname}") from e


def Remove(filename) -> None:
    try:
        os.remove(os.fspath(filename))
    except FileNotFoundError as e:
        raise NotFoundError(f"{filename}; No such file or directory") from e


def DeleteRecursively(dirname) -> None:
    path = os.fspath(dirname)
    if not os.path.exists(path):
        raise NotFoundError(f"{path}; No such file or directory")
    if os.path.isdir(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


def Rename(oldname, newname, overwrite: bool = False) -> None:
    """Renames `oldname`; an existing `newname` is an AlreadyExistsError unless overwrite."""
    old, new = os.fspath(oldname), os.fspath(newname)
    if not os.path.exists(old):
        raise NotFoundError(f"{old}; No such file or directory")
    if os.path.exists(new) and not overwrite:
        raise AlreadyExistsError(f"file already exists: {new}")
    os.replace(old, new)


def Copy(oldpath, newpath, overwrite: bool = False) -> None:
    """Copies a file; an existing `newpath` is an AlreadyExistsError unless overwrite."""
    old, new = os.fspath(oldpath), os.fspath(newpath)
    if not os.path.exists(old):
        raise NotFoundError(f"{old}; No such file or directory")
    if os.path.exists(new) and not overwrite:
        raise AlreadyExistsError(f"file already exists: {new}")
    shutil.copyfile(old, new)


class FileStatistics(NamedTuple):
    length: int
    mtime_nsec: int
    is_directory: bool


def Stat(filename) -> FileStatistics:
    try:
        st = os.stat(os.fspath(filename))
    except FileNotFoundError as e:
        raise NotFoundError(f"{filename}; No such file or directory") from e
    return FileStatistics(st.st_size, st.st_mtime_ns, os.path.isdir(os.fspath(filename)))


def Walk(top, in_order: bool = True):
    """(dirname, subdirs, files) for each directory under `top`, top-down if in_order."""
    yield from os.walk(os.fspath(top), topdown=in_order)
