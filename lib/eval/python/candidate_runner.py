# The process a Python candidate (language `triton` or `python`) runs in.
#
# The run worker starts it through the same spawning code as a host C++
# candidate's process (eval/host/candidate_process.hpp): its own user and PID
# namespaces, a fresh /proc, no descriptors but its output pipe and the
# socket on descriptor 3, a memory limit, and a seccomp filter it installs
# itself once PyTorch (and Triton) are imported, before any candidate code
# exists in it. It speaks the worker's KSC1 protocol: the worker asks, this
# process answers with the request's token, and between requests the whole
# process is stopped. Inputs, outputs, the reference, the checks and (on the
# host backend) the clock stay in the worker; this process sees only the
# blocks it is bound to. docs/python-candidates.md describes the contract.
#
# Nothing this process says is a verdict (docs/security.md, "Who says
# what"). The load request runs before any candidate code exists here (the
# imports, the sources compiled, the static checks, an extension's build),
# so its answer is the runner's own and the worker takes a compile error
# from it. From the import request on, the candidate's code shares this
# interpreter and could write any answer: every later answer is data (an
# error's text, a note on what a call returned, GPU times the worker
# bounds), and the worker decides each status from what it observes itself.
#
# With `--zygote` it is instead the worker's long-lived Python: it imports
# PyTorch (and Triton) once, never runs candidate code, and forks one process
# per candidate (zygote_main below), which then sets up its own namespaces as
# the spawning code would have and serves as above. A candidate so pays for
# a fork, not for an interpreter and its imports.
#
# It is embedded in the library and run with `python -I -B -c`: nothing here
# may depend on files beside it.

import array
import ast
import ctypes
import functools
import inspect
import json
import linecache
import mmap
import os
import socket
import struct
import sys
import time
import traceback
import types

MAGIC = 0x3143534B  # "KSC1"
OP_LOAD, OP_MAP, OP_BIND, OP_RUN, OP_MAP_CUDA, OP_IMPORT = 1, 2, 3, 4, 5, 6
OP_HELLO, OP_OK, OP_ERROR, OP_DONE = 16, 17, 18, 19
OP_FORK = 32  # worker -> zygote: start a candidate's process
HEADER = struct.Struct("<IIQ")
MAX_PACKET = 128 * 1024
EXIT_SETUP_FAILED, EXIT_HIDE_FAILED = 125, 124  # candidate_process.cpp's kExitSetupFailed, kExitHideFailed
EXIT_RUNNER_FAILED = 70  # the runner itself failed; its traceback is on its output
SYNC = None  # synchronizes the whole GPU (Candidate.load)


class Failed(Exception):
    """A failure this process reports: its words and the candidate's frames.
    No status: the worker decides that (see the top of this file). `kind`
    is said only in the load request's answer, before any candidate code
    exists here: "compile" (the sources) or "environment" (the interpreter);
    `memory` marks words about memory, a hint the worker checks against the
    memory it saw the process take."""

    def __init__(self, message, log="", kind="compile", memory=False):
        super().__init__(message)
        self.message, self.log, self.kind, self.memory = message, log, kind, memory


class Misfit(Exception):
    """A call that cannot fit the task's outputs (its module's parameters
    have other shapes): the call is skipped, the outputs keep the worker's
    poison, and the words go with the answer as a note (Candidate.returned)."""


def read_str(payload, pos):
    (n,) = struct.unpack_from("<I", payload, pos)
    pos += 4
    return payload[pos:pos + n], pos + n


class Channel:
    def __init__(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0, 3)

    def receive(self):
        msg, anc, _, _ = self.sock.recvmsg(MAX_PACKET, socket.CMSG_SPACE(4 * 4))
        fds = []
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                a = array.array("i")
                a.frombytes(data[:len(data) - len(data) % a.itemsize])
                fds.extend(a)
        if not msg:
            os._exit(0)  # the worker hung up
        if len(msg) < HEADER.size:
            os._exit(3)
        magic, op, token = HEADER.unpack_from(msg)
        if magic != MAGIC:
            os._exit(3)
        return op, token, msg[HEADER.size:], fds

    def answer(self, op, token, text="", fds=()):
        body = text.encode("utf-8", "replace")[:16 * 1024]
        extra = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        try:
            self.sock.sendmsg([HEADER.pack(MAGIC, op, token) + struct.pack("<I", len(body)) + body], extra)
        except OSError:
            os._exit(0)  # the worker is gone


# ---------------------------------------------------------------------------
# Confinement

def install_seccomp(program, syscall_nr):
    """Installs the worker's filter (raw sock_filter entries) on every thread."""
    if not program:
        return False
    libc = ctypes.CDLL(None, use_errno=True)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buf = ctypes.create_string_buffer(program, len(program))
    prog = SockFprog(len(program) // 8, ctypes.addressof(buf))
    PR_SET_NO_NEW_PRIVS, SECCOMP_SET_MODE_FILTER = 38, 1
    # TSYNC: every thread PyTorch started. SPEC_ALLOW: kernels that tie the
    # speculative store bypass mitigation to seccomp do not force it here.
    TSYNC, SPEC_ALLOW = 1, 4
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    libc.syscall.restype = ctypes.c_long
    for flags in (TSYNC | SPEC_ALLOW, TSYNC):
        r = libc.syscall(ctypes.c_long(syscall_nr), ctypes.c_ulong(SECCOMP_SET_MODE_FILTER), ctypes.c_ulong(flags),
                         ctypes.byref(prog))
        if r == 0:
            return True
    return False


# ---------------------------------------------------------------------------
# The zygote: one per worker, forking each candidate's process

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
MS_RDONLY = 1
MS_REC, MS_PRIVATE = 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4


def libc_call(name, *args):
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{name}: {os.strerror(e)}")


def mount(source, target, fstype, flags, data=None):
    enc = (lambda v: None if v is None else v.encode())
    libc_call("mount", enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))


