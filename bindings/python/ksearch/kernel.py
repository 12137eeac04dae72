"""Found kernels the host launches (ks_kernel_*): load into the CUDA context
current on this thread, then launch on the host's stream with its buffers.

    k = ksearch.Kernel.load(result=res)          # or run_dir=, solution_path= + task=
    k.launch(dims={"R": 4096, "C": 1024}, tensors={"x": x, "y": y}, stream=torch.cuda.current_stream())

Tensors are device pointers (int), (pointer, bytes) pairs, or objects with
data_ptr() (PyTorch) or __cuda_array_interface__ (CuPy, Numba); streams are
a CUstream (int) or an object with .cuda_stream (PyTorch) or .ptr (CuPy).
The current context is the caller's: PyTorch and CuPy make their device's
primary context current once they have used it.
"""

from __future__ import annotations

import ctypes
import json
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ._lib import OwnedHandle, abi, c, check, take_string, text, to_bytes
from .options import KernelLoadOptions, _Keep

__all__ = ["Kernel", "TensorInfo"]

TensorArg = Union[int, Tuple[int, int], Any]


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    is_output: bool


def _pointer(name: str, t: TensorArg) -> Tuple[int, int]:
    if isinstance(t, bool):
        raise TypeError(f"tensor {name!r} must be a device pointer or a tensor, not bool")
    if isinstance(t, int):
        return t, 0
    if isinstance(t, tuple):
        if len(t) == 2 and all(isinstance(x, int) for x in t):
            return t[0], t[1]
        raise TypeError(f"tensor {name!r}: a tuple must be (pointer, bytes)")
    # Kernels index dense row-major buffers: a strided view (x.t(), x[:, :k])
    # would pass the size check and be read wrongly, so it is refused.
    if hasattr(t, "data_ptr") and hasattr(t, "element_size") and hasattr(t, "numel"):
        if hasattr(t, "is_contiguous") and not t.is_contiguous():
            raise ValueError(f"tensor {name!r} is not contiguous; pass .contiguous()")
        return int(t.data_ptr()), int(t.element_size()) * int(t.numel())
    cai = getattr(t, "__cuda_array_interface__", None)
    if cai is not None:
        shape = [int(d) for d in cai["shape"]]
        itemsize = int(cai["typestr"][2:])
        strides = cai.get("strides")
        if strides is not None:
            dense: List[int] = []
            step = itemsize
            for d in reversed(shape):
                dense.insert(0, step)
                step *= d
            if any(d > 1 and int(st) != want for d, st, want in zip(shape, strides, dense)):
                raise ValueError(f"tensor {name!r} is not C-contiguous (strides {tuple(strides)})")
        n = 1
        for d in shape:
            n *= d
        return int(cai["data"][0]), n * itemsize
    raise TypeError(f"tensor {name!r}: a device pointer (int), (pointer, bytes), or a tensor with data_ptr() "
                    f"or __cuda_array_interface__, not {type(t).__name__}")


def _stream(s: Any) -> Optional[int]:
    if s is None:
        return None
    if isinstance(s, int):
        return s
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(s, attr, None)
        if isinstance(v, int):
            return v
    raise TypeError(f"stream must be a CUstream (int) or a stream object with .cuda_stream or .ptr, "
                    f"not {type(s).__name__}")


