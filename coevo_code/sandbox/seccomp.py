"""seccomp, in two filters built once: a broad one the zygote installs on itself (every cell
inherits it) and a small one each cell adds (what the zygote itself still needs: new processes,
process groups, credentials; and resource calls aimed at other processes). Filters stack; a
syscall must pass both. Installing a filter costs about 2 us per instruction, so the per-cell one
is kept short. Also prctl, capabilities, and the other ctypes helpers the layers share."""

import ctypes
import errno
import os
import signal

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int


def trim_heap():
    """Hand the heap's free pages back to the kernel (glibc's ``malloc_trim``): what a process
    freed before it forks is then not copied into each child's page tables."""
    try:
        _libc.malloc_trim(0)
    except AttributeError:  # not glibc
        pass


def syscall(nr, *args):
    res = _libc.syscall(ctypes.c_long(nr), *args)
    if res < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return res


AUDIT_ARCH_X86_64 = 0xC000003E
SERVER_DENY = {
    # networking (the sandbox talks to the host over pipes)
    "socket": 41, "connect": 42, "accept": 43, "bind": 49, "listen": 50, "socketpair": 53,
    "accept4": 288,
    # running other programs
    "execve": 59, "execveat": 322,
    # other processes' memory and fds
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438,
    "kcmp": 312,
    # mounts and namespaces
    "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "unshare": 272, "setns": 308,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "mount_setattr": 442,
    # kernel attack surface
    "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 250, "add_key": 248,
    "request_key": 249, "personality": 135, "name_to_handle_at": 303, "open_by_handle_at": 304,
    "fanotify_init": 300, "lookup_dcookie": 212, "quotactl": 179, "iopl": 172, "ioperm": 173,
    "modify_ldt": 154, "memfd_secret": 447,
    # the machine
    "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313,
    "delete_module": 176, "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163,
    "syslog": 103, "settimeofday": 164, "clock_settime": 227, "adjtimex": 159,
    "clock_adjtime": 305, "sethostname": 170, "setdomainname": 171,
}
CHILD_DENY = {
    # new processes (clone is checked apart: threads stay allowed)
    "fork": 57, "vfork": 58, "pidfd_open": 434,
    # leaving the process group / session
    "setpgid": 109, "setsid": 112,
    # credentials
    "setuid": 105, "setgid": 106, "setreuid": 113, "setregid": 114, "setgroups": 116,
    "setresuid": 117, "setresgid": 119, "setfsuid": 122, "setfsgid": 123,
    # memory the address-space limit would not count, and state that outlives the cell:
    # anonymous memory files, System V shared memory, semaphores and queues, POSIX queues
    "memfd_create": 319, "shmget": 29, "shmat": 30, "shmctl": 31, "semget": 64, "semop": 65,
    "semctl": 66, "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71,
    "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243,
    "mq_notify": 244, "mq_getsetattr": 245,
}
# Calls that take a target process: allowed on the caller itself (pid 0) only, so that a cell can
# change neither its server's limits nor any other process's (syscall -> index of the pid arg).
CHILD_SELF_ONLY = {
    "prlimit64": (302, 0), "setpriority": (141, 1), "sched_setaffinity": (203, 0),
    "ioprio_set": (251, 1), "sched_setscheduler": (144, 0), "sched_setparam": (142, 0),
    "sched_setattr": (314, 0), "migrate_pages": (256, 0), "move_pages": (279, 0),
}
# Signals to other processes: denied by seccomp only where neither Landlock's signal scope nor a
# private uid keeps a cell from signalling its server.
CHILD_SIGNALS = {"kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129,
                 "rt_tgsigqueueinfo": 297, "pidfd_send_signal": 424}
NR_CLONE, NR_CLONE3 = 56, 435
CLONE_THREAD = 0x00010000

_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_JGE_K, _BPF_JSET_K, _BPF_RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE = 1, 36, 4


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def build_filter(denied, enosys=(), check_clone=False, self_only=()):
    """A BPF program: any architecture but x86_64 -> kill; x32 syscalls -> EPERM; ``enosys`` ->
    ENOSYS (clone3, so that the C library falls back to clone, whose flags a filter can read);
    ``denied`` -> EPERM; with ``check_clone``, clone without CLONE_THREAD -> EPERM (no new
    processes, threads still allowed); ``self_only`` ((nr, arg index) pairs) -> EPERM unless that
    argument (a pid, low 32 bits) is 0, i.e. the caller itself; anything else allowed."""
    denied = sorted(set(denied))
    enosys = sorted(set(enosys))
    ins = []

    def op(code, k, jt=0, jf=0):
        ins.append([code, jt, jf, k])

    op(_BPF_LD_W_ABS, 4)
    op(_BPF_JEQ_K, AUDIT_ARCH_X86_64, 1, 0)
    op(_BPF_RET_K, SECCOMP_RET_KILL_PROCESS)
    op(_BPF_LD_W_ABS, 0)
    jumps = []  # (instruction index, target label) patched below
    jumps.append((len(ins), "eperm"))
    op(_BPF_JGE_K, 0x40000000)
    for nr in enosys:
        jumps.append((len(ins), "enosys"))
        op(_BPF_JEQ_K, nr)
    if check_clone:
        jumps.append((len(ins), "clone"))
        op(_BPF_JEQ_K, NR_CLONE)
    for nr in denied:
        jumps.append((len(ins), "eperm"))
        op(_BPF_JEQ_K, nr)
    for nr, _ in self_only:
        jumps.append((len(ins), "self%d" % nr))
        op(_BPF_JEQ_K, nr)
    labels = {}
    op(_BPF_RET_K, SECCOMP_RET_ALLOW)
    labels["eperm"] = len(ins)
    op(_BPF_RET_K, SECCOMP_RET_ERRNO | errno.EPERM)
    labels["enosys"] = len(ins)
    op(_BPF_RET_K, SECCOMP_RET_ERRNO | errno.ENOSYS)
    labels["clone"] = len(ins)
    op(_BPF_LD_W_ABS, 16)  # low 32 bits of args[0] (little endian): clone's flags
    op(_BPF_JSET_K, CLONE_THREAD, 0, 1)
    op(_BPF_RET_K, SECCOMP_RET_ALLOW)
    op(_BPF_RET_K, SECCOMP_RET_ERRNO | errno.EPERM)
    for nr, arg in self_only:
        labels["self%d" % nr] = len(ins)
        op(_BPF_LD_W_ABS, 16 + 8 * arg)  # low 32 bits of the pid argument
        op(_BPF_JEQ_K, 0, 0, 1)
        op(_BPF_RET_K, SECCOMP_RET_ALLOW)
        op(_BPF_RET_K, SECCOMP_RET_ERRNO | errno.EPERM)
    for at, label in jumps:
        ins[at][1] = labels[label] - at - 1  # jump if true
        assert 0 <= ins[at][1] < 256
    arr = (_SockFilter * len(ins))(*[_SockFilter(c, jt, jf, k) for c, jt, jf, k in ins])
    prog = _SockFprog(len(ins), ctypes.cast(arr, ctypes.POINTER(_SockFilter)))
    # arr is kept alive; the prctl arguments are built once and reused by every cell (ctypes
    # objects made after a fork cost more than the call; unsigned longs, as prctl reads them)
    zero = ctypes.c_ulong(0)
    args = (ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(prog),
            zero, zero)
    return prog, arr, None, args