def write_proc_file(path, text, dir_fd):
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def mount_step(step):
    """One step of eval/isolation/layers.hpp (MountStep), as its C++
    executor (apply_mounts) carries it out; returns the layer's name."""
    op, target, data, flags = step["op"], step["target"], step["data"], step["flags"]
    if op == "tmpfs":
        try:
            mount("tmpfs", target, "tmpfs", flags, data)
        except FileNotFoundError:
            if step["absent_ok"]:
                return ""
            raise
        if step["enter"]:
            os.chdir(target)
        return ""
    if op == "proc":
        try:
            mount("proc", target, "proc", flags)
            return "+proc"
        except OSError:
            mount("tmpfs", target, "tmpfs", flags | MS_RDONLY, data)
            return "+noproc"
    if op == "cover_processes":
        own = str(os.getpid())
        for name in os.listdir("/proc"):
            if not name.isdigit() or name == own:
                continue
            try:
                tasks = [t for t in os.listdir(f"/proc/{name}/task") if t != name]
            except OSError:
                tasks = []
            for entry in [name] + tasks:
                try:
                    mount("tmpfs", f"/proc/{entry}", "tmpfs", flags, data)
                except FileNotFoundError:
                    pass
        return "+ownproc"
    raise OSError(0, f"unknown mount step {op!r}")


def enter_own_namespaces(spec):
    """A forked candidate's layers, as the spawning code gives a started one:
    its own mount namespace, where it carries out the worker's mount steps
    (spec["mounts"], eval/isolation/layers.hpp decides them: a private /tmp
    and /dev/shm, a /proc of its own PID namespace or one showing only
    itself, the evaluator's folders covered), then a user namespace where it
    is an ordinary user with no capabilities. Returns the layers' names;
    exits when a layer fails."""
    isolation = "process" + ("+pidns" if spec["pid_namespace"] else "+userns")
    try:
        # Its own entry in today's /proc, where its user namespace's maps are
        # written once /proc is replaced.
        self_dir = os.open("/proc/self", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        libc_call("unshare", CLONE_NEWNS)
        mount(None, "/", None, MS_REC | MS_PRIVATE)
    except OSError:
        os._exit(EXIT_SETUP_FAILED)
    try:
        for step in spec["mounts"]:
            isolation += mount_step(step)
    except OSError:
        os._exit(EXIT_HIDE_FAILED)
    try:
        libc_call("unshare", CLONE_NEWUSER)
        write_proc_file("setgroups", "deny", self_dir)
        write_proc_file("uid_map", "1000 0 1", self_dir)
        write_proc_file("gid_map", "1000 0 1", self_dir)
        os.close(self_dir)

        class CapHeader(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class CapData(ctypes.Structure):
            _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                        ("inheritable", ctypes.c_uint32)]

        data = (CapData * 2)()
        libc_call("capset", ctypes.byref(CapHeader(0x20080522, 0)), data)
    except OSError:
        os._exit(EXIT_SETUP_FAILED)
    return isolation + "+forked"


def close_from(low):
    """Closes every descriptor from `low` up (close_range, else one by one)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    SYS_CLOSE_RANGE = 436  # the same number on every architecture
    if libc.syscall(ctypes.c_long(SYS_CLOSE_RANGE), ctypes.c_uint(low), ctypes.c_uint(0xFFFFFFFF),
                    ctypes.c_uint(0)) != 0:
        import resource
        os.closerange(low, min(max(resource.getrlimit(resource.RLIMIT_NOFILE)), 1 << 20))


def become_candidate(spec, sock, out, go):
    """The forked candidate process, once the worker has adopted it: its
    layers, its descriptors and environment, then the candidate's protocol."""
    try:
        if os.read(go, 1) != b"g":  # the zygote is gone: so is the worker
            os._exit(EXIT_SETUP_FAILED)
        os.close(go)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        if (libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0) != 0  # its parent now is the worker
                or libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0):  # the zygote is not; its /proc files must be its own
            os._exit(EXIT_SETUP_FAILED)
        os.setsid()
        isolation = enter_own_namespaces(spec)
        if spec["rlimit_as"]:
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (spec["rlimit_as"], spec["rlimit_as"]))
        os.environ.clear()
        os.environ.update(e.split("=", 1) for e in spec["env"] if "=" in e)
        import tempfile
        tempfile.tempdir = None
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.dup2(sock, 3)
        close_from(4)
    except Exception:
        os._exit(EXIT_SETUP_FAILED)
    serve(isolation)
    os._exit(0)


def zygote_main(imports):
    channel = Channel()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no candidate reads or traces it
    # NumPy's OpenBLAS (PyTorch imports NumPy) starts a thread per core when
    # it loads, and a process with threads must not fork. (A forked candidate
    # gets the environment the worker gives it, with the same setting:
    # python_program.cpp.)
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    imported = []
    for name in imports:
        try:
            __import__(name)
            imported.append(name)
        except Exception:
            pass  # the candidate's load says what is missing, in its own words
    channel.answer(OP_HELLO, 0, "+".join(imported))
    while True:
        op, token, payload, fds = channel.receive()
        if op != OP_FORK or len(fds) != 2:
            os._exit(3)
        sock, out = fds
        try:
            spec = json.loads(read_str(payload, 0)[0])
            channel.answer(OP_OK, token, fork_candidate(spec, sock, out))
        except Exception as e:
            channel.answer(OP_ERROR, token, describe_exception(e))
        finally:
            os.close(sock)
            os.close(out)


def idle_init():
    """Process 1 of a candidate's PID namespace, so that the candidate is not
    its init: an init drops the default-action signals it sends itself, and
    abort() then ends in SIGSEGV, where the evaluator should see SIGABRT. It
    holds no descriptor, reaps what is orphaned there, and exits once the
    candidate's process (2) is gone (the evaluator reaps that one)."""
    import resource
    os.closerange(0, min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 1 << 16))
    seen, started = False, time.monotonic()
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        try:
            os.kill(2, 0)
            seen = True
        except ProcessLookupError:
            if seen or time.monotonic() - started > 60:  # gone, or never made
                os._exit(0)
        except PermissionError:
            seen = True
        time.sleep(0.1 if seen else 0.005)


