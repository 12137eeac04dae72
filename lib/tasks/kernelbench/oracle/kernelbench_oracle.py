#!/usr/bin/env python3
"""The KernelBench reference oracle of libksearch (docs/tasks/kernelbench.md).

Runs one KernelBench problem file (class Model, get_inputs, get_init_inputs)
with PyTorch exactly as KernelBench's eval_kernel_against_ref prepares it, and
hands libksearch the inputs, the module's parameters and the reference outputs
of each correctness trial. Candidates are never run here: they stay native
kernels in libksearch's own worker processes.

  kernelbench_oracle.py --describe FILE
      prints one JSON object: the problem's constants, inputs, parameters and
      outputs (names, shapes), its source and SHA-256.
  kernelbench_oracle.py --serve --problem FILE --device cpu|cuda:N --cache-dir DIR
      speaks libksearch's framed worker protocol (frames of b"KSW1", a 32-bit
      little-endian length, one JSON message) on stdin/stdout; started once
      per run by the evaluator.

Trusted code: the problem file comes from the user's own KernelBench checkout.
"""
import ctypes
import hashlib
import inspect
import json
import os
import re
import struct
import sys
import threading
import time
import traceback

STATUS_INVALID_ARGUMENT = -1
STATUS_NOT_FOUND = -2
STATUS_INTERNAL = -99
KERNELBENCH_SEED = 42  # eval_kernel_against_ref's seed_num


class ProblemError(Exception):
    """A problem file that cannot be used; the message names it and why."""


_driver = None


def driver_api():
    """libcuda through ctypes, for the IPC handles of the oracle's tensors."""
    global _driver
    if _driver is None:
        _driver = ctypes.CDLL(os.environ.get("KSEARCH_LIBCUDA") or "libcuda.so.1")
    return _driver


def check_cu(cuda, result, what):
    if result != 0:
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(result, ctypes.byref(name))
        raise RuntimeError(f"{what}: {name.value.decode() if name.value else result}")


def import_torch():
    try:
        import torch  # noqa: F401
        return torch
    except Exception as e:  # ImportError, or a broken installation
        raise ImportError(
            f"PyTorch is not available to {sys.executable} (import torch failed: {e}); install it "
            f"(pip install torch, or apt install python3-torch) or set $KSEARCH_PYTHON to an interpreter "
            f"that has it") from e


# ---------------------------------------------------------------------------
# The problem file, prepared as KernelBench prepares it


def set_seed(torch, seed):
    # KernelBench's set_seed: the CPU generator and the current CUDA device's.
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(seed)


def sanitize(name, taken):
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not s or s[0].isdigit():
        s = "p_" + s
    base, i = s, 1
    while s in taken:
        s = f"{base}_{i}"
        i += 1
    taken.add(s)
    return s