def child_filter(deny_signals):
    return build_filter(list(CHILD_DENY.values()) + (
        list(CHILD_SIGNALS.values()) if deny_signals else []), check_clone=True,
        self_only=list(CHILD_SELF_ONLY.values()))


def server_filter():
    return build_filter(SERVER_DENY.values(), enosys=[NR_CLONE3])


EXEC = {"execve": 59, "execveat": 322}


def native_server_filter():
    """The native zygote's own filter: the judge's, less exec (its cells start the compiler or
    the compiled program) and ``socketpair`` (the JVM's file channels make one pair of
    connected, nameless sockets; no socket that reaches anything can be made)."""
    return build_filter([nr for name, nr in SERVER_DENY.items()
                         if name not in EXEC and name != "socketpair"], enosys=[NR_CLONE3])


def native_run_filter(deny_signals, deny_execve):
    """A compiled program's cell: the Python program cell's filter (no new processes...), and
    with ``deny_execve`` no ``execve`` of a path either (a C++ binary is started with
    ``execveat`` on its memfd; Landlock lets it execute no file)."""
    return build_filter(list(CHILD_DENY.values()) + (
        list(CHILD_SIGNALS.values()) if deny_signals else []) + (
        [EXEC["execve"]] if deny_execve else []), check_clone=True,
        self_only=list(CHILD_SELF_ONLY.values()))


COMPILE_ALLOWED = ("fork", "vfork")


def compile_filter(deny_signals):
    """A compile's cell: the program cell's filter less the denial of new processes (the
    compiler's driver forks and executes its passes); credentials, sessions, shared memory and
    the other processes' limits stay denied."""
    return build_filter([nr for name, nr in CHILD_DENY.items() if name not in COMPILE_ALLOWED]
                        + (list(CHILD_SIGNALS.values()) if deny_signals else []),
                        self_only=list(CHILD_SELF_ONLY.values()))


def prctl(option, arg2=0, arg3=0, arg4=0, arg5=0):
    res = _libc.prctl(option, ctypes.c_ulong(arg2) if isinstance(arg2, int) else arg2,
                      ctypes.c_ulong(arg3), ctypes.c_ulong(arg4), ctypes.c_ulong(arg5))
    if res != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


PDEATHSIG_ARGS = (ctypes.c_int(PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGKILL),
                  ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
NODUMP_ARGS = (ctypes.c_int(PR_SET_DUMPABLE), ctypes.c_ulong(0), ctypes.c_ulong(0),
               ctypes.c_ulong(0), ctypes.c_ulong(0))


def raw_prctl(args):
    """prctl with prebuilt arguments (cheap in a forked cell); raises OSError on failure."""
    if _libc.prctl(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def install(prog):
    """Needs PR_SET_NO_NEW_PRIVS set first (or CAP_SYS_ADMIN)."""
    raw_prctl(prog[3])


_NR_CAPSET = 126
_CAP_HEADER = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
_CAP_DATA = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: all empty (x2 words)
_CAPSET_ARGS = (ctypes.c_long(_NR_CAPSET), ctypes.byref(_CAP_HEADER), ctypes.byref(_CAP_DATA))


def drop_capabilities():
    """capset(2) with empty effective, permitted and inheritable sets. Arguments are built once:
    making ctypes objects in every forked cell costs more than the call."""
    if _libc.syscall(*_CAPSET_ARGS) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


# fork(2) through PyDLL keeps the GIL held across the call, as os.fork() does, but skips the
# interpreter's after-fork reinitialisation and the os.register_at_fork callbacks (about 0.5 ms of
# a cell's CPU here). That is safe only because the zygote forks its cells from its one and only
# thread; the C library's own atfork handlers (numpy's BLAS) still run. The cell reseeds random
# and numpy itself.
try:
    _pyfork = ctypes.PyDLL(None, use_errno=True).fork
    _pyfork.restype = ctypes.c_int
    _pyfork.argtypes = []
except (OSError, AttributeError):
    _pyfork = None


def fast_fork():
    import threading
    if _pyfork is None or threading.active_count() > 1:
        return os.fork()
    pid = _pyfork()
    if pid < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return pid