def fork_candidate(spec, sock, out):
    """Forks through an intermediate process that exits at once, so the
    candidate's process is adopted by the worker (its subreaper for this
    moment): the worker stops, continues and reaps it as a child of its own.
    In a PID namespace of its own, an idle init (idle_init) comes first and
    is adopted too. Returns "PID" or "PID INIT_PID"."""
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:  # a fork would leave a child with locks no thread will release
        raise RuntimeError(f"the zygote runs {threads} threads; it forks only with one")
    sys.stdout.flush()
    sys.stderr.flush()
    go_r, go_w = os.pipe()
    pid_r, pid_w = os.pipe()
    try:
        middle = os.fork()
    except OSError:
        for fd in (go_r, go_w, pid_r, pid_w):
            os.close(fd)
        raise
    if middle == 0:
        try:
            os.close(go_w)
            os.close(pid_r)
            init = ""
            if spec["pid_namespace"]:
                libc_call("unshare", CLONE_NEWPID)
                init = os.fork()
                if init == 0:
                    try:
                        idle_init()
                    finally:
                        os._exit(0)
                init = f" {init}"
            pid = os.fork()
            if pid == 0:
                os.close(pid_w)
                try:
                    become_candidate(spec, sock, out, go_r)
                except BaseException:  # noqa: B902  (said on its output, which the worker reports)
                    traceback.print_exc()
                os._exit(EXIT_RUNNER_FAILED)
            os.write(pid_w, f"{pid}{init}".encode())
        finally:
            os._exit(0)
    os.close(go_r)
    os.close(pid_w)
    os.waitpid(middle, 0)
    with os.fdopen(pid_r, "rb") as f:
        text = f.read()
    try:
        if not text:
            raise RuntimeError("the candidate's process could not be forked")
        os.write(go_w, b"g")
    finally:
        os.close(go_w)
    return text.decode()


# ---------------------------------------------------------------------------
# The candidate's module

class SourceFinder:
    """Imports the solution's other files (`import helpers` for helpers.py) from memory."""

    def __init__(self, sources):
        self.sources = sources  # module name -> (file name, text)

    def find_spec(self, name, path=None, target=None):
        import importlib.util
        if name not in self.sources:
            return None
        return importlib.util.spec_from_loader(name, self, origin=self.sources[name][0])

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        filename, text = self.sources[module.__name__]
        module.__file__ = filename
        exec(compile_source(text, filename), module.__dict__)


def compile_source(text, filename):
    # Triton reads a kernel's source through inspect/linecache: keep it there.
    lines = text.splitlines(True)
    linecache.cache[filename] = (len(text), None, lines, filename)
    try:
        return compile(text, filename, "exec", dont_inherit=True)
    except SyntaxError as e:
        where = f"{e.filename or filename} line {e.lineno}" if e.lineno else (e.filename or filename)
        line = (e.text or "").rstrip()
        raise Failed(f"SyntaxError in {where}: {e.msg}" + (f"\n    {line}" if line else ""))