class Problem:
    def __init__(self, torch, path):
        self.torch = torch
        self.path = os.path.abspath(path)
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ProblemError(f"cannot read {self.path}: {e.strerror}")
        self.sha256 = hashlib.sha256(data).hexdigest()
        self.source = data.decode("utf-8", errors="replace")
        self.context = {}
        try:
            code = compile(self.source, self.path, "exec")
        except SyntaxError as e:
            raise ProblemError(f"{self.path} is not valid Python: {e.msg} (line {e.lineno})")
        try:
            exec(code, self.context)
        except Exception as e:
            raise ProblemError(f"running {self.path} failed: {type(e).__name__}: {e}\n{traceback.format_exc(limit=-3)}")
        missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not callable(self.context.get(n))]
        if missing:
            raise ProblemError(f"{self.path} is not a KernelBench problem: it defines no {', '.join(missing)}")
        self.Model = self.context["Model"]
        self.get_inputs = self.context["get_inputs"]
        self.get_init_inputs = self.context["get_init_inputs"]

    def constants(self):
        """Module-level integer constants in file order (tuple entries as NAME_i): the task's dimensions."""
        out = []
        for name, v in self.context.items():
            if name.startswith("_") or isinstance(v, bool):
                continue
            if isinstance(v, int):
                out.append([name, v])
            elif isinstance(v, tuple) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
                out.extend([f"{name}_{i}", x] for i, x in enumerate(v))
        return out

    def process(self, x, device):
        # KernelBench's _process_input_tensor: every tensor cast to fp32, then moved.
        torch = self.torch
        if isinstance(x, torch.Tensor):
            return x.to(dtype=torch.float32).to(device=device)
        return x

    def build_model(self, device):
        """The reference module: set_seed(42), init inputs, set_seed(42), Model(*init), as KernelBench."""
        torch = self.torch
        call = "get_init_inputs()"
        try:
            set_seed(torch, KERNELBENCH_SEED)
            init = [self.process(x, device) for x in self.get_init_inputs()]
            call = "Model(*get_init_inputs())"
            with torch.no_grad():
                set_seed(torch, KERNELBENCH_SEED)
                model = self.Model(*init)
            model = model.to(device=device, dtype=torch.float32)
        except Exception as e:
            raise ProblemError(f"{self.path}: {call} failed: {type(e).__name__}: {e}")
        return model

    def init_literal(self):
        """get_init_inputs() after set_seed(42) as a Python literal, which a
        ModelNew in another process is built from; None when it holds
        anything else (a tensor, a NaN), which no literal can carry."""
        import ast
        set_seed(self.torch, KERNELBENCH_SEED)
        try:
            init = list(self.get_init_inputs())
            text = repr(init)
            return text if ast.literal_eval(text) == init else None
        except Exception:
            return None

    def trial_seeds(self, n):
        # run_and_check_correctness: torch.manual_seed(seed), then one randint per trial.
        torch = self.torch
        torch.manual_seed(KERNELBENCH_SEED)
        return [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(n)]

    def inputs(self, seed, device):
        torch = self.torch
        try:
            set_seed(torch, seed)
            return [self.process(x, device) for x in self.get_inputs()]
        except Exception as e:
            raise ProblemError(f"{self.path}: get_inputs() failed: {type(e).__name__}: {e}")

    def forward(self, model, inputs, seed):
        torch = self.torch
        try:
            with torch.no_grad():
                set_seed(torch, seed)
                out = model(*inputs)
        except Exception as e:
            raise ProblemError(f"{self.path}: Model.forward failed: {type(e).__name__}: {e}")
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        for i, o in enumerate(outs):
            if not isinstance(o, torch.Tensor):
                raise ProblemError(f"{self.path}: forward() output {i} is a {type(o).__name__}, not a tensor")
        return [o.to(dtype=torch.float32).contiguous() for o in outs]

    def input_names(self, model, count):
        try:
            params = list(inspect.signature(model.forward).parameters.values())
        except (TypeError, ValueError):
            params = []
        names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(names) < count:
            return [f"input{i}" for i in range(count)]
        return names[:count]

    def signature(self, model, inputs, outputs):
        """Names and shapes in the task's argument order: inputs, state_dict entries, outputs."""
        torch = self.torch
        taken = set()
        tensors = []
        for name, x in zip(self.input_names(model, len(inputs)), inputs):
            shape = list(x.shape) if isinstance(x, torch.Tensor) else []
            tensors.append({"name": sanitize(name, taken), "shape": shape, "scalar": not isinstance(x, torch.Tensor)})
        params = []
        for key, t in model.state_dict().items():
            params.append({"name": sanitize(key, taken), "state_name": key, "shape": list(t.shape)})
        outs = []
        single = len(outputs) == 1
        for i, o in enumerate(outputs):
            outs.append({"name": sanitize("output" if single else f"output{i}", taken), "shape": list(o.shape)})
        return tensors, params, outs


def describe(path):
    torch = import_torch()
    p = Problem(torch, path)
    model = inputs = outputs = None
    # Shapes without the work: on PyTorch's meta device where it can run the
    # module, else for real on the CPU.
    if hasattr(torch.device("meta"), "__enter__"):
        try:
            with torch.device("meta"):
                model = p.build_model("meta")
                inputs = p.inputs(KERNELBENCH_SEED, "meta")
                outputs = p.forward(model, inputs, KERNELBENCH_SEED)
        except Exception:
            model = inputs = outputs = None
    if outputs is None:
        model = p.build_model("cpu")
        inputs = p.inputs(KERNELBENCH_SEED, "cpu")
        outputs = p.forward(model, inputs, KERNELBENCH_SEED)
    ins, params, outs = p.signature(model, inputs, outputs)
    return {"problem": p.path, "sha256": p.sha256, "source": p.source, "constants": p.constants(),
            "inputs": ins, "parameters": params, "outputs": outs, "torch": torch.__version__,
            "init_inputs": p.init_literal()}