class Kernel(OwnedHandle):
    """A found kernel, compiled and (unless load_module=False) loaded. close()
    releases the modules (after the stream's work with them is done)."""

    _destroy = "ks_kernel_destroy"

    def __init__(self, handle: ctypes.c_void_p):
        self._handle: Optional[ctypes.c_void_p] = handle

    @classmethod
    def load(cls, options: Optional[KernelLoadOptions] = None, **fields: Any) -> "Kernel":
        """Compiles the solution (every parameter set it uses) and loads it;
        `options` or KernelLoadOptions fields as keywords (result=Result)."""
        from .search import Result
        opts = options.copy() if options is not None else KernelLoadOptions()
        assert isinstance(opts, KernelLoadOptions)
        for k, v in fields.items():
            setattr(opts, k, v)
        keep = _Keep()
        s = opts._c_defaults()
        opts._fill(s, keep, None, "")
        if opts.result is not None:
            if not isinstance(opts.result, Result):
                raise TypeError(f"result must be a ksearch.Result, not {type(opts.result).__name__}")
            if not opts.result._handle:
                raise ValueError("this Result is closed")
            s.result = opts.result._handle
        h = ctypes.c_void_p()
        check(c().ks_kernel_load(ctypes.byref(s), ctypes.byref(h)))
        return cls(h)

    def _args(self, keep: _Keep, dims: Mapping[str, int], tensors: Optional[Mapping[str, TensorArg]],
              scalars: Optional[Mapping[str, float]], stream: Any, workload: Optional[str]) -> Any:
        a = abi.ks_kernel_launch_args()
        check(c().ks_kernel_launch_args_init(ctypes.byref(a), abi.KS_KERNEL_LAUNCH_ARGS_VERSION))
        d = keep((abi.ks_kernel_dim * max(1, len(dims)))())
        for i, (k, n) in enumerate(dims.items()):
            if isinstance(n, bool) or not isinstance(n, int):
                raise TypeError(f"dimension {k!r} must be an int, not {type(n).__name__}")
            d[i].name, d[i].value = keep(to_bytes(k, "dimension name")), n
        a.dims, a.dim_count = d, len(dims)
        tensors = tensors or {}
        t = keep((abi.ks_kernel_tensor * max(1, len(tensors)))())
        for i, (k, arg) in enumerate(tensors.items()):
            ptr, nbytes = _pointer(k, arg)
            t[i].name, t[i].device_ptr, t[i].bytes = keep(to_bytes(k, "tensor name")), ptr, nbytes
        a.tensors, a.tensor_count = t, len(tensors)
        scalars = scalars or {}
        sc = keep((abi.ks_kernel_scalar * max(1, len(scalars)))())
        for i, (k, x) in enumerate(scalars.items()):
            sc[i].name, sc[i].value = keep(to_bytes(k, "scalar name")), float(x)
        a.scalars, a.scalar_count = sc, len(scalars)
        a.stream = _stream(stream)
        a.workload = keep(to_bytes(workload, "workload"))
        return a

    def launch(self, dims: Mapping[str, int], tensors: Mapping[str, TensorArg], *,
               scalars: Optional[Mapping[str, float]] = None, stream: Any = None,
               workload: Optional[str] = None) -> None:
        """Enqueues the plan on `stream` (asynchronous, like a kernel launch)."""
        keep = _Keep()
        a = self._args(keep, dims, tensors, scalars, stream, workload)
        check(c().ks_kernel_launch(self._live(), ctypes.byref(a)))

    def resolve(self, dims: Mapping[str, int], *, tensors: Optional[Mapping[str, TensorArg]] = None,
                scalars: Optional[Mapping[str, float]] = None,
                workload: Optional[str] = None) -> Dict[str, Any]:
        """What a launch with these dimensions would do (no device needed)."""
        keep = _Keep()
        a = self._args(keep, dims, tensors, scalars, None, workload)
        out = ctypes.c_void_p()
        check(c().ks_kernel_resolve(self._live(), ctypes.byref(a), ctypes.byref(out)))
        plan: Dict[str, Any] = json.loads(take_string(out))
        return plan

    def _live(self) -> ctypes.c_void_p:
        if not self._handle:
            raise ValueError("this Kernel is closed")
        return self._handle

    @property
    def solution_id(self) -> str:
        return text(c().ks_kernel_solution_id(self._live()))

    @property
    def task(self) -> str:
        return text(c().ks_kernel_task(self._live()))

    @property
    def arch(self) -> str:
        return text(c().ks_kernel_arch(self._live()))

    @property
    def launch_plan(self) -> Dict[str, Any]:
        plan: Dict[str, Any] = json.loads(text(c().ks_kernel_launch_plan_json(self._live())))
        return plan

    @property
    def params(self) -> Any:
        return json.loads(text(c().ks_kernel_params_json(self._live())))

    @property
    def dims(self) -> List[str]:
        h = self._live()
        return [text(c().ks_kernel_dim_name(h, i)) for i in range(c().ks_kernel_dim_count(h))]

    @property
    def tensors(self) -> List[TensorInfo]:
        h, lib = self._live(), c()
        return [TensorInfo(text(lib.ks_kernel_tensor_name(h, i)), text(lib.ks_kernel_tensor_dtype(h, i)),
                           bool(lib.ks_kernel_tensor_is_output(h, i)))
                for i in range(lib.ks_kernel_tensor_count(h))]

    @property
    def module_count(self) -> int:
        return int(c().ks_kernel_module_count(self._live()))