def top_level_binds(tree, name):
    """Whether a module's top level may bind `name`: a def, class, import or
    assignment outside function and class bodies, or anything that binds
    names the parser cannot see (a star import, globals(), exec, ...)."""
    dynamic = {"globals", "vars", "setattr", "exec", "eval", "__import__", "locals"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in dynamic:
            return True
        if isinstance(node, ast.Attribute) and node.attr in ("__dict__", "modules", "__setattr__"):
            return True
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "__getattr__":
            return True
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == name:
                return True
            continue  # their bodies bind their own names
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id == name:
            return True
        if isinstance(node, ast.ExceptHandler) and node.name == name:
            return True
        stack.extend(ast.iter_child_nodes(node))
    return False


def check_statically(code_text, path, entry, own_modules, counts):
    """The checks the load request makes without running the module: its
    entry point is bound at its top level (a class there derives from
    something, a function there takes as many parameters as a fixed style
    passes), and the modules its top level imports (outside try blocks)
    exist. Failed names what is wrong. `counts`: the task's (inputs, outputs)."""
    tree = ast.parse(code_text, path)
    name = entry.get("class") or entry.get("function")
    if name and not top_level_binds(tree, name):
        what = "class" if "class" in entry else ""
        raise Failed(f"{path} defines no {what + ' ' if what else ''}`{name}`: the entry point for this task is "
                     f"{entry.get('signature', name if what else name + '(...)')}")
    defs = [n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.name == name]
    if len(defs) == 1 and isinstance(defs[0], ast.ClassDef) and "class" in entry and \
            all(isinstance(b, ast.Name) and b.id == "object" for b in defs[0].bases) and not defs[0].keywords:
        raise Failed(f"{path} has a class that is not a torch.nn.Module: `{name}`: the entry point for this task "
                     f"is {entry.get('signature', name)}")
    if len(defs) == 1 and isinstance(defs[0], ast.FunctionDef) and "dps" in entry and \
            not defs[0].decorator_list:
        a = defs[0].args
        check_counts(len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs), a.vararg is not None, *counts,
                     bool(entry["dps"]))
    import importlib.util
    for node in tree.body:
        if isinstance(node, ast.Import):
            tops = [(a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops = [node.module.split(".")[0]]
        else:
            continue
        for top in tops:
            if top in own_modules or top in sys.builtin_module_names:
                continue
            try:
                found = importlib.util.find_spec(top) is not None
            except (ImportError, ValueError):
                found = True  # said when the module runs, in its own words
            if not found:
                raise Failed(f"ImportError while importing {path}: ModuleNotFoundError: No module named {top!r} "
                             f"(line {node.lineno}; this Python has no such module)")


def build_extension(text, path, prebuilt):
    """An imported C++/CUDA Solution's module (generated by the library, so
    its text is the evaluator's own): built here, in the load request, before
    any of its code runs. `prebuilt`, a descriptor of the library the
    evaluator built before (its bytes), spares the build. Returns the module's namespace
    and its plan, which start() imports."""
    ns = {"__name__": "__ksearch_build__", "__file__": path}
    exec(compile(text, path, "exec", dont_inherit=True), ns)
    plan = ns["_plan"]()
    if prebuilt is not None:
        os.makedirs(plan["folder"], exist_ok=True)
        with open(plan["library"], "wb") as dst:
            dst.write(prebuilt)
        return ns, plan, False
    try:
        plan = ns["_compile"](plan)
    except ImportError as e:
        raise Failed(f"ImportError while importing {path}: {e}")
    return ns, plan, True


def candidate_frames(tb_text, files):
    """The traceback's lines that point into the candidate's files, and the exception line."""
    keep, lines = [], tb_text.rstrip().splitlines()
    for i, line in enumerate(lines):
        if any(f'File "{f}"' in line for f in files):
            keep.append(line)
            if i + 1 < len(lines) and not lines[i + 1].lstrip().startswith("File "):
                keep.append(lines[i + 1])
    if lines:
        keep.append(lines[-1])
    return "\n".join(keep)


def describe_exception(e):
    text = f"{type(e).__name__}: {e}".strip()
    return text if len(text) < 2000 else text[:2000] + " ..."


def is_out_of_memory(e):
    if isinstance(e, MemoryError):
        return True
    text = str(e)
    return isinstance(e, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text.lower())


class Candidate:
    def __init__(self, spec):
        self.spec = spec
        self.language = spec["language"]
        self.device = spec["device"]
        self.entry = spec["entry"]
        self.files = [s["path"] for s in spec["sources"]]
        self.function = None
        self.adapter = None
        self.model_class = None  # KernelBench's ModelNew, when the task builds one
        self.model = None
        self.model_key = None
        self.parameters = []  # the task's inputs that are the module's state_dict entries
        self.loaded = False  # ... copied into it since the last bind
        self.blocks = {}  # serial -> mmap
        self.bound = None
        self.kept = None  # what the last timed call returned
        self.note = ""  # ... when it did not fit the outputs, why
        self.flush_buf = None
        self.call_args = None  # the convention's arguments of the last checked call
        self.build_s = None  # an imported C++/CUDA Solution's module: the time its build took
        self.extension = None  # ... its namespace, build plan, and whether it was built here

    def load(self, prebuilt=None):
        """The load request: everything before the candidate's code runs.
        PyTorch (and Triton) imported, the sources compiled, the checks that
        need no candidate code (the entry point's name bound, the modules
        imported at the top exist), an imported C++/CUDA Solution built,
        then the seccomp filter. Its answer is this runner's own words."""
        global torch
        # Triton's kernels and PyTorch's extension builds go to this process's
        # private /tmp, which ends with it: nothing a candidate writes there
        # reaches a later one.
        tmp = os.environ.get("TMPDIR") or "/tmp"
        os.environ["TRITON_CACHE_DIR"] = os.path.join(tmp, "triton")
        os.environ["TORCH_EXTENSIONS_DIR"] = os.path.join(tmp, "torch_extensions")
        try:
            import torch  # noqa: F401  (the environment's, probed before the run)
        except Exception as e:
            raise Failed(f"PyTorch cannot be imported by {sys.executable}: {describe_exception(e)}", kind="environment")
        # The toolchain a kept extension library must have been built with.
        self.identity = f"python {sys.version.split()[0]} torch {torch.__version__} cuda {torch.version.cuda}"
        if self.language == "triton":
            try:
                import triton  # noqa: F401
            except Exception as e:
                raise Failed(f"Triton cannot be imported by {sys.executable}: {describe_exception(e)}",
                             kind="environment")
        if self.device == "cuda":
            global SYNC
            # The whole device, by the C function: never a candidate's patch.
            SYNC = getattr(torch._C, "_cuda_synchronize", None) or torch.cuda.synchronize
            torch.cuda.init()
            torch.zeros(1, device="cuda")  # the primary context, current on this thread
            self.cuda = CudaMemory()
            # The timer exists before any candidate code does, and keeps its
            # own references: patching torch.cuda.Event, its methods,
            # synchronize or current_stream later changes nothing here.
            self.timer = Timer()
        self.sources = {}
        for s in self.spec["sources"]:
            name = os.path.splitext(os.path.basename(s["path"]))[0]
            self.sources[name] = (s["path"], s["content"])
        self.main_path = self.entry.get("module") or self.spec["sources"][0]["path"]
        main = next((s for s in self.spec["sources"] if s["path"] == self.main_path), None)
        if main is None:
            raise Failed(f"the solution has no file {self.main_path}, which holds its entry point")
        self.code = compile_source(main["content"], main["path"])
        for name, (path, text) in self.sources.items():
            if path != self.main_path:
                compile_source(text, path)
        own = set(self.sources) | set(self.entry.get("modules", {}))
        if self.entry.get("extension"):
            started = time.monotonic()
            if self.spec.get("prebuilt_identity") != self.identity:
                prebuilt = None  # another toolchain's: built again
            self.extension = build_extension(main["content"], main["path"], prebuilt)
            if self.extension[2]:
                self.build_s = time.monotonic() - started
        else:
            check_statically(main["content"], self.main_path, self.entry, own,
                             (self.spec.get("n_inputs", 0), self.spec.get("n_outputs", 0)))
        # Everything the candidate can reach from here on is confined.
        self.filtered = install_seccomp(self.spec.get("seccomp", b""), self.spec.get("seccomp_nr", 0))
        if self.spec.get("seccomp") and not self.filtered:
            raise Failed("the candidate's process could not install its seccomp filter, so it does not run (the "
                         "evaluator's confinement is not optional)", kind="environment")

    def start(self):
        """The import request: the candidate's module runs, then its entry
        point is looked up. Candidate code from here on."""
        main_path = self.main_path
        if self.extension is not None:
            ns, plan, _ = self.extension
            try:
                _, self.function = ns["_load"](plan)
            except BaseException as e:  # noqa: B902  (its initialisers are the candidate's code)
                raise Failed(f"ImportError while importing {main_path}: {describe_exception(e)}")
            return
        # The task's own modules (GPUMode's `task`), then the solution's other files.
        importable = {name: (f"<the task's {name} module>", text) for name, text in self.entry.get("modules", {}).items()}
        importable.update({k: v for k, v in self.sources.items() if v[0] != main_path})
        sys.meta_path.insert(0, SourceFinder(importable))
        name = os.path.splitext(os.path.basename(main_path))[0]
        module = types.ModuleType(name)
        module.__file__ = main_path
        sys.modules[name] = module
        try:
            exec(self.code, module.__dict__)
        except Failed:
            raise
        except ImportError as e:
            raise Failed(f"ImportError while importing {main_path}: {describe_exception(e)}",
                         candidate_frames(traceback.format_exc(), self.files))
        except BaseException as e:  # noqa: B902  (SystemExit too: a module must not exit)
            if is_out_of_memory(e):
                raise Failed(f"out of memory while importing {main_path}: {describe_exception(e)}", memory=True)
            raise Failed(f"{main_path} raised an exception when imported: {describe_exception(e)}",
                         candidate_frames(traceback.format_exc(), self.files))
        if "class" in self.entry:
            # KernelBench's convention: the module is built by the evaluator (bind).
            name = self.entry["class"]
            cls = getattr(module, name, None)
            if not isinstance(cls, type) or not issubclass(cls, torch.nn.Module):
                what = "defines no class" if not isinstance(cls, type) else "has a class that is not a torch.nn.Module:"
                raise Failed(f"{main_path} {what} `{name}`: the entry point for this task is "
                             f"{self.entry.get('signature', name)}")
            self.model_class = cls
            # KernelBench runs every call of the module under torch.no_grad().
            torch.set_grad_enabled(False)
            return
        fn = self.entry["function"]
        target = getattr(module, fn, None)
        if target is None or not callable(target):
            what = "defines no" if target is None else "has a non-callable"
            raise Failed(f"{main_path} {what} `{fn}`: the entry point for this task is "
                         f"{self.entry.get('signature', fn + '(...)')}")
        self.function = target
        if self.entry.get("adapter"):
            ns = {"__name__": "ksearch_task_adapter"}
            exec(compile(self.entry["adapter"], "<the task's calling convention>", "exec"), ns)
            self.adapter = ns["ks_args"]

    # -- tensors ------------------------------------------------------------

    def map_block(self, serial, nbytes, fd):
        size = os.fstat(fd).st_size
        self.blocks[serial] = (mmap.mmap(fd, size), nbytes)
        os.close(fd)

    def view(self, t):
        dtype = DTYPES[t["dtype"]]()
        shape = tuple(t["shape"])
        if t["bytes"] == 0:
            return torch.empty(shape, dtype=dtype, device=self.device)
        if "cuda" in t or "ipc" in t:
            flat = self.cuda.tensor(t.get("cuda", t.get("ipc")), t["offset"], t["bytes"])
        else:
            mm, _ = self.blocks[t["serial"]]
            flat = torch.frombuffer(mm, dtype=torch.uint8, count=t["bytes"], offset=t["offset"])
        return flat.view(dtype).view(shape)

    def bind(self, b):
        self.kept = None
        self.call_args = None
        if self.device == "cuda":
            self.cuda.keep_only({t.get("cuda", t.get("ipc")) for t in b["tensors"] if "cuda" in t or "ipc" in t})
        live = set(b["blocks"])
        for serial in [s for s in self.blocks if s not in live]:
            del self.blocks[serial]
        inputs, outputs, by_name = [], [], {}
        for t in b["tensors"]:
            if t.get("scalar"):
                kind = t["dtype"]
                v = bool(t["value"]) if kind == "bool" else float(t["value"]) if kind in FLOATS else int(t["value"])
            else:
                v = self.view(t)
            if t.get("output"):
                outputs.append((t["name"], v))
            else:
                inputs.append(v)
                by_name[t["name"]] = v
        self.outputs = outputs
        self.by_name = by_name  # the inputs, for a task's calling convention
        # The worker's buffers, which poisoning a returned tensor must not touch.
        self.buffers = [v for v in inputs if isinstance(v, torch.Tensor)] + [v for _, v in outputs]
        self.dims = b["dims"]
        self.dps = False
        self.args = inputs
        if self.model_class is not None:
            n = self.entry.get("inputs", len(inputs))
            self.build_model()
            self.args, self.parameters, self.loaded = inputs[:n], inputs[n:], False
        elif "dps" in self.entry:
            self.dps = bool(self.entry["dps"])
            check_parameter_count(self.function, len(inputs), len(outputs), self.dps)
        elif self.adapter is None:
            self.dps = takes_outputs(self.function, len(inputs), len(outputs))
        self.bound = True

    def build_model(self):
        """KernelBench's construction: set_seed(42), ModelNew(*init_inputs)
        under no_grad, then .to(device, float32); once per shape."""
        key = json.dumps(self.dims, sort_keys=True)
        if self.model is None or key != self.model_key:
            self.model = None
            init = eval(self.entry.get("init_inputs", "[]"), {"__builtins__": {}}, dict(self.dims))  # the task's
            seed = int(self.entry.get("seed", 42))
            try:
                torch.manual_seed(seed)
                if self.device == "cuda":
                    torch.cuda.manual_seed(seed)
                model = self.model_class(*init)
                model = model.to(device=self.device, dtype=torch.float32)
            except BaseException as e:  # noqa: B902
                if is_out_of_memory(e):
                    raise Failed(f"out of memory building {self.entry['class']}: {describe_exception(e)}", memory=True)
                raise Failed(f"{self.entry['class']}(*{init!r}) raised {describe_exception(e)}",
                             candidate_frames(traceback.format_exc(), self.files))
            self.model, self.model_key = model, key
            self.function = model

    def load_parameters(self):
        """A task whose parameters are its own inputs (native KernelBench
        tasks) copies them into the module's state_dict, in order, before
        each checked call: the inputs are new then."""
        parameters = self.parameters
        state = list(self.model.state_dict().items())
        if len(state) != len(parameters) or any(tuple(v.shape) != tuple(p.shape) for (_, v), p in zip(state, parameters)):
            want = ", ".join(f"{list(p.shape)}" for p in parameters)
            have = ", ".join(f"{k} {list(v.shape)}" for k, v in state)
            raise Misfit(f"{self.entry['class']}'s state_dict holds {len(state)} tensor(s) ({have or 'none'}); the "
                         f"task's module has {len(parameters)} ({want or 'none'}), which are copied into it in "
                         f"order: build the same parameters as Model, in the same order")
        for (_, v), p in zip(state, parameters):
            v.copy_(p)

    # -- running ------------------------------------------------------------

    def call(self, fresh):
        """A task's convention builds its arguments (GPUMode's `data`) anew for
        each checked call, whose inputs are new, and keeps them for the timed
        calls after it, which reuse those inputs: as GPUMode's harness hands
        one `data` to every timed call, so a submission's caches kept in it
        (packed weights in the weights dict) live as long as there."""
        if self.model_class is not None:
            if (fresh or not self.loaded) and self.entry.get("parameters") == "loaded":
                self.load_parameters()
                self.loaded = True
            return self.function(*self.args)
        if self.adapter is not None:
            if fresh or self.call_args is None:
                self.call_args = self.adapter(self.by_name, self.dims)
            return self.function(*self.call_args)
        if self.dps:
            return self.function(*self.args, *[v for _, v in self.outputs])
        return self.function(*self.args)

    def run(self, mode):
        """call: run and copy the result into the outputs (a checked call).
        timed-host: the same, then poison what it returned (a timed call on
        the host, all inside the worker's timed request). On the GPU,
        "batch N P F": timed calls back to back (timed_call), each result
        kept uncopied until the next call poisons it, the last one copied
        into the outputs before the answer (the worker checks them next,
        asking nothing more); poison: fill the kept result with the poison
        pattern, so a cached tensor returned again is poison."""
        if mode == "poison":
            if self.kept is not None:
                for v in self.kept:
                    self.poison_returned(v)
                if self.device == "cuda":
                    SYNC()
            return ""
        if mode.startswith("batch "):
            _, n, poison_between, flush_between = mode.split()
            times = [self.timed_call(poison_between == "1", flush_between == "1") for _ in range(int(n))]
            # The last result goes to the outputs in this request: no later
            # one gives a thread of the candidate's time to finish it. One
            # that does not fit leaves them poison, for the check to find.
            if self.kept is not None:
                self.copy_out(self.kept)
            elif self.note:
                for _, out in self.outputs:
                    poison(out)
                SYNC()
            escaped, self.timer.escaped = self.timer.escaped, 0
            note = f";note={self.note}" if self.note else ""
            return "ms=" + ",".join(repr(t) for t in times) + f";escaped={escaped}" + note
        try:
            result = self.call(fresh=mode == "call")
            if self.device == "cuda":
                SYNC()
        except Misfit as m:
            self.kept = None
            return f"note={m}"
        except Failed:
            raise
        except BaseException as e:  # noqa: B902  (SystemExit too: an entry point must return)
            raise self.call_failure(e)
        self.kept = None
        if not self.dps:
            values, note = self.returned(result)
            if values is None:
                return "note=" + note
            self.copy_out(values)
            if mode == "timed-host":
                # Inside the timed request: a tensor returned again is poison next time.
                for v in values:
                    self.poison_returned(v)
        return ""

    def call_failure(self, e):
        """What an exception of the entry point becomes."""
        if is_out_of_memory(e):
            return Failed(f"the candidate ran out of memory: {describe_exception(e)}", memory=True)
        return Failed(f"the candidate raised {describe_exception(e)}",
                      candidate_frames(traceback.format_exc(), self.files))

    def poison_returned(self, t):
        """Poisons a returned tensor unless it shares memory with the worker's
        buffers: honest code may return a view of an input, or the output."""
        start, end = storage_range(t)
        for v in self.buffers:
            b, e = storage_range(v)
            if b < end and start < e:
                return
        poison(t)

    def timed_call(self, poison_between, flush_between):
        """One call of a GPU batch, timed as GPUMode's harness does: CUDA
        events on the stream current at load around everything in the call,
        synchronized on both sides, with the Timer's own references. Work
        left running on other streams when the window closes is charged
        (Timer.measure). Between calls, untimed: the poison pattern in the
        outputs and in what the last call returned, and an L2 flush (a
        write over twice the cache)."""
        if poison_between:
            for _, out in self.outputs:
                poison(out)
            for v in self.kept or ():
                self.poison_returned(v)
        if flush_between:
            if self.flush_buf is None:
                l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
                self.flush_buf = torch.empty(max(2 * l2, 8 << 20), dtype=torch.uint8, device="cuda")
            self.flush_buf.fill_(len(self.flush_buf) & 255)
        try:
            ms, result = self.timer.measure(lambda: self.call(fresh=False))
        except Misfit as m:
            self.kept, self.note = None, str(m)
            return 0.0
        except Failed:
            raise
        except BaseException as e:  # noqa: B902  (SystemExit too: an entry point must return)
            raise self.call_failure(e)
        self.kept, self.note = None, ""
        if not self.dps:
            self.kept, self.note = self.returned(result)
        return ms

    def copy_out(self, values):
        for (_, out), value in zip(self.outputs, values):
            if value.data_ptr() != out.data_ptr():
                out.copy_(value)
        if self.device == "cuda":
            SYNC()

    def returned(self, result):
        """The outputs in what the entry returned, checked against the task's
        outputs: (values, "") or, when they do not fit, (None, why). A misfit
        is no exception: the outputs keep the worker's poison, its check
        finds them unwritten (incorrect), and the why is a note beside it."""
        n = len(self.outputs)
        if isinstance(result, dict):
            missing = [name for name, _ in self.outputs if name not in result]
            if missing:
                return None, f"the returned dict has no output {missing[0]!r}"
            values = [result[name] for name, _ in self.outputs]
        elif isinstance(result, (tuple, list)):
            values = list(result)
        else:
            values = [result]
        if len(values) != n:
            names = ", ".join(name for name, _ in self.outputs)
            return None, f"the entry point returned {len(values)} value(s); this task has {n} output(s) ({names})"
        cast = self.entry.get("cast_outputs", False)
        for (name, out), v in zip(self.outputs, values):
            if type(v) is not torch.Tensor:
                return None, (f"output {name!r}: the entry point returned a {type(v).__module__}."
                              f"{type(v).__qualname__}, not a torch.Tensor")
            if tuple(v.shape) != tuple(out.shape):
                return None, f"output {name!r} has shape {list(v.shape)}, expected {list(out.shape)}"
            if v.dtype != out.dtype and not cast:
                return None, f"output {name!r} has dtype {str(v.dtype)[6:]}, expected {str(out.dtype)[6:]}"
            if v.device.type != torch.device(self.device).type:
                return None, f"output {name!r} is on {v.device}, expected {self.device}"
        return values, ""


def storage_range(t):
    """The addresses of the memory a tensor's storage spans."""
    st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    start = st.data_ptr()
    return start, start + st.nbytes()


def poison(t):
    """The evaluator's poison pattern: every byte 0xFF (a NaN for floats, -1 for integers)."""
    if t.is_contiguous() and t.numel() > 0:
        t.view(-1).view(torch.uint8).fill_(255)
    elif t.dtype.is_floating_point:
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(-1 if t.dtype.is_signed else torch.iinfo(t.dtype).max)


def check_parameter_count(fn, n_in, n_out, dps):
    """FlashInfer-Bench's rule for a Solution that states its style: every
    parameter but *args and **kwargs counts, and must number the inputs (plus
    the outputs in destination-passing style); with *args, at most that many."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return
    variadic = any(p.kind == p.VAR_POSITIONAL for p in params)
    count = sum(p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params)
    check_counts(count, variadic, n_in, n_out, dps)


def check_counts(count, variadic, n_in, n_out, dps):
    expected = n_in + n_out if dps else n_in
    if count > expected or (count != expected and not variadic):
        style = "destination-passing" if dps else "value-returning"
        raise Failed(f"the entry point takes {count} parameter(s); in {style} style this task calls it with "
                     f"{expected} ({n_in} input(s){f' and {n_out} output(s)' if dps else ''})")


def takes_outputs(fn, n_in, n_out):
    """Destination-passing style: the entry takes the outputs after the inputs."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    params = list(params)
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return False
    required = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    return n_out > 0 and len(required) == n_in + n_out


FLOATS = ("f32", "f64", "f16", "bf16", "f8e4m3", "f8e5m2")
DTYPES = {
    "f32": lambda: torch.float32, "f64": lambda: torch.float64, "f16": lambda: torch.float16,
    "bf16": lambda: torch.bfloat16, "i32": lambda: torch.int32, "i64": lambda: torch.int64,
    "u8": lambda: torch.uint8, "i8": lambda: torch.int8, "i16": lambda: torch.int16, "bool": lambda: torch.bool,
    "f8e4m3": lambda: torch.float8_e4m3fn, "f8e5m2": lambda: torch.float8_e5m2,
}


class Timer:
    """GPU timing with references taken before any candidate code exists."""

    SLACK_MS, SLACK_FRACTION = 0.02, 0.05

    def __init__(self):
        # The C methods themselves, not torch.cuda's Python wrappers, which
        # look their callees up again at every call.
        base = torch._C._CudaEventBase
        self.sync = SYNC
        self.stream = torch.cuda.current_stream()
        self.elapsed = base.elapsed_time
        events = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
        self.start, self.end, self.idle = (functools.partial(base.record, e, self.stream) for e in events)
        self.events = events
        # What a device-wide synchronize adds between two events on an idle
        # device: the host's round trip (its median), subtracted from the
        # idle mark.
        gaps = []
        for _ in range(20):
            self.sync()
            self.start()
            self.sync()
            self.idle()
            self.sync()
            gaps.append(self.elapsed(events[0], events[2]))
        self.gap_ms = sorted(gaps)[len(gaps) // 2]
        self.escaped = 0  # timed calls that left work running on another stream

    def measure(self, call):
        """Times call() on the stream; returns (ms, its result). After the
        end event the whole device is synchronized and a third event marks
        when it went idle: a call that left work running on another stream
        (the community's stream-escape hack) is charged up to that mark."""
        self.sync()
        self.start()
        result = call()
        self.end()
        self.sync()
        self.idle()
        self.sync()
        ev_start, ev_end, ev_idle = self.events
        ms = self.elapsed(ev_start, ev_end)
        until_idle = self.elapsed(ev_start, ev_idle) - self.gap_ms
        if until_idle > ms + self.SLACK_MS + self.SLACK_FRACTION * ms:
            self.escaped += 1
            ms = until_idle
        return ms, result


class CudaMemory:
    """The worker's CUDA buffers, mapped here through the driver API: an
    allocation's POSIX descriptor (virtual memory management), sent to this
    process alone, or else its legacy IPC handle."""

    def __init__(self):
        lib = self.lib = ctypes.CDLL("libcuda.so.1")
        u64, size_t = ctypes.c_uint64, ctypes.c_size_t

        class Handle(ctypes.Structure):
            _fields_ = [("reserved", ctypes.c_char * 64)]

        class AccessDesc(ctypes.Structure):  # CUmemAccessDesc: location {type, id}, flags
            _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int), ("flags", ctypes.c_int)]

        self.Handle, self.AccessDesc = Handle, AccessDesc
        self.open = lib.cuIpcOpenMemHandle_v2
        self.open.argtypes = [ctypes.POINTER(u64), Handle, ctypes.c_uint]
        self.close = lib.cuIpcCloseMemHandle
        self.close.argtypes = [u64]
        self.calls = {}
        for name, args in (("cuMemImportFromShareableHandle", [ctypes.POINTER(u64), ctypes.c_void_p, ctypes.c_int]),
                           ("cuMemAddressReserve", [ctypes.POINTER(u64), size_t, size_t, u64, ctypes.c_ulonglong]),
                           ("cuMemMap", [u64, size_t, size_t, u64, ctypes.c_ulonglong]),
                           ("cuMemSetAccess", [u64, size_t, ctypes.POINTER(AccessDesc), size_t]),
                           ("cuMemUnmap", [u64, size_t]), ("cuMemAddressFree", [u64, size_t]),
                           ("cuMemRelease", [u64])):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.argtypes, fn.restype = args, ctypes.c_int
            self.calls[name] = fn
        self.mapped = {}  # serial (descriptor) or handle (hex) -> base address here, and what to release
        self.failed = {}  # serial -> why its descriptor could not be mapped

    def call(self, name, *args):
        fn = self.calls[name]
        r = fn(*args) if fn is not None else -1
        if r != 0:
            raise Failed(f"cannot map the evaluator's buffer ({name}: error {r})")

    def import_fd(self, serial, size, fd):
        """Maps allocation `serial` from its descriptor, which it closes."""
        try:
            if serial in self.mapped:
                return
            handle, ptr = ctypes.c_uint64(0), ctypes.c_uint64(0)
            self.call("cuMemImportFromShareableHandle", ctypes.byref(handle), ctypes.c_void_p(fd), 1)  # POSIX fd
            try:
                self.call("cuMemAddressReserve", ctypes.byref(ptr), size, 0, 0, 0)
                try:
                    self.call("cuMemMap", ptr.value, size, 0, handle.value, 0)
                    desc = self.AccessDesc(1, torch.cuda.current_device(), 3)  # this device, read-write
                    try:
                        self.call("cuMemSetAccess", ptr.value, size, ctypes.byref(desc), 1)
                    except Failed:
                        self.calls["cuMemUnmap"](ptr.value, size)
                        raise
                except Failed:
                    self.calls["cuMemAddressFree"](ptr.value, size)
                    raise
            except Failed:
                self.calls["cuMemRelease"](handle.value)
                raise
            self.mapped[serial] = (ptr.value, (ptr.value, size, handle.value))
        finally:
            os.close(fd)

    def tensor(self, key, offset, nbytes):
        if key not in self.mapped:
            if isinstance(key, int):
                raise self.failed.get(key) or Failed(f"the evaluator's buffer {key} was never sent")
            ptr = ctypes.c_uint64(0)
            h = self.Handle.from_buffer_copy(bytes.fromhex(key))
            r = self.open(ctypes.byref(ptr), h, 1)  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
            if r != 0:
                raise Failed(f"cannot map the evaluator's buffer (cuIpcOpenMemHandle: error {r})")
            self.mapped[key] = (ptr.value, None)
        base = self.mapped[key][0]

        class Cai:
            __cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (base + offset, False),
                                        "version": 2}

        return torch.as_tensor(Cai(), device="cuda")

    def keep_only(self, keys):
        for key in [k for k in self.mapped if k not in keys]:
            base, vmm = self.mapped.pop(key)
            if vmm is None:
                self.close(base)
            else:
                ptr, size, handle = vmm
                self.calls["cuMemUnmap"](ptr, size)
                self.calls["cuMemAddressFree"](ptr, size)
                self.calls["cuMemRelease"](handle)