# ---------------------------------------------------------------------------
# The framed protocol


class Channel:
    def __init__(self):
        # The protocol moves off descriptors 0 and 1, so whatever the problem
        # file prints goes to stderr and cannot corrupt a frame.
        self.inp = os.fdopen(os.dup(0), "rb", buffering=0)
        self.out = os.fdopen(os.dup(1), "wb", buffering=0)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(2, 1)
        sys.stdout = sys.stderr

    def _read_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.inp.read(n - len(buf))
            if not chunk:
                return None if not buf else b""
            buf += chunk
        return buf

    def read(self):
        header = self._read_exact(8)
        if header is None:
            return None
        if len(header) < 8 or header[:4] != b"KSW1":
            raise RuntimeError("oracle protocol: bad frame")
        (n,) = struct.unpack("<I", header[4:])
        payload = self._read_exact(n)
        if payload is None or len(payload) < n:
            raise RuntimeError("oracle protocol: stream ended inside a frame")
        return json.loads(payload)

    def send(self, msg):
        payload = json.dumps(msg, separators=(",", ":")).encode()
        try:
            self.out.write(b"KSW1" + struct.pack("<I", len(payload)) + payload)
        except BrokenPipeError:
            os._exit(0)


def watch_parent():
    # Leave when the evaluator dies, even while PyTorch is busy.
    parent = os.getppid()

    def loop():
        while True:
            time.sleep(0.1)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=loop, daemon=True).start()


