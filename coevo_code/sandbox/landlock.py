"""Landlock: one ruleset per cell role (program, test), built once by the zygote and entered by
every cell of that role: read/execute beneath the Python installation and system libraries, write
only beneath the role's own work dir, no TCP, and (ABI 6) signals and abstract sockets scoped."""

import ctypes
import os
import stat

from .seccomp import syscall

NR_CREATE, NR_ADD, NR_RESTRICT = 444, 445, 446
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1, 2, 4, 8
FS_ALL_ABI1 = (1 << 13) - 1
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi():
    try:
        return syscall(NR_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except OSError:
        return 0


def build(abi, read_paths, write_dirs, dev_files, execute=True):
    """A ruleset handling every file-system right this ABI knows (plus TCP bind/connect from ABI 4
    and signal/abstract-socket scoping from ABI 6), allowing read/execute beneath ``read_paths``,
    everything beneath ``write_dirs`` and read/write on ``dev_files``; with ``execute`` False, no
file may be executed at all (a compiled C++ program, started from its memfd). Returns (fd,
notes)."""
    fs = FS_ALL_ABI1
    if abi >= 2:
        fs |= FS_REFER
    if abi >= 3:
        fs |= FS_TRUNCATE
    if abi >= 5:
        fs |= FS_IOCTL_DEV
    attr = _RulesetAttr(fs, (NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else 0,
                        (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    fd = syscall(NR_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    file_rights = (FS_EXECUTE if execute else 0) | FS_READ_FILE
    read_rights = file_rights | FS_READ_DIR
    rw_file = FS_READ_FILE | FS_WRITE_FILE | (FS_TRUNCATE if abi >= 3 else 0)
    notes = []

    def add(path, rights):
        try:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if not stat.S_ISDIR(os.fstat(pfd).st_mode):  # a file takes only file rights
                rights &= (FS_EXECUTE | FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE
                           | FS_IOCTL_DEV)
            rule = _PathBeneath(rights & fs, pfd)
            syscall(NR_ADD, ctypes.c_int(fd), ctypes.c_int(1), ctypes.byref(rule),
                    ctypes.c_uint32(0))
            notes.append(path)
        finally:
            os.close(pfd)

    for p in read_paths:
        add(p, read_rights)
    for p in write_dirs:
        add(p, fs if execute else fs & ~FS_EXECUTE)
    for p in dev_files:
        add(p, rw_file)
    return fd, notes