def failure_text(f):
    return json.dumps({"kind": f.kind, "message": f.message, "log": f.log, "memory": f.memory})


def main():
    if "--zygote" in sys.argv[1:]:
        at = sys.argv.index("--zygote")
        zygote_main(sys.argv[at + 1].split(",") if at + 2 < len(sys.argv) else ["torch"])
    else:
        serve(sys.argv[-1] if len(sys.argv) > 1 else "process")


def serve(isolation):
    channel = Channel()
    channel.answer(OP_HELLO, 0, isolation + "+python")
    candidate = None
    while True:
        op, token, payload, fds = channel.receive()
        if op in (OP_MAP, OP_MAP_CUDA):
            serial, nbytes = struct.unpack_from("<QQ", payload)
            if len(fds) != 1 or candidate is None:
                os._exit(3)
            if op == OP_MAP:
                candidate.map_block(serial, nbytes, fds[0])
                continue
            try:
                candidate.cuda.import_fd(serial, nbytes, fds[0])
            except Failed as f:
                candidate.cuda.failed[serial] = f  # the tensor that names it fails in bind, with these words
            continue
        prebuilt = None  # a library the evaluator built before: read now, before any candidate code exists
        if op == OP_LOAD and fds:
            with os.fdopen(fds.pop(), "rb") as f:
                prebuilt = f.read()
        for fd in fds:
            os.close(fd)
        try:
            text, _ = read_str(payload, 0)
            if op == OP_LOAD:
                if candidate is not None:
                    raise Failed("a candidate is loaded already", kind="environment")
                spec = json.loads(text)
                spec["seccomp"] = bytes.fromhex(spec.get("seccomp", ""))
                candidate = Candidate(spec)
                candidate.load(prebuilt)
                answer, built = "", []
                if candidate.build_s is not None:
                    answer = json.dumps({"build_s": candidate.build_s, "identity": candidate.identity})
                    # What the build made, for the evaluator to keep: read
                    # before any candidate code exists here.
                    built = [os.open(candidate.extension[1]["library"], os.O_RDONLY | os.O_CLOEXEC)]
                channel.answer(OP_OK, token, answer, built)
                for fd in built:
                    os.close(fd)
            elif op == OP_IMPORT:
                candidate.start()
                channel.answer(OP_OK, token)
            elif op == OP_BIND:
                candidate.bind(json.loads(text))
                channel.answer(OP_OK, token)
            elif op == OP_RUN:
                channel.answer(OP_DONE, token, candidate.run(text.decode("ascii", "replace")))
            else:
                os._exit(3)
        except Failed as f:
            channel.answer(OP_ERROR, token, failure_text(f))
        except Exception as e:  # the runner's own fault (MemoryError included), said as such
            channel.answer(OP_ERROR, token, failure_text(
                Failed(f"the Python candidate runner failed: {describe_exception(e)}", traceback.format_exc(),
                       kind="environment", memory=isinstance(e, MemoryError))))
        except BaseException:  # noqa: B902  (KeyboardInterrupt and the like: never a silent exit)
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(EXIT_RUNNER_FAILED)

main()