class Oracle:
    def __init__(self, torch, problem, device, cache_dir):
        self.torch = torch
        self.p = problem
        self.device = device
        self.cache_dir = cache_dir
        self.model = problem.build_model(device)
        self.seeds = {}  # seed index -> (trial seed, [tensors in task order], n_inputs)

    def device_name(self):
        if self.device.startswith("cuda"):
            return self.torch.cuda.get_device_name(self.torch.device(self.device))
        return "cpu"

    def sync(self):
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize(self.torch.device(self.device))

    def seed_data(self, index):
        torch = self.torch
        if index not in self.seeds:
            trial_seed = self.p.trial_seeds(index + 1)[index]
            inputs = self.p.inputs(trial_seed, self.device)
            outputs = self.p.forward(self.model, inputs, trial_seed)
            tensors = []
            for x in inputs:
                if isinstance(x, torch.Tensor):
                    tensors.append(x.contiguous())
                else:  # a Python scalar becomes a one-element tensor
                    tensors.append(torch.tensor(float(x), dtype=torch.float32, device=self.device))
            tensors += [t.detach().to(dtype=torch.float32).contiguous() for t in self.model.state_dict().values()]
            n_in = len(tensors)
            tensors += outputs
            self.sync()
            self.seeds[index] = (trial_seed, tensors, n_in)
        return self.seeds[index]

    def export_ipc(self, t):
        # The driver's own handle of the allocation that holds the tensor, and
        # the tensor's offset in it. (PyTorch's _share_cuda_ handle carries a
        # header of its own and is not a bare cudaIpcMemHandle_t.)
        cuda = driver_api()
        ptr = t.data_ptr()
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        check_cu(cuda, cuda.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr)),
                 "cuMemGetAddressRange")
        handle = (ctypes.c_char * 64)()
        check_cu(cuda, cuda.cuIpcGetMemHandle(handle, ctypes.c_uint64(base.value)), "cuIpcGetMemHandle")
        return {"handover": "cuda_ipc", "handle": bytes(handle).hex(), "offset": ptr - base.value,
                "bytes": t.numel() * t.element_size()}

    def export_file(self, key, index, tensors):
        path = os.path.join(self.cache_dir, f"{key}-seed{index}.bin")
        sizes = [t.numel() * t.element_size() for t in tensors]
        # Handover files are gigabytes for the large problems: only the current
        # problem's stay (one oracle runs at a time per evaluator).
        for name in os.listdir(self.cache_dir):
            if name.endswith(".bin") and not name.startswith(key):
                try:
                    os.remove(os.path.join(self.cache_dir, name))
                except OSError:
                    pass
        if not (os.path.exists(path) and os.path.getsize(path) == sum(sizes)):
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                for t in tensors:
                    f.write(t.detach().cpu().contiguous().numpy().tobytes())
            os.replace(tmp, path)
        out, offset = [], 0
        for n in sizes:
            out.append({"handover": "file", "path": path, "offset": offset, "bytes": n})
            offset += n
        return out

    def prepare(self, msg):
        handover = msg.get("handover", "file")
        if handover == "cuda_ipc" and not self.device.startswith("cuda"):
            raise ProblemError("cuda_ipc handover needs the oracle on a GPU")
        key = f"{self.p.sha256[:24]}"
        seeds = []
        for s in msg["seeds"]:
            index = int(s["index"])
            trial_seed, tensors, n_in = self.seed_data(index)
            if handover == "cuda_ipc":
                ext = [self.export_ipc(t) for t in tensors]
            else:
                ext = self.export_file(key, index, tensors)
            seeds.append({"index": index, "seed": s["seed"], "trial_seed": trial_seed,
                          "inputs": ext[:n_in], "outputs": ext[n_in:]})
        return {"event": "prepared", "workload": msg.get("workload", ""), "handover": handover, "seeds": seeds,
                "device": self.device_name(), "torch": self.torch.__version__}

    def time_module(self, module, inputs, warmup, trials, discard):
        """KernelBench's time_execution_with_cuda_event: warm-up, then per trial an L2 thrash and CUDA events."""
        torch = self.torch
        times = []
        with torch.no_grad():
            for _ in range(warmup):
                module(*inputs)
                self.sync()
            if self.device.startswith("cuda"):
                dev = torch.device(self.device)
                torch.cuda.empty_cache()
                for i in range(trials + discard):
                    torch.cuda.synchronize(dev)
                    start = torch.cuda.Event(enable_timing=True)
                    end = torch.cuda.Event(enable_timing=True)
                    dummy = torch.empty((32, 1024, 1024), dtype=torch.int64, device=dev)
                    dummy.fill_(42)
                    start.record()
                    module(*inputs)
                    end.record()
                    torch.cuda.synchronize(dev)
                    if i >= discard:
                        times.append(start.elapsed_time(end))
                    del dummy
            else:
                for i in range(trials + discard):
                    t0 = time.perf_counter()
                    module(*inputs)
                    if i >= discard:
                        times.append((time.perf_counter() - t0) * 1e3)
        n = len(times)
        mean = sum(times) / n
        std = (sum((t - mean) ** 2 for t in times) / (n - 1)) ** 0.5 if n > 1 else 0.0
        # The median and 10th percentile beside KernelBench's mean: the
        # evaluator compares a candidate's latency with the same statistic.
        ordered = sorted(times)

        def quantile(q):
            pos = q * (n - 1)
            i = int(pos)
            return ordered[i] if i + 1 >= n else ordered[i] + (pos - i) * (ordered[i + 1] - ordered[i])
        return {"mean_ms": mean, "std_ms": std, "min_ms": ordered[0], "max_ms": ordered[-1], "trials": n,
                "median_ms": quantile(0.5), "p10_ms": quantile(0.1)}

    def baseline(self, msg):
        torch = self.torch
        warmup, trials = int(msg.get("warmup", 5)), int(msg.get("trials", 100))
        cache = os.path.join(self.cache_dir, "baselines")
        os.makedirs(cache, exist_ok=True)
        ident = f"{self.device_name()}|{torch.__version__}|{self.p.sha256}|{warmup}|{trials}|quantiles"
        path = os.path.join(cache, hashlib.sha256(ident.encode()).hexdigest()[:32] + ".json")
        result = {}
        if os.path.exists(path):
            try:
                with open(path) as f:
                    result = json.load(f)
            except (OSError, ValueError):
                result = {}
        wanted = [m for m in msg.get("modes", ["eager", "compile"]) if m not in result]
        for mode in wanted:
            inputs = self.p.inputs(KERNELBENCH_SEED, self.device)
            model = self.p.build_model(self.device)
            try:
                if mode == "compile":
                    if not hasattr(torch, "compile"):
                        raise RuntimeError(f"torch.compile needs PyTorch 2 (this is {torch.__version__})")
                    model = torch.compile(model, backend="inductor", mode="default")
                result[mode] = self.time_module(model, inputs, warmup, trials, 1)
            except Exception as e:
                result[mode] = {"error": f"{type(e).__name__}: {e}"}
            result[mode]["measured"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if wanted:
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                json.dump(result, f)
            os.replace(tmp, path)
        return {"event": "baseline", "device": self.device_name(), "torch": torch.__version__,
                "cached": not wanted, **{k: v for k, v in result.items() if k in msg.get("modes", result.keys())}}


def serve(args):
    ch = Channel()
    watch_parent()
    try:
        torch = import_torch()
    except ImportError as e:
        ch.send({"event": "fatal", "status": STATUS_NOT_FOUND, "message": str(e)})
        return 2
    try:
        device = args["--device"]
        if os.environ.get("KSEARCH_KERNELBENCH_ALLOW_TF32") == "0":
            # PyTorch's default runs cuDNN convolutions in TF32 (and KernelBench keeps it);
            # off, the reference is true FP32 like libksearch's native references.
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
        if device.startswith("cuda"):
            if not torch.cuda.is_available():
                raise ProblemError(f"PyTorch {torch.__version__} sees no CUDA device (asked for {device})")
            torch.cuda.set_device(torch.device(device))
        cache_dir = os.path.join(args["--cache-dir"], "kernelbench")
        os.makedirs(cache_dir, exist_ok=True)
        oracle = Oracle(torch, Problem(torch, args["--problem"]), device, cache_dir)
    except ProblemError as e:
        ch.send({"event": "fatal", "status": STATUS_INVALID_ARGUMENT, "message": f"KernelBench problem: {e}"})
        return 2
    ch.send({"event": "hello", "role": "oracle", "pid": os.getpid(), "torch": torch.__version__,
             "device": oracle.device_name()})
    while True:
        msg = ch.read()
        if msg is None:
            return 0
        op = msg.get("op")
        try:
            if op == "exit":
                return 0
            if op == "ping":
                ch.send({"event": "pong", "pid": os.getpid()})
            elif op == "prepare":
                ch.send(oracle.prepare(msg))
            elif op == "baseline":
                ch.send(oracle.baseline(msg))
            else:
                ch.send({"event": "error", "status": STATUS_INVALID_ARGUMENT, "message": f"unknown op \"{op}\""})
        except ProblemError as e:
            ch.send({"event": "error", "status": STATUS_INVALID_ARGUMENT, "message": f"KernelBench problem: {e}"})
        except Exception as e:
            ch.send({"event": "error", "status": STATUS_INTERNAL,
                     "message": f"KernelBench oracle: {type(e).__name__}: {e}\n{traceback.format_exc(limit=-4)}"})


def main(argv):
    if len(argv) == 2 and argv[0] == "--describe":
        try:
            d = describe(argv[1])
        except ImportError as e:
            print(json.dumps({"error": str(e), "status": "no_pytorch"}))
            return 3
        except ProblemError as e:
            print(json.dumps({"error": str(e), "status": "bad_problem"}))
            return 4
        print(json.dumps(d))
        return 0
    if argv and argv[0] == "--serve":
        args = {}
        it = iter(argv[1:])
        for k in it:
            args[k] = next(it, "")
        if not all(k in args for k in ("--problem", "--device", "--cache-dir")):
            print("usage: kernelbench_oracle.py --serve --problem FILE --device cpu|cuda:N --cache-dir DIR",
                  file=sys.stderr)
            return 2
        return serve(args)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
