# ksearch_runtime: runs a solution exported by libksearch (docs/export.md).
#
# This file is embedded verbatim in every export (a GPUMode submission, a
# KernelBench ModelNew, a FlashInfer-Bench Solution). It loads the cubins
# libksearch's NVRTC build produced - the very binaries the evaluator timed -
# through the CUDA driver (ctypes over libcuda, no extra package), resolves
# the launch plan for the shapes at hand, takes scratch memory from
# PyTorch's allocator and launches on PyTorch's current stream. On a GPU of
# another architecture it compiles the embedded program with NVRTC (ctypes
# over libnvrtc) with the recorded options, and says so on stderr. A plan's
# GEMM steps, which libksearch runs with cuBLASLt, run here through PyTorch's
# matmul (run_gemm; their `algo` is cuBLASLt's and is ignored).
#
# Two parts mirror libksearch's C++ exactly and are tested against it
# (tests/export): the expression language (lib/util/expr.cpp) and launch-plan
# parsing and resolution (lib/core/launch_plan.cpp reads the JSON,
# lib/eval/cuda/launch_plan.cpp parses expressions and resolves). Keep them in step.

import base64
import ctypes
import ctypes.util
import glob
import hashlib
import math
import os
import re
import struct
import sys
import threading

RUNTIME_VERSION = 1

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1


class KsRuntimeError(RuntimeError):
    """A problem the runtime can name: bad input, a plan that does not fit, a CUDA error."""


class ExprError(KsRuntimeError):
    """ks::Error(Status::invalid_argument) of lib/util/expr.cpp, same message."""


class PlanError(KsRuntimeError):
    """ks::Error(Status::invalid_argument) of lib/eval/cuda/launch_plan.cpp, same message."""


# ---------------------------------------------------------------------------
# C library helpers: the C++ side parses numbers with strtod and computes
# with libm, so the mirror calls the same functions where it can.

def _load_libc():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.strtod
        fn.restype = ctypes.c_double
        fn.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p)]
        return fn
    except (OSError, AttributeError):
        return None


def _load_libm():
    out = {}
    try:
        libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        for name, nargs in (("pow", 2), ("log", 1), ("log2", 1), ("exp", 1), ("sqrt", 1), ("fmod", 2),
                            ("floor", 1), ("ceil", 1), ("fabs", 1)):
            f = getattr(libm, name)
            f.restype = ctypes.c_double
            f.argtypes = [ctypes.c_double] * nargs
            out[name] = f
    except (OSError, AttributeError):
        pass
    return out


_STRTOD = _load_libc()
_LIBM = _load_libm()


def _strtod(tok):
    """(value, out_of_range) as C's strtod gives them for a decimal token."""
    if _STRTOD is not None:
        ctypes.set_errno(0)
        v = _STRTOD(tok.encode("ascii"), None)
        return v, ctypes.get_errno() == 34  # ERANGE
    v = float(tok)
    tiny = v != 0.0 and abs(v) < 2.2250738585072014e-308
    zero_from_digits = v == 0.0 and any(c in "123456789" for c in tok.split("e")[0].split("E")[0])
    return v, math.isinf(v) or tiny or zero_from_digits


def _c_math(name, *args):
    f = _LIBM.get(name)
    if f is not None:
        return f(*args)
    try:  # without libm: Python's math, with C's results where it raises
        if name == "pow":
            return math.pow(*args)
        if name == "fmod":
            return math.fmod(*args)
        if name == "fabs":
            return math.fabs(*args)
        if name in ("floor", "ceil"):
            x = args[0]
            return x if math.isinf(x) or math.isnan(x) else float(getattr(math, name)(x))
        return getattr(math, name)(*args)
    except OverflowError:
        return math.inf
    except ValueError:
        return math.nan


# ---------------------------------------------------------------------------
# Expressions: a mirror of lib/util/expr.cpp (same grammar, limits, integer
# rules and messages).
#
#   operators:  ?:  ||  &&  == != < <= > >=  + -  * / %  unary - + !
#   functions:  min max cdiv(a,b) ceil_div round_up(a,m) abs sqrt pow log log2 exp floor ceil

_MAX_LENGTH = 4096
_MAX_DEPTH = 200
_ARITY = {"min": -2, "max": -2, "cdiv": 2, "ceil_div": 2, "round_up": 2, "abs": 1, "sqrt": 1, "pow": 2,
          "log": 1, "log2": 1, "exp": 1, "floor": 1, "ceil": 1}
_SPACE = " \t\n\v\f\r"
_DIGITS = "0123456789"
_ALPHA = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

# Node kinds
_INT, _DBL, _VAR, _NEG, _NOT, _ADD, _SUB, _MUL, _DIV, _MOD, _LT, _LE, _GT, _GE, _EQ, _NE, _AND, _OR, _COND, \
    _CALL = range(20)


def _fmt_double(d):
    # fmt's "{}" of a double: the shortest form that reads back, like repr.
    if math.isnan(d):
        return "-nan" if math.copysign(1.0, d) < 0 else "nan"
    if math.isinf(d):
        return "inf" if d > 0 else "-inf"
    return repr(float(d))


def _raw(c):
    # A byte of the UTF-8 text as C++ prints it alone: ASCII as itself, any
    # other byte as a lone surrogate (the byte again under "surrogateescape").
    return c if ord(c) < 0x80 else chr(0xDC00 + ord(c))


class _Parser:
    def __init__(self, text):
        self.text = text
        # C++ reads the UTF-8 bytes; one character per byte keeps columns and limits equal.
        self.s = text.encode("utf-8").decode("latin-1")
        self.pos = 0
        self.depth = 0
        self.nodes = []

    def fail(self, what):
        raise ExprError('expression "%s": %s at column %d' % (self.text, what, self.pos + 1))

    def skip(self):
        s = self.s
        while self.pos < len(s) and s[self.pos] in _SPACE:
            self.pos += 1

    def eat(self, tok):
        self.skip()
        s = self.s
        if s.startswith(tok, self.pos):
            if len(tok) == 1 and self.pos + 1 < len(s):
                n = s[self.pos + 1]
                if tok in ("<", ">", "!", "=") and n == "=":
                    return False
                if tok == "*" and n == "*":
                    return False
            self.pos += len(tok)
            return True
        return False

    def add(self, node):
        if len(self.nodes) >= 2 * _MAX_DEPTH:
            self.fail("too many terms")
        self.nodes.append(node)
        return len(self.nodes) - 1

    def enter(self):
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            self.fail("nested more than %d levels deep" % _MAX_DEPTH)

    def run(self):
        if len(self.s) > _MAX_LENGTH:
            self.fail("longer than %d characters" % _MAX_LENGTH)
        self.skip()
        if self.pos >= len(self.s):
            self.fail("empty expression")
        root = self.ternary()
        self.skip()
        if self.pos < len(self.s):
            self.fail("unexpected '%s'" % _raw(self.s[self.pos]))
        return root

    def ternary(self):
        self.enter()
        c = self.lor()
        if self.eat("?"):
            a = self.ternary()
            if not self.eat(":"):
                self.fail("expected ':' in conditional")
            b = self.ternary()
            c = self.add((_COND, 0, 0.0, None, (c, a, b)))
        self.depth -= 1
        return c

    def lor(self):
        a = self.land()
        while self.eat("||"):
            b = self.land()
            a = self.add((_OR, 0, 0.0, None, (a, b)))
        return a

    def land(self):
        a = self.cmp()
        while self.eat("&&"):
            b = self.cmp()
            a = self.add((_AND, 0, 0.0, None, (a, b)))
        return a

    def cmp(self):
        a = self.sum()
        for tok, op in (("==", _EQ), ("!=", _NE), ("<=", _LE), (">=", _GE), ("<", _LT), (">", _GT)):
            if self.eat(tok):
                b = self.sum()
                return self.add((op, 0, 0.0, None, (a, b)))
        return a

    def sum(self):
        a = self.product()
        while True:
            if self.eat("+"):
                op = _ADD
            elif self.eat("-"):
                op = _SUB
            else:
                return a
            b = self.product()
            a = self.add((op, 0, 0.0, None, (a, b)))

    def product(self):
        a = self.unary()
        while True:
            if self.eat("*"):
                op = _MUL
            elif self.eat("/"):
                op = _DIV
            elif self.eat("%"):
                op = _MOD
            else:
                return a
            b = self.unary()
            a = self.add((op, 0, 0.0, None, (a, b)))

    def unary(self):
        self.enter()
        if self.eat("-"):
            k = self.unary()
            r = self.add((_NEG, 0, 0.0, None, (k,)))
        elif self.eat("+"):
            r = self.unary()
        elif self.eat("!"):
            k = self.unary()
            r = self.add((_NOT, 0, 0.0, None, (k,)))
        else:
            r = self.primary()
        self.depth -= 1
        return r

    def primary(self):
        self.skip()
        s = self.s
        if self.pos >= len(s):
            self.fail("unexpected end")
        c = s[self.pos]
        if self.eat("("):
            e = self.ternary()
            if not self.eat(")"):
                self.fail("expected ')'")
            return e
        if c in _DIGITS or c == ".":
            return self.number()
        if c in _ALPHA or c == "_":
            start = self.pos
            while self.pos < len(s) and (s[self.pos] in _ALPHA or s[self.pos] in _DIGITS or s[self.pos] == "_"):
                self.pos += 1
            name = s[start:self.pos]
            if self.eat("("):
                kids = []
                if not self.eat(")"):
                    kids.append(self.ternary())
                    while self.eat(","):
                        kids.append(self.ternary())
                    if not self.eat(")"):
                        self.fail("expected ')' after arguments of %s()" % name)
                self.check_call(name, kids)
                return self.add((_CALL, 0, 0.0, name, tuple(kids)))
            return self.add((_VAR, 0, 0.0, name, ()))
        self.fail("unexpected '%s'" % _raw(c))

    def check_call(self, name, kids):
        want = _ARITY.get(name)
        if want is None:
            self.fail("unknown function %s() (known: min, max, cdiv, round_up, abs, sqrt, pow, log, log2, exp, "
                      "floor, ceil)" % name)
        got = len(kids)
        if (got < -want) if want < 0 else (got != want):
            self.fail("%s() takes %s%d argument(s), got %d" % (name, "at least " if want < 0 else "",
                                                               -want if want < 0 else want, got))

    def number(self):
        s = self.s
        start = self.pos
        is_double = False
        while self.pos < len(s) and s[self.pos] in _DIGITS:
            self.pos += 1
        if self.pos < len(s) and s[self.pos] == ".":
            is_double = True
            self.pos += 1
            while self.pos < len(s) and s[self.pos] in _DIGITS:
                self.pos += 1
        if self.pos < len(s) and s[self.pos] in "eE":
            is_double = True
            self.pos += 1
            if self.pos < len(s) and s[self.pos] in "+-":
                self.pos += 1
            if self.pos >= len(s) or s[self.pos] not in _DIGITS:
                self.fail("malformed exponent")
            while self.pos < len(s) and s[self.pos] in _DIGITS:
                self.pos += 1
        tok = s[start:self.pos]
        if tok[0] == "." and (len(tok) == 1 or tok[1] not in _DIGITS):
            self.fail("malformed number")
        if is_double:
            d, out_of_range = _strtod(tok)
            if out_of_range or math.isinf(d) or math.isnan(d):
                self.fail("number out of range or malformed")
            return self.add((_DBL, 0, d, None, ()))
        v = int(tok)
        if v > INT64_MAX:
            self.fail("integer literal out of range")
        return self.add((_INT, v, 0.0, None, ()))


def _trunc_div(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _c_mod(a, b):
    r = abs(a) % abs(b)
    return -r if a < 0 else r


class Expr:
    """An integer expression over named variables, as lib/util/expr.hpp defines it."""

    __slots__ = ("text", "_nodes", "_root")

    def __init__(self, text):
        # C++ reads the UTF-8 bytes; one character per byte keeps columns and limits equal.
        self.text = text
        p = _Parser(text)
        self._root = p.run()
        self._nodes = p.nodes

    def variables(self):
        return sorted({n[3] for n in self._nodes if n[0] == _VAR}, key=lambda v: v.encode("utf-8"))

    def _fail(self, what):
        raise ExprError('expression "%s": %s' % (self.text, what))

    # `reals`: named floating-point values (scalar inputs such as sm_scale), read where a name is
    # not among the integer `variables` (RealVars of lib/util/expr.hpp).
    def eval(self, variables, reals=None):
        """(is_int, value) of the expression."""
        return self._eval(self._root, variables, reals)

    def eval_int(self, variables, reals=None):
        is_int, v = self._eval(self._root, variables, reals)
        if is_int:
            return v
        if math.isfinite(v) and math.floor(v) == v and abs(v) < 9.2e18:
            return int(v)
        raise ExprError('expression "%s" must give an integer, gave %s' % (self.text, _fmt_double(v)))

    def eval_double(self, variables, reals=None):
        is_int, v = self._eval(self._root, variables, reals)
        return float(v) if is_int else v

    def _int(self, v):
        if v < INT64_MIN or v > INT64_MAX:
            self._fail("integer overflow")
        return (True, v)

    def _eval(self, idx, variables, reals):
        op, i, d, name, kids = self._nodes[idx]

        def ev(k, variables):
            return self._eval(k, variables, reals)

        if op == _INT:
            return (True, i)
        if op == _DBL:
            return (False, d)
        if op == _VAR:
            v = variables.get(name)
            if v is None and reals is not None:
                r = reals.get(name)
                if r is not None:
                    return (False, float(r))
            if v is None:
                # std::map order: the integers, then the reals.
                known = ", ".join(_cpp_sorted(variables) + (_cpp_sorted(reals) if reals else []))
                self._fail('unknown name "%s" (known: %s)' % (name, known or "none"))
            return (True, v)
        if op == _NEG:
            a_int, a = ev(kids[0], variables)
            if a_int:
                if a == INT64_MIN:
                    self._fail("integer overflow")
                return (True, -a)
            return (False, -a)
        if op == _NOT:
            return (True, 1 if float(ev(kids[0], variables)[1]) == 0.0 else 0)
        if op == _AND:
            if float(ev(kids[0], variables)[1]) == 0.0:
                return (True, 0)
            return (True, 1 if float(ev(kids[1], variables)[1]) != 0.0 else 0)
        if op == _OR:
            if float(ev(kids[0], variables)[1]) != 0.0:
                return (True, 1)
            return (True, 1 if float(ev(kids[1], variables)[1]) != 0.0 else 0)
        if op == _COND:
            return ev(kids[1], variables) if float(ev(kids[0], variables)[1]) != 0.0 else ev(kids[2], variables)
        if op == _CALL:
            return self._call(name, [ev(k, variables) for k in kids])
        a_int, a = ev(kids[0], variables)
        b_int, b = ev(kids[1], variables)
        if a_int and b_int:
            if op == _ADD:
                return self._int(a + b)
            if op == _SUB:
                return self._int(a - b)
            if op == _MUL:
                return self._int(a * b)
            if op == _DIV:
                if b == 0:
                    self._fail("division by zero")
                if a == INT64_MIN and b == -1:
                    self._fail("integer overflow")
                return (True, _trunc_div(a, b))
            if op == _MOD:
                if b == 0:
                    self._fail("modulo by zero")
                if b == -1:
                    return (True, 0)
                return (True, _c_mod(a, b))
            return (True, int(_compare(op, a, b)))
        x, y = float(a), float(b)
        if op == _ADD:
            return (False, x + y)
        if op == _SUB:
            return (False, x - y)
        if op == _MUL:
            return (False, x * y)
        if op == _DIV:
            if y == 0:
                self._fail("division by zero")
            return (False, x / y)
        if op == _MOD:
            if y == 0:
                self._fail("modulo by zero")
            return (False, _c_math("fmod", x, y))
        return (True, int(_compare(op, x, y)))

    def _call(self, f, args):
        all_int = all(a[0] for a in args)
        if f in ("min", "max"):
            best = args[0]
            for a in args[1:]:
                less = float(a[1]) < float(best[1])
                if (f == "min") == less:
                    best = a
            return best if all_int else (False, float(best[1]))
        if f in ("cdiv", "ceil_div", "round_up"):
            if not all_int:
                self._fail("%s() needs integer arguments" % f)
            a, b = args[0][1], args[1][1]
            if b <= 0:
                self._fail("%s() needs a positive divisor" % f)
            q = _trunc_div(a, b) + (1 if _c_mod(a, b) > 0 else 0)
            if f != "round_up":
                return (True, q)
            return self._int(q * b)
        if f == "abs":
            is_int, v = args[0]
            if is_int:
                if v == INT64_MIN:
                    self._fail("integer overflow")
                return (True, abs(v))
            return (False, _c_math("fabs", v))
        x = float(args[0][1])
        if f == "sqrt":
            if x < 0:
                self._fail("sqrt of a negative number")
            return (False, _c_math("sqrt", x))
        if f == "pow":
            return (False, _c_math("pow", x, float(args[1][1])))
        if f == "log":
            if x <= 0:
                self._fail("log of a non-positive number")
            return (False, _c_math("log", x))
        if f == "log2":
            if x <= 0:
                self._fail("log2 of a non-positive number")
            return (False, _c_math("log2", x))
        if f == "exp":
            return (False, _c_math("exp", x))
        if f == "floor":
            return args[0] if args[0][0] else (False, _c_math("floor", x))
        if f == "ceil":
            return args[0] if args[0][0] else (False, _c_math("ceil", x))
        self._fail("internal error: unknown node")


def _compare(op, a, b):
    if op == _LT:
        return a < b
    if op == _LE:
        return a <= b
    if op == _GT:
        return a > b
    if op == _GE:
        return a >= b
    if op == _EQ:
        return a == b
    return a != b


# ---------------------------------------------------------------------------
# Launch plans: a mirror of lib/core/launch_plan.cpp and lib/eval/cuda/launch_plan.cpp
# (docs/launch-plan.md).

# Element sizes by the names plans and tasks use (types.cpp), with the
# PyTorch dtype of each for tensors.
_DTYPES = {
    "f32": (4, "float32"), "float32": (4, "float32"),
    "f64": (8, "float64"), "float64": (8, "float64"),
    "f16": (2, "float16"), "float16": (2, "float16"),
    "bf16": (2, "bfloat16"), "bfloat16": (2, "bfloat16"),
    "i32": (4, "int32"), "int32": (4, "int32"),
    "i64": (8, "int64"), "int64": (8, "int64"),
    "u8": (1, "uint8"), "uint8": (1, "uint8"),
    "i8": (1, "int8"), "int8": (1, "int8"),
    "i16": (2, "int16"), "int16": (2, "int16"),
    "bool": (1, "bool"), "boolean": (1, "bool"),
    "f8e4m3": (1, "float8_e4m3fn"), "float8_e4m3fn": (1, "float8_e4m3fn"), "f8e4m3fn": (1, "float8_e4m3fn"),
    "f8e5m2": (1, "float8_e5m2"), "float8_e5m2": (1, "float8_e5m2"),
}
# The dtypes C++ accepts (dtype_from_string in lib/core/types.cpp), e.g. for scratch.
_PLAN_DTYPES = tuple(_DTYPES)
# The names types.cpp gives them (to_string), and dtype_is_float.
_CANONICAL = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int32": "i32",
              "int64": "i64", "uint8": "u8", "int8": "i8", "int16": "i16", "boolean": "bool",
              "float8_e4m3fn": "f8e4m3", "f8e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}
_FLOAT_DTYPES = ("f32", "f64", "f16", "bf16", "f8e4m3", "f8e5m2")


def canonical_dtype(name):
    return _CANONICAL.get(name, name)


def _plan_fail(where, what):
    raise PlanError("launch plan: %s: %s" % (where, what))


def _dump(value):
    # The C++ messages show JSON as Json::dump writes it (compact).
    import json
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _json_type(v):
    # json_type_name of lib/util/json.cpp
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def _allow(obj, known, what):
    # util::FieldReader::allow: the first field outside `known`, in the object's order.
    for key in obj:
        if key not in known:
            raise PlanError('%s: unknown field "%s" (known fields: %s)' % (what, key, ", ".join(known)))


def _required_field(obj, key, wanted, what):
    # util::FieldReader::required_string / required_array.
    v = obj.get(key)
    ok = isinstance(v, str) if wanted == "a string" else isinstance(v, list)
    if not ok:
        if v is None:
            raise PlanError('%s: missing required field "%s"' % (what, key))
        raise PlanError('%s: field "%s" must be %s, found %s' % (what, key, wanted, _json_type(v)))
    return v


class _Reading:
    """The reading of one plan. lib/core/launch_plan.cpp checks the JSON's shape first and
    lib/eval/cuda/launch_plan.cpp parses the expressions after, in the same order: a shape error
    anywhere comes before any expression's; the first expression error is kept until the end."""

    def __init__(self):
        self.expr_error = None

    def expr(self, text, where):
        try:
            return Expr(text)
        except ExprError as e:
            if self.expr_error is None:
                self.expr_error = "launch plan: %s: %s" % (where, e)
            return _one()


def _parse_expr(value, where, reading=None):
    if _is_int(value):
        text = str(value)
    elif isinstance(value, str):
        text = value
    else:
        _plan_fail(where, 'expected an integer expression (a string such as "cdiv(N, 256)" or a number), got %s'
                   % _dump(value))
    return _compile(text, where, reading)


def _compile(text, where, reading):
    if reading is not None:
        return reading.expr(text, where)
    try:
        return Expr(text)
    except ExprError as e:
        _plan_fail(where, str(e))


_ONE = None


def _one():
    global _ONE
    if _ONE is None:
        _ONE = Expr("1")
    return _ONE


def _parse_dims(value, where, reading=None):
    if not isinstance(value, list) or not value or len(value) > 3:
        _plan_fail(where, 'expected one to three integer expressions, e.g. ["cdiv(N, 256)", 1], got %s'
                   % _dump(value))
    out = [_one(), _one(), _one()]
    for d, v in enumerate(value):
        out[d] = _parse_expr(v, "%s[%d]" % (where, d), reading)
    return out


class PlanArg:
    __slots__ = ("kind", "text", "expr")

    def __init__(self, kind, text, expr):
        self.kind, self.text, self.expr = kind, text, expr


def _parse_arg(value, where, reading=None):
    if isinstance(value, str) or _is_int(value):
        return PlanArg("name_or_expr", value if isinstance(value, str) else str(value),
                       _parse_expr(value, where, reading))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _plan_fail(where, '%s is not an integer; pass a floating value as {"f32": "%s"}' % (_dump(value), _dump(value)))
    if isinstance(value, dict) and len(value) == 1:
        key, v = next(iter(value.items()))
        if key in ("f32", "f64", "i32", "i64"):
            if isinstance(v, float):
                # A floating constant may be written as a number: {"f32": 0.5}.
                text = _dump(v)
                return PlanArg(key, text, _compile(text, "%s.%s" % (where, key), reading))
            e = _parse_expr(v, "%s.%s" % (where, key), reading)
            return PlanArg(key, e.text, e)
    _plan_fail(where, 'expected a tensor or scratch name, an integer expression, or one of '
                      '{"f32"|"f64"|"i32"|"i64": "expr"}, got %s' % _dump(value))


class PlanLaunch:
    """A step of a plan: a kernel launch, or a GEMM step when `gemm` is set (then the kernel fields are
    unused). `when`: the step runs only where it is non-zero; None: always."""
    __slots__ = ("kernel", "grid", "block", "cluster", "has_cluster", "shared_bytes", "args", "when", "gemm")


class PlanGemm:
    """A GEMM step as read (ks::LaunchPlan::Gemm, its expressions parsed; an absent optional one is None)."""
    __slots__ = ("a", "b", "c", "d", "bias", "m", "n", "k", "trans_a", "trans_b", "lda", "ldb", "ldc", "ldd", "batch",
                 "stride_a", "stride_b", "stride_c", "stride_d", "alpha", "beta", "epilogue", "compute", "algo")


class PlanScratch:
    __slots__ = ("name", "dtype", "dtype_size", "shape", "bytes")


_GEMM_FIELDS = ("a", "b", "c", "d", "bias", "m", "n", "k", "trans_a", "trans_b", "lda", "ldb", "ldc", "ldd", "batch",
                "stride_a", "stride_b", "stride_c", "stride_d", "alpha", "beta", "epilogue", "compute", "algo")
EPILOGUES = ("none", "relu", "gelu", "bias", "relu_bias", "gelu_bias")
COMPUTES = ("f32", "tf32")
_BIAS_EPILOGUES = ("bias", "relu_bias", "gelu_bias")


def _required(obj, key, where):
    v = obj.get(key)
    if v is None:
        _plan_fail(where, '"%s" is missing' % key)
    return v


def _optional_expr(obj, key, where, reading):
    v = obj.get(key)
    return None if v is None else _parse_expr(v, "%s.%s" % (where, key), reading)


def _optional_real(obj, key, where, reading):
    # alpha and beta: floating expressions, written as numbers or strings.
    v = obj.get(key)
    if v is None:
        return None
    if isinstance(v, float):
        return _compile(_dump(v), "%s.%s" % (where, key), reading)
    return _parse_expr(v, "%s.%s" % (where, key), reading)


def _buffer_name(obj, key, where):
    v = _required(obj, key, where)
    if not isinstance(v, str) or not v:
        _plan_fail(where + "." + key, "expected the name of a tensor or scratch buffer, got %s" % _dump(v))
    return v


def _read_name(value, names, where):
    if isinstance(value, str) and value in names:
        return value
    _plan_fail(where, "expected one of %s, got %s" % (", ".join('"%s"' % n for n in names), _dump(value)))


def _parse_gemm(value, where, reading):
    """{"gemm": {"a": ..., "b": ..., "d": ..., "m": ..., "n": ..., "k": ..., ...}} (read_gemm)."""
    if not isinstance(value, dict):
        _plan_fail(where, 'expected an object such as {"a": "x", "b": "w", "d": "y", "m": "M", "n": "N", "k": "K"}, '
                          'got %s' % _dump(value))
    _allow(value, _GEMM_FIELDS, "launch plan: " + where)
    g = PlanGemm()
    g.a = _buffer_name(value, "a", where)
    g.b = _buffer_name(value, "b", where)
    g.d = _buffer_name(value, "d", where)
    g.c = _buffer_name(value, "c", where) if value.get("c") is not None else None
    g.bias = _buffer_name(value, "bias", where) if value.get("bias") is not None else None
    g.m = _parse_expr(_required(value, "m", where), where + ".m", reading)
    g.n = _parse_expr(_required(value, "n", where), where + ".n", reading)
    g.k = _parse_expr(_required(value, "k", where), where + ".k", reading)
    for key in ("trans_a", "trans_b"):
        t = value.get(key)
        if t is not None and not isinstance(t, bool):
            _plan_fail(where + "." + key, "expected true or false, got %s" % _dump(t))
        setattr(g, key, bool(t))
    for key in ("lda", "ldb", "ldc", "ldd", "batch", "stride_a", "stride_b", "stride_c", "stride_d"):
        setattr(g, key, _optional_expr(value, key, where, reading))
    g.alpha = _optional_real(value, "alpha", where, reading)
    g.beta = _optional_real(value, "beta", where, reading)
    e = value.get("epilogue")
    g.epilogue = "none" if e is None else _read_name(e, EPILOGUES, where + ".epilogue")
    c = value.get("compute")
    g.compute = "f32" if c is None else _read_name(c, COMPUTES, where + ".compute")
    g.algo = _optional_expr(value, "algo", where, reading)
    bias_epilogue = g.epilogue in _BIAS_EPILOGUES
    if bias_epilogue != (g.bias is not None):
        _plan_fail(where, 'epilogue "%s" needs "bias": a buffer of n values' % g.epilogue if bias_epilogue else
                   '"bias" needs a bias epilogue ("bias", "relu_bias" or "gelu_bias")')
    return g


_LAUNCH_FIELDS = ("name", "grid", "block", "shared_bytes", "cluster", "args", "when", "gemm")


def _parse_launch(value, where, reading):
    if not isinstance(value, dict):
        _plan_fail(where, "expected an object, got %s" % _dump(value))
    what = "launch plan: " + where
    k = PlanLaunch()
    w = value.get("when")
    k.when = None if w is None else _parse_expr(w, where + ".when", reading)
    if value.get("gemm") is not None:
        _allow(value, ("gemm", "when"), what)
        k.gemm = _parse_gemm(value["gemm"], where + ".gemm", reading)
        k.kernel = "cuBLASLt GEMM"
        k.grid = k.block = k.cluster = [_one(), _one(), _one()]
        k.has_cluster = False
        k.shared_bytes = Expr("0")
        k.args = []
        return k
    k.gemm = None
    _allow(value, _LAUNCH_FIELDS, what)
    name = _required_field(value, "name", "a string", what)
    if not name:
        _plan_fail(where, '"name" is empty')
    k.kernel = name
    k.grid = _parse_dims(_required(value, "grid", where), where + ".grid", reading)
    k.block = _parse_dims(_required(value, "block", where), where + ".block", reading)
    s = value.get("shared_bytes")
    k.shared_bytes = _parse_expr(s, where + ".shared_bytes", reading) if s is not None else Expr("0")
    c = value.get("cluster")
    if c is not None:
        k.cluster = _parse_dims(c, where + ".cluster", reading)
        k.has_cluster = True
    else:
        k.cluster = [_one(), _one(), _one()]
        k.has_cluster = False
    args = _required_field(value, "args", "an array", what)
    k.args = [_parse_arg(a, "%s.args[%d]" % (where, i), reading) for i, a in enumerate(args)]
    return k


def _parse_scratch(value, where, reading):
    if not isinstance(value, dict):
        _plan_fail(where, "expected an object, got %s" % _dump(value))
    what = "launch plan: " + where
    _allow(value, ("name", "dtype", "shape", "bytes"), what)
    s = PlanScratch()
    s.name = _required_field(value, "name", "a string", what)
    has_bytes = "bytes" in value
    has_shape = "shape" in value or "dtype" in value
    if has_bytes == has_shape:
        _plan_fail(where, 'scratch "%s" needs either "dtype" and "shape", or "bytes"' % s.name)
    if has_bytes:
        s.dtype = s.dtype_size = s.shape = None
        s.bytes = _parse_expr(_required(value, "bytes", where), where + ".bytes", reading)
        return s
    dt = _required_field(value, "dtype", "a string", what)
    if dt not in _PLAN_DTYPES:
        _plan_fail(where + ".dtype", 'unknown dtype "%s" (f32, f64, f16, bf16, f8e4m3, f8e5m2, i8, i16, i32, i64, '
                                     'u8, bool)' % dt)
    s.dtype = canonical_dtype(dt)
    s.dtype_size = _DTYPES[dt][0]
    shape = _required_field(value, "shape", "an array", what)
    s.shape = [_parse_expr(x, "%s.shape[%d]" % (where, d), reading) for d, x in enumerate(shape)]
    s.bytes = None
    return s


def _parse_body(value, prefix, reading):
    kernels, scratch = [], []
    ks = value.get("kernels")
    if "kernels" in value:
        if not isinstance(ks, list) or not ks:
            _plan_fail(prefix + "kernels", "expected a non-empty array of kernel launches")
        kernels = [_parse_launch(k, "%skernels[%d]" % (prefix, i), reading) for i, k in enumerate(ks)]
    ss = value.get("scratch")
    if ss is not None:
        if not isinstance(ss, list):
            _plan_fail(prefix + "scratch", "expected an array of buffers")
        scratch = [_parse_scratch(s, "%sscratch[%d]" % (prefix, i), reading) for i, s in enumerate(ss)]
    return kernels, scratch


class LaunchPlan:
    """A parsed launch plan (docs/launch-plan.md)."""

    def __init__(self, plan):
        if not isinstance(plan, dict):
            raise PlanError('launch plan: expected a JSON object with "kernels", got %s'
                            % ("nothing" if plan is None else _dump(plan)))
        if "calls" in plan and "kernels" not in plan:
            raise PlanError('launch plan: this is a host call plan ("calls"); a CUDA candidate needs a launch plan '
                            'with "kernels"')
        if "kernels" not in plan and "variants" not in plan:
            keys = ", ".join('"%s"' % k for k in plan)
            raise PlanError('launch plan: "kernels" is missing (the list of kernel launches, e.g. [{"name": "k", '
                            '"grid": ["N"], "block": [256], "args": ["x", "y", "N"]}]); the plan has %s'
                            % ("keys " + keys if keys else "no keys"))
        _allow(plan, ("kernels", "scratch", "variants"), "launch plan")
        reading = _Reading()
        self.kernels, self.scratch = _parse_body(plan, "", reading)
        self.variants = []  # (when, kernels, scratch, has_scratch)
        vs = plan.get("variants")
        if vs is not None:
            if not isinstance(vs, list):
                _plan_fail("variants", 'expected an array of {"when": ..., "kernels": [...]}')
            for i, v in enumerate(vs):
                where = "variants[%d]" % i
                if not isinstance(v, dict):
                    _plan_fail(where, "expected an object, got %s" % _dump(v))
                _allow(v, ("when", "kernels", "scratch"), "launch plan: " + where)
                when = _parse_expr(_required(v, "when", where), where + ".when", reading)
                if "kernels" not in v:
                    _plan_fail(where, '"kernels" is missing')
                kernels, scratch = _parse_body(v, where + ".", reading)
                self.variants.append((when, kernels, scratch, "scratch" in v))
        if not self.kernels and not self.variants:
            raise PlanError('launch plan: "kernels" is missing (the list of kernel launches, e.g. [{"name": "k", '
                            '"grid": ["N"], "block": [256], "args": ["x", "y", "N"]}])')
        if reading.expr_error is not None:
            raise PlanError(reading.expr_error)

    def kernel_names(self):
        """Every kernel name the plan uses, in order of first appearance; GEMM steps have none."""
        out = []
        for body in [self.kernels] + [v[1] for v in self.variants]:
            for k in body:
                if k.gemm is None and k.kernel not in out:
                    out.append(k.kernel)
        return out


class DeviceLimits:
    """What the device allows (lib/eval/cuda/launch_plan.hpp DeviceLimits)."""

    def __init__(self, max_threads_per_block=1024, max_block=(1024, 1024, 64),
                 max_grid=(2147483647, 65535, 65535), max_shared_per_block=48 * 1024,
                 max_shared_per_block_optin=48 * 1024, cluster_launch=False, max_cluster_size=8):
        self.max_threads_per_block = max_threads_per_block
        self.max_block = tuple(max_block)
        self.max_grid = tuple(max_grid)
        self.max_shared_per_block = max_shared_per_block
        self.max_shared_per_block_optin = max_shared_per_block_optin
        self.cluster_launch = cluster_launch
        self.max_cluster_size = max_cluster_size


class KernelDesc:
    """A kernel as a plan addresses it: params is a list of (offset, size) or None when unknown."""

    def __init__(self, symbol, params=None, max_threads_per_block=0, static_shared_bytes=0):
        self.symbol = symbol
        self.params = params
        self.max_threads_per_block = max_threads_per_block
        self.static_shared_bytes = static_shared_bytes


class ResolvedArg:
    __slots__ = ("is_buffer", "buffer", "data", "size")

    def __init__(self, is_buffer, buffer, data, size):
        self.is_buffer, self.buffer, self.data, self.size = is_buffer, buffer, data, size


class ResolvedLaunch:
    """A step for one workload: a kernel launch, or a GEMM step when `gemm` is set (then the kernel fields
    are unused). `step`: its index in the plan's (or the variant's) "kernels"."""
    __slots__ = ("kernel", "symbol", "grid", "block", "cluster", "has_cluster", "shared_bytes", "args", "step",
                 "gemm")


_UINT64_MAX = (1 << 64) - 1
_INT32_MAX = (1 << 31) - 1


def _span_bytes(batch, stride, rows, cols, ld, dtype):
    # Bytes an operand stored as rows x cols (row stride ld) spans over batch items `stride` apart;
    # saturated at 2^64 - 1 as the C++ computes it.
    return min(((batch - 1) * stride + (rows - 1) * ld + cols) * _DTYPES[dtype][0], _UINT64_MAX)


class ResolvedGemm:
    """A GEMM step for one workload (ResolvedGemm of lib/eval/cuda/launch_plan.hpp), in the plan's row-major
    terms: D[i] = alpha * op(A[i]) @ op(B[i]) + beta * C[i], then the epilogue. Buffer names; c is d when
    the plan names none; bias "" without. Dtypes as libksearch names them ("f16")."""
    __slots__ = ("a", "b", "c", "d", "bias", "a_type", "b_type", "d_type", "m", "n", "k", "batch", "trans_a",
                 "trans_b", "lda", "ldb", "ldc", "ldd", "stride_a", "stride_b", "stride_c", "stride_d", "alpha", "beta",
                 "epilogue", "compute", "algo")

    def bytes_a(self):
        if self.trans_a:
            return _span_bytes(self.batch, self.stride_a, self.k, self.m, self.lda, self.a_type)
        return _span_bytes(self.batch, self.stride_a, self.m, self.k, self.lda, self.a_type)

    def bytes_b(self):
        if self.trans_b:
            return _span_bytes(self.batch, self.stride_b, self.n, self.k, self.ldb, self.b_type)
        return _span_bytes(self.batch, self.stride_b, self.k, self.n, self.ldb, self.b_type)

    def bytes_c(self):
        return _span_bytes(self.batch, self.stride_c, self.m, self.n, self.ldc, self.d_type)

    def bytes_d(self):
        return _span_bytes(self.batch, self.stride_d, self.m, self.n, self.ldd, self.d_type)

    def bytes_bias(self):
        return self.n * _DTYPES[self.d_type][0] if self.bias else 0

    def describe(self):
        out = "cuBLASLt GEMM %s%dx%dx%d %s%s @ %s%s -> %s" % (
            "%d x " % self.batch if self.batch > 1 else "", self.m, self.n, self.k, self.a,
            "^T" if self.trans_a else "", self.b, "^T" if self.trans_b else "", self.d)
        if self.beta != 0:
            out += " + %s * %s" % (_fmt_cpp_double(self.beta), self.c)
        if self.epilogue != "none":
            out += " epilogue " + self.epilogue
        if self.compute != "f32":
            out += " compute " + self.compute
        return out + " algo %d" % self.algo


def _fmt_cpp_double(d):
    # fmt's "{}" of a double: as repr, without repr's ".0" on integral values.
    s = _fmt_double(d)
    return s[:-2] if s.endswith(".0") else s


class ResolvedPlan:
    def __init__(self):
        self.variant = -1
        self.launches = []
        self.scratch = []  # (name, bytes)

    def describe(self):
        parts = []
        for l in self.launches:
            if l.gemm is not None:
                parts.append(l.gemm.describe())
                continue
            s = "%s grid %dx%dx%d block %dx%dx%d smem %d" % ((l.kernel,) + tuple(l.grid) + tuple(l.block)
                                                            + (l.shared_bytes,))
            if l.has_cluster:
                s += " cluster %dx%dx%d" % tuple(l.cluster)
            parts.append(s)
        return "; ".join(parts)

    def step_where(self, launch):
        """Where a resolved step is in the plan: "kernels[2]", "variants[1].kernels[0]"."""
        return "%skernels[%d]" % ("variants[%d]." % self.variant if self.variant >= 0 else "", launch.step)


def _join(items, none="none"):
    items = list(items)
    return ", ".join(items) if items else none


def _cpp_sorted(names):
    # std::set / std::map order: bytewise.
    return sorted(names, key=lambda n: n.encode("utf-8"))


class _Resolver:
    def __init__(self, variables, tensors, find_kernel, kernel_names, limits, scalars, dtypes):
        self.vars = variables
        self.tensors = tensors
        # The tensors' dtypes, then the typed scratch buffers' (GEMM operands need them).
        self.dtypes = {n: canonical_dtype(t) for n, t in dtypes.items() if n in tensors}
        self.find_kernel = find_kernel
        self.kernel_names = kernel_names
        self.limits = limits
        self.scalars = scalars
        # The floating scalar inputs, readable in expressions.
        self.reals = {n: v for n, (dt, v) in scalars.items() if canonical_dtype(dt) in _FLOAT_DTYPES}
        self.scratch_names = set()

    def eval_int(self, e, where):
        try:
            return e.eval_int(self.vars, self.reals)
        except ExprError as err:
            _plan_fail(where, str(err))

    def eval_double(self, e, where):
        try:
            return e.eval_double(self.vars, self.reals)
        except ExprError as err:
            _plan_fail(where, str(err))

    @staticmethod
    def scalar_input(name, scalar, param, where):
        """A scalar input named as an argument: its value in its own type."""
        dt = canonical_dtype(scalar[0])
        value = scalar[1]
        size = _DTYPES[dt][0] if dt in _DTYPES else 0
        if param is not None and param[1] != size:
            _plan_fail(where, "scalar input `%s` is %s (%d bytes) but the kernel's parameter is %d bytes"
                       % (name, dt, size, param[1]))
        data = _scalar_bytes(dt, value)
        if data is None:
            _plan_fail(where, "scalar input `%s` has dtype %s, which a plan cannot pass" % (name, dt))
        return ResolvedArg(False, None, data, size)

    def scratch(self, items, prefix):
        out = []
        for i, s in enumerate(items):
            where = '%sscratch[%d] "%s"' % (prefix, i, s.name)
            if s.name in self.tensors:
                _plan_fail(where, "the name is already a tensor of the task; pick another")
            if s.name in self.vars:
                _plan_fail(where, "the name is already a dimension or parameter; pick another")
            if s.name in self.scratch_names:
                _plan_fail(where, "declared twice")
            self.scratch_names.add(s.name)
            if s.dtype_size is not None:
                nbytes = s.dtype_size
                for d, e in enumerate(s.shape):
                    n = self.eval_int(e, "%s.shape[%d]" % (where, d))
                    if n < 0:
                        _plan_fail(where, "shape[%d] = %d is negative" % (d, n))
                    nbytes *= n
                    if nbytes > INT64_MAX:
                        _plan_fail(where, "the size overflows")
            else:
                nbytes = self.eval_int(s.bytes, where + ".bytes")
                if nbytes < 0:
                    _plan_fail(where, "bytes = %d is negative" % nbytes)
            if s.dtype is not None:
                self.dtypes[s.name] = s.dtype
            out.append((s.name, nbytes))
        return out

    def dims(self, exprs, where, maxima):
        out = []
        for d in range(3):
            v = self.eval_int(exprs[d], "%s[%d]" % (where, d))
            if v < 1 or v > maxima[d]:
                _plan_fail("%s[%d]" % (where, d), "`%s` = %d is outside 1..%d" % (exprs[d].text, v, maxima[d]))
            out.append(v)
        return out

    def find(self, name, where):
        k = self.find_kernel(name)
        if k is None:
            hint = "" if "<" not in name else (" (a template kernel is named by its instantiation, e.g. "
                                              "`gemm<128, 64>`, and must be instantiable with those arguments)")
            _plan_fail(where, "kernel `%s` not found in module; kernels are: %s%s" % (name, _join(self.kernel_names),
                                                                                    hint))
        return k

    @staticmethod
    def check_arg_count(l, k, where):
        if k.params is None or len(k.params) == len(l.args):
            return
        n, m = len(k.params), len(l.args)
        _plan_fail(where, "kernel `%s` takes %d parameter%s but the plan passes %d argument%s"
                   % (l.kernel, n, "" if n == 1 else "s", m, "" if m == 1 else "s"))

    def scalar_arg(self, a, param, where):
        def need_size(size, what):
            if param is not None and param[1] != size:
                _plan_fail(where, "%s is %d bytes but the kernel's parameter is %d bytes" % (what, size, param[1]))
            return size

        if a.kind == "f32":
            size = need_size(4, "an f32 value")
            v = self.eval_double(a.expr, where)
            return ResolvedArg(False, None, _pack_f32(v), size)
        if a.kind == "f64":
            size = need_size(8, "an f64 value")
            return ResolvedArg(False, None, struct.pack("<d", self.eval_double(a.expr, where)), size)
        if a.kind == "i32":
            size = need_size(4, "an i32 value")
            v = self.eval_int(a.expr, where)
            if v < -(1 << 31) or v > (1 << 31) - 1:
                _plan_fail(where, "`%s` = %d does not fit in 32 bits" % (a.text, v))
            return ResolvedArg(False, None, struct.pack("<i", v), size)
        if a.kind == "i64":
            size = need_size(8, "an i64 value")
            return ResolvedArg(False, None, struct.pack("<q", self.eval_int(a.expr, where)), size)
        v = self.eval_int(a.expr, where)
        size = param[1] if param is not None else 4
        if size == 1:
            ok = -128 <= v <= 255
        elif size == 2:
            ok = -32768 <= v <= 65535
        elif size == 4:
            ok = -(1 << 31) <= v <= (1 << 32) - 1
        elif size == 8:
            ok = True
        else:
            _plan_fail(where, "the kernel's parameter is a %d-byte value, which a plan cannot pass; take pointers "
                              "and integers or floats" % size)
        if not ok:
            _plan_fail(where, "`%s` = %d does not fit the kernel's %d-byte integer parameter%s"
                       % (a.text, v, size, "" if param is not None else ' (use {"i64": ...} for a 64-bit parameter)'))
        return ResolvedArg(False, None, (v & ((1 << (8 * size)) - 1)).to_bytes(size, "little"), size)

    def operand(self, name, role, where):
        """A GEMM operand: a tensor or scratch buffer whose dtype is known."""
        if name not in self.tensors and name not in self.scratch_names:
            _plan_fail(where, "%s `%s` is not a tensor or scratch buffer; tensors: %s; scratch: %s"
                       % (role, name, _join(_cpp_sorted(self.tensors)), _join(_cpp_sorted(self.scratch_names))))
        t = self.dtypes.get(name)
        if t is None:
            _plan_fail(where, '%s `%s` has no dtype; declare the scratch buffer with "dtype" and "shape"'
                       % (role, name))
        return t

    def gemm(self, g, where):
        """Resolver::gemm of lib/eval/cuda/launch_plan.cpp."""
        r = ResolvedGemm()
        r.a, r.b, r.d = g.a, g.b, g.d
        r.c = g.c if g.c is not None else g.d
        r.bias = g.bias if g.bias is not None else ""
        r.a_type = self.operand(r.a, "a", where)
        r.b_type = self.operand(r.b, "b", where)
        r.d_type = self.operand(r.d, "d", where)
        # Every operand starts at its buffer's start: D in a buffer it also reads from would be read and
        # written at once (C in place is the exception cuBLASLt allows).
        for name, role in ((r.a, "a"), (r.b, "b"), (r.bias, "bias")):
            if name == r.d:
                _plan_fail(where, "d `%s` is also %s: the step would read and write it at once; write D to another "
                                  "buffer" % (r.d, role))
        if r.c != r.d:
            c_type = self.operand(r.c, "c", where)
            if c_type != r.d_type:
                _plan_fail(where, "c `%s` is %s but d `%s` is %s; they must match" % (r.c, c_type, r.d, r.d_type))
        if r.bias:
            bias_type = self.operand(r.bias, "bias", where)
            if bias_type != r.d_type:
                _plan_fail(where, "bias `%s` is %s but d `%s` is %s; they must match"
                           % (r.bias, bias_type, r.d, r.d_type))
        # The combinations cuBLASLt runs (cublasLtMatmul's table), f32 accumulation.
        t = r.a_type
        half = t in ("f16", "bf16")
        if r.b_type != t or not (half or t == "f32") or not (r.d_type == t or (half and r.d_type == "f32")):
            _plan_fail(where, "a %s, b %s, d %s: a GEMM step takes a and b of one dtype, f16, bf16 or f32, and d of "
                              "that dtype or f32 (for f16 and bf16)" % (r.a_type, r.b_type, r.d_type))
        if g.compute == "tf32" and t != "f32":
            _plan_fail(where, 'compute "tf32" is for f32 operands; these are %s' % t)

        def positive(e, key):
            v = self.eval_int(e, "%s.%s" % (where, key))
            if v < 1 or v > _INT32_MAX:
                _plan_fail(where, "%s = `%s` = %d is outside 1..2147483647" % (key, e.text, v))
            return v

        r.m, r.n, r.k = positive(g.m, "m"), positive(g.n, "n"), positive(g.k, "k")
        r.batch = positive(g.batch, "batch") if g.batch is not None else 1
        r.trans_a, r.trans_b = g.trans_a, g.trans_b

        def ld(e, key, cols):
            # Row strides: at least a row of the stored matrix.
            if e is None:
                return cols
            v = self.eval_int(e, "%s.%s" % (where, key))
            if v < cols:
                _plan_fail(where, "%s = `%s` = %d is less than a stored row (%d elements)" % (key, e.text, v, cols))
            if v > _INT32_MAX:
                _plan_fail(where, "%s = `%s` = %d is more than 2147483647" % (key, e.text, v))
            return v

        r.lda = ld(g.lda, "lda", r.m if r.trans_a else r.k)
        r.ldb = ld(g.ldb, "ldb", r.k if r.trans_b else r.n)
        r.ldd = ld(g.ldd, "ldd", r.n)
        # C read in place (c is d) has D's layout: cuBLASLt computes in place only with one layout.
        c_is_d = r.c == r.d
        r.ldc = r.ldd if c_is_d and g.ldc is None else ld(g.ldc, "ldc", r.n)

        def stride(e, key, dense):
            if e is None:
                return dense
            v = self.eval_int(e, "%s.%s" % (where, key))
            if v < 0:
                _plan_fail(where, "%s = `%s` = %d is negative" % (key, e.text, v))
            return v

        r.stride_a = stride(g.stride_a, "stride_a", (r.k if r.trans_a else r.m) * r.lda)
        r.stride_b = stride(g.stride_b, "stride_b", (r.n if r.trans_b else r.k) * r.ldb)
        r.stride_d = stride(g.stride_d, "stride_d", r.m * r.ldd)
        r.stride_c = stride(g.stride_c, "stride_c", r.stride_d if c_is_d else r.m * r.ldc)
        if c_is_d and (r.ldc != r.ldd or r.stride_c != r.stride_d):
            _plan_fail(where, "c is d (`%s`), read in place, so ldc and stride_c must be ldd and stride_d (%d and %d), "
                              "not %d and %d" % (r.d, r.ldd, r.stride_d, r.ldc, r.stride_c))
        # The batch's outputs may not overlap: items stacked (each after the last row of the one before) or
        # side by side within D's rows.
        if r.batch > 1 and r.stride_d < (r.m - 1) * r.ldd + r.n and \
                not (r.stride_d >= r.n and (r.batch - 1) * r.stride_d + r.n <= r.ldd):
            _plan_fail(where, "stride_d = %d makes the batch's outputs overlap (m = %d, n = %d, ldd = %d); stack them "
                              "(stride_d >= %d) or place them side by side in D's rows"
                       % (r.stride_d, r.m, r.n, r.ldd, (r.m - 1) * r.ldd + r.n))
        r.alpha = self.eval_double(g.alpha, where + ".alpha") if g.alpha is not None else 1.0
        r.beta = self.eval_double(g.beta, where + ".beta") if g.beta is not None else 0.0
        r.epilogue, r.compute = g.epilogue, g.compute
        r.algo = 0
        if g.algo is not None:
            a = self.eval_int(g.algo, where + ".algo")
            if a < 0 or a > 63:
                _plan_fail(where, "algo = `%s` = %d is outside 0..63" % (g.algo.text, a))
            r.algo = a
        out = ResolvedLaunch()
        out.kernel = "cuBLASLt GEMM"
        out.symbol = ""
        out.grid = out.block = out.cluster = [1, 1, 1]
        out.has_cluster = False
        out.shared_bytes = 0
        out.args = []
        out.gemm = r
        return out

    def launch(self, l, where):
        if l.gemm is not None:
            return self.gemm(l.gemm, where + " (GEMM step)")
        k = self.find(l.kernel, where)
        self.check_arg_count(l, k, where)
        lim = self.limits
        out = ResolvedLaunch()
        out.gemm = None
        out.kernel = l.kernel
        out.symbol = k.symbol
        kw = "%s (kernel `%s`)" % (where, l.kernel)
        out.grid = self.dims(l.grid, kw + " grid", lim.max_grid)
        out.block = self.dims(l.block, kw + " block", lim.max_block)
        threads = out.block[0] * out.block[1] * out.block[2]
        if threads > lim.max_threads_per_block:
            _plan_fail(kw, "a block of %dx%dx%d = %d threads exceeds the device's limit of %d"
                       % (out.block[0], out.block[1], out.block[2], threads, lim.max_threads_per_block))
        if k.max_threads_per_block > 0 and threads > k.max_threads_per_block:
            _plan_fail(kw, "a block of %d threads exceeds this kernel's limit of %d (set by its register use or "
                           "__launch_bounds__)" % (threads, k.max_threads_per_block))
        shared = self.eval_int(l.shared_bytes, kw + " shared_bytes")
        if shared < 0:
            _plan_fail(kw, "shared_bytes = %d is negative" % shared)
        if shared + k.static_shared_bytes > lim.max_shared_per_block_optin:
            _plan_fail(kw, "shared_bytes = `%s` = %d plus %d bytes of static shared memory exceeds the device's "
                           "limit of %d bytes per block" % (l.shared_bytes.text, shared, k.static_shared_bytes,
                                                             lim.max_shared_per_block_optin))
        out.shared_bytes = shared
        out.cluster = [1, 1, 1]
        out.has_cluster = False
        if l.has_cluster:
            m = lim.max_cluster_size
            out.cluster = self.dims(l.cluster, kw + " cluster", (m, m, m))
            size = out.cluster[0] * out.cluster[1] * out.cluster[2]
            out.has_cluster = size > 1
            if out.has_cluster and not lim.cluster_launch:
                _plan_fail(kw, "cluster dimensions need thread-block clusters (sm_90 or newer), which this device "
                               "does not support")
            if size > m:
                _plan_fail(kw, "a cluster of %d blocks exceeds the limit of %d" % (size, m))
            for d in range(3):
                if out.grid[d] % out.cluster[d] != 0:
                    _plan_fail(kw, "cluster[%d] = %d does not divide grid[%d] = %d" % (d, out.cluster[d], d,
                                                                                       out.grid[d]))
        out.args = []
        for i, a in enumerate(l.args):
            aw = "%s argument %d `%s`" % (kw, i, a.text)
            param = k.params[i] if k.params is not None else None
            if a.kind == "name_or_expr" and (a.text in self.tensors or a.text in self.scratch_names):
                if param is not None and param[1] != 8:
                    _plan_fail(aw, "a buffer is passed as an 8-byte pointer but the kernel's parameter %d is %d bytes"
                               % (i, param[1]))
                out.args.append(ResolvedArg(True, a.text, None, 8))
                continue
            if a.kind == "name_or_expr":
                if a.text in self.scalars:
                    out.args.append(self.scalar_input(a.text, self.scalars[a.text], param, aw))
                    continue
                for v in a.expr.variables():
                    if v not in self.vars and v not in self.reals:
                        listed = "scalar inputs: %s; " % _join(_cpp_sorted(self.scalars)) if self.scalars else ""
                        _plan_fail(aw, "unknown name `%s`; tensors: %s; scratch: %s; %sdimensions and parameters: %s"
                                   % (v, _join(_cpp_sorted(self.tensors)), _join(_cpp_sorted(self.scratch_names)),
                                      listed, _join(_cpp_sorted(n for n in self.vars if n not in self.scalars))))
            out.args.append(self.scalar_arg(a, param, aw))
        return out


def _pack_f32(v):
    # static_cast<float>(double): round to nearest, out of range -> infinity.
    try:
        return struct.pack("<f", v)
    except OverflowError:
        return struct.pack("<f", math.copysign(math.inf, v))


def resolve_plan(plan, variables, tensors, find_kernel, kernel_names, limits, scalars=None, dtypes=None):
    """Mirror of ks::eval::cuda::resolve_plan. `variables`: dims, parameter values and integer scalar
    inputs (name -> int; plan_variables() makes them); `tensors`: the task's tensor names (not its
    scalars); `find_kernel(plan_name)` -> KernelDesc or None; `kernel_names`: what the module offers,
    for messages; `scalars`: the scalar inputs, name -> (dtype, value as libksearch holds it:
    scalar_value()); `dtypes`: the tensors' dtypes, name -> dtype, which GEMM steps need. Steps whose
    "when" is zero are left out (`step` keeps their place). Raises PlanError."""
    r = _Resolver(variables, set(tensors), find_kernel, kernel_names, limits, scalars or {}, dtypes or {})
    out = ResolvedPlan()
    body = None
    prefix = ""
    for i, (when, kernels, scratch, has_scratch) in enumerate(plan.variants):
        if r.eval_double(when, "variants[%d].when" % i) != 0.0:
            body = kernels
            out.variant = i
            prefix = "variants[%d]." % i
            break
    scratch = plan.scratch
    scratch_prefix = ""
    if body is not None:
        if plan.variants[out.variant][3]:
            scratch = plan.variants[out.variant][2]
            scratch_prefix = prefix
    else:
        if not plan.kernels:
            dims = ", ".join("%s=%d" % (n, variables[n]) for n in _cpp_sorted(variables))
            raise PlanError('launch plan: no variant applies to this workload (%s) and there are no top-level '
                            '"kernels"' % dims)
        body = plan.kernels
    out.scratch = r.scratch(scratch, scratch_prefix)
    for i, k in enumerate(body):
        where = "%skernels[%d]" % (prefix, i)
        if k.when is not None and r.eval_double(k.when, where + ".when") == 0.0:
            continue
        launch = r.launch(k, where)
        launch.step = i
        out.launches.append(launch)
    if not out.launches:
        _plan_fail(prefix + "kernels", 'every step\'s "when" is zero for this workload: nothing would run')
    return out


def plan_variables(dims, params, scalars):
    """The integer variables a plan reads (Bindings of lib/eval/flow.cpp): dimensions, the build's
    parameter values, and the integer scalar inputs."""
    out = dict(dims)
    out.update(params)
    for name, (dt, value) in scalars.items():
        if canonical_dtype(dt) not in _FLOAT_DTYPES:
            out[name] = _to_int64(value)
    return out


# ---------------------------------------------------------------------------
# Scalar inputs: the value libksearch holds for one (store_element then
# load_element of lib/core/elements.cpp: f32 rounded to float, integers
# rounded half away from zero and saturated, bool 0 or 1) and the bytes a
# kernel receives (Resolver::scalar_input of launch_plan.cpp).

_INT_RANGES = {"i8": (-128, 127), "i16": (-32768, 32767), "i32": (-(1 << 31), (1 << 31) - 1),
               "i64": (INT64_MIN, INT64_MAX), "u8": (0, 255)}
_INT_FORMATS = {"i8": "<b", "i16": "<h", "i32": "<i", "i64": "<q", "u8": "<B", "bool": "<B"}
SCALAR_DTYPES = ("f32", "f64", "i8", "i16", "i32", "i64", "u8", "bool")


def _c_round(x):
    # std::round: halves away from zero; the fraction of a double is exact.
    a = abs(x)
    f = math.floor(a)
    r = f + 1.0 if a - f >= 0.5 else f
    return math.copysign(r, x)


def _saturate_round(v, dt):
    if math.isnan(v):
        return 0
    lo, hi = _INT_RANGES[dt]
    if math.isinf(v):
        return lo if v < 0 else hi
    r = _c_round(v)
    if r <= float(lo):
        return lo
    if r >= float(hi):
        return hi
    return int(r)


def _to_int64(v):
    # static_cast<std::int64_t>(double) of a value libksearch made integral; 2^63 (an i64 saturated
    # to its maximum, then held as a double) is kept at the maximum.
    if math.isnan(v):
        return 0
    return max(INT64_MIN, min(INT64_MAX, int(v)))


def scalar_value(dtype, v):
    """The value (a float) libksearch holds for scalar input of `dtype` given `v`."""
    dt = canonical_dtype(dtype)
    v = float(v)
    if dt == "f32":
        return struct.unpack("<f", _pack_f32(v))[0]
    if dt == "f64":
        return v
    if dt == "bool":
        return 1.0 if _saturate_round(v, "i64") != 0 else 0.0
    if dt in _INT_RANGES:
        return float(_saturate_round(v, dt))
    raise KsRuntimeError("a scalar input cannot be %s (f32, f64, an integer type or bool)" % dt)


def _scalar_bytes(dt, value):
    if dt == "f32":
        return _pack_f32(value)
    if dt == "f64":
        return struct.pack("<d", value)
    fmt_ = _INT_FORMATS.get(dt)
    if fmt_ is None:
        return None
    bits = 8 * struct.calcsize(fmt_)
    # static_cast to the type: the value's low bits (it is in range once converted).
    v = _to_int64(value) & ((1 << bits) - 1)
    if fmt_[1].islower() and v >= 1 << (bits - 1):
        v -= 1 << bits
    return struct.pack(fmt_, v)


def strip_spaces(name):
    return name.replace(" ", "")


# ---------------------------------------------------------------------------
# The exported solution: its builds (one cubin per set of tunable-parameter
# values), the plan, and the task's tensors.

class Build:
    def __init__(self, b):
        self.params = {k: int(v) for k, v in b.get("params", {}).items()}
        self.arch = b["arch"]
        self.cubin_b64 = b.get("cubin")
        self.cubin_sha256 = b.get("cubin_sha256")
        self.program = b.get("program")
        self.name_expressions = b.get("name_expressions", [])
        self.lowered_names = dict(b.get("lowered_names", {}))
        self.kernels = b.get("kernels", [])  # [{"symbol", "name", "params": [[offset, size], ...] | None}]
        self._cubin = None

    def cubin(self):
        if self._cubin is None:
            data = base64.b64decode(self.cubin_b64)
            if self.cubin_sha256 and hashlib.sha256(data).hexdigest() != self.cubin_sha256:
                raise KsRuntimeError("the embedded cubin does not match its recorded SHA-256: the export is damaged")
            self._cubin = data
        return self._cubin

    def kernel_names(self):
        return [k["name"] for k in self.kernels]

    def symbol_for(self, plan_name, lowered=None):
        """The symbol a plan name leads to: recorded lowered names first, then the module's own names
        (lib/eval/cuda/nvrtc_compiler.cpp module_catalog)."""
        lowered = self.lowered_names if lowered is None else lowered
        if plan_name in lowered:
            return lowered[plan_name]
        want = strip_spaces(plan_name)
        for expr, sym in lowered.items():
            if strip_spaces(expr) == want:
                return sym
        for k in self.kernels:
            if k["symbol"] == plan_name:
                return k["symbol"]
        matches = [k["symbol"] for k in self.kernels if strip_spaces(k["name"]) == want]
        return matches[0] if len(matches) == 1 else None

    def recorded_params(self, symbol):
        for k in self.kernels:
            if k["symbol"] == symbol:
                p = k.get("params")
                return None if p is None else [tuple(x) for x in p]
        return None


class TensorArg:
    """A tensor of the task, or a scalar input ("shape": null, passed by value)."""
    __slots__ = ("name", "dtype", "size", "torch_dtype", "shape", "output", "scalar")

    def __init__(self, t):
        self.name = t["name"]
        self.dtype = canonical_dtype(t["dtype"])
        if self.dtype not in _DTYPES:
            raise KsRuntimeError("tensor \"%s\": dtype %s is not one this runtime knows" % (self.name, self.dtype))
        self.size, self.torch_dtype = _DTYPES[self.dtype]
        self.scalar = t.get("shape") is None
        self.shape = None if self.scalar else [Expr(str(s)) for s in t["shape"]]
        self.output = bool(t.get("output"))
        if self.scalar and (self.output or self.dtype not in SCALAR_DTYPES):
            raise KsRuntimeError("scalar \"%s\" must be an input of dtype %s" % (self.name, ", ".join(SCALAR_DTYPES)))

    def torch_type(self, torch):
        return _torch_dtype(torch, self.torch_dtype, self.name)


def _torch_dtype(torch, torch_name, what):
    dt = getattr(torch, torch_name, None)
    if dt is None:
        raise KsRuntimeError("\"%s\" is %s, which this PyTorch (%s) does not have" % (
            what, torch_name, getattr(torch, "__version__", "?")))
    return dt


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Solution:
    """The data of an export (the manifest libksearch wrote) and the rules that need no GPU:
    binding dimensions to tensor shapes, choosing a build, resolving the plan."""

    def __init__(self, manifest):
        if manifest.get("format") != "ksearch-export":
            raise KsRuntimeError("not a libksearch export manifest")
        self.manifest = manifest
        task = manifest["task"]
        self.task_name = task["name"]
        self.dims = list(task["dims"])
        self.tensors = [TensorArg(t) for t in task["tensors"]]
        # The inputs in task order, scalars included (a harness's argument order).
        self.inputs = [t for t in self.tensors if not t.output]
        self.tensor_inputs = [t for t in self.inputs if not t.scalar]
        self.scalar_inputs = [t for t in self.inputs if t.scalar]
        self.outputs = [t for t in self.tensors if t.output]
        # Names a plan passes as buffers (scalars are passed by value).
        self.tensor_names = set(t.name for t in self.tensors if not t.scalar)
        # (name, dims, build, scalar values as libksearch holds them on the workload)
        self.workloads = [(w["name"], {k: int(v) for k, v in w["dims"].items()}, int(w["build"]),
                           {k: float(v) for k, v in w.get("scalars", {}).items()})
                          for w in task.get("workloads", [])]
        self.plan = LaunchPlan(manifest["plan"])
        self.builds = [Build(b) for b in manifest["builds"]]
        self.default_build = int(manifest.get("default_build", -1))
        self.constraints = [Expr(c) for c in manifest.get("constraints", [])]
        self.nvrtc = manifest.get("nvrtc", {})

    # -- dimensions
    def bind_dims(self, shapes):
        """Dimension values from the shapes of the tensor inputs (in task order); dimensions no shape names
        directly come from the task's workloads that agree with the rest."""
        dims = {}
        where = {}
        for t, shape in zip(self.tensor_inputs, shapes):
            if len(shape) != len(t.shape):
                raise KsRuntimeError("input \"%s\" has %d dimensions %s; the task's shape is [%s]"
                                     % (t.name, len(shape), list(shape), ", ".join(e.text for e in t.shape)))
            for i, (e, n) in enumerate(zip(t.shape, shape)):
                if _IDENT.match(e.text) and e.text in self.dims:
                    if e.text in dims and dims[e.text] != n:
                        raise KsRuntimeError("dimension %s is %d from %s but %d from %s[%d]"
                                             % (e.text, dims[e.text], where[e.text], n, t.name, i))
                    if e.text not in dims:
                        dims[e.text] = int(n)
                        where[e.text] = "%s[%d]" % (t.name, i)
        missing = [d for d in self.dims if d not in dims]
        if missing:
            agree = [w for w in self.workloads if all(w[1].get(k) == v for k, v in dims.items())]
            for d in missing:
                values = set(w[1][d] for w in (agree or self.workloads) if d in w[1])
                if len(values) != 1:
                    raise KsRuntimeError("dimension %s cannot be read from the input shapes and the task's workloads "
                                         "do not fix it (%s)" % (d, ", ".join(str(v) for v in sorted(values)) or
                                                                 "none sets it"))
                dims[d] = values.pop()
        for t, shape in zip(self.tensor_inputs, shapes):
            for i, (e, n) in enumerate(zip(t.shape, shape)):
                want = e.eval_int(dims)
                if want != n:
                    raise KsRuntimeError("input \"%s\" dimension %d is %d but the task's shape `%s` gives %d (%s)"
                                         % (t.name, i, n, e.text, want,
                                            ", ".join("%s=%d" % kv for kv in sorted(dims.items()))))
        return dims

    def output_shapes(self, dims):
        return [tuple(e.eval_int(dims) for e in t.shape) for t in self.outputs]

    # -- builds
    def build_for(self, dims, scalars=None):
        """The build the evaluator used for a workload of these dimensions (and scalar values, where two
        workloads share dimensions); else the solution's default parameter values, when they are
        admissible for them."""
        same_dims = [w for w in self.workloads if w[1] == dims]
        for name, wdims, b, wscalars in same_dims:
            if scalars is None or wscalars == scalars:
                return b
        if same_dims:
            return same_dims[0][2]
        if self.default_build < 0:
            raise KsRuntimeError("no build of this solution fits %s (it has tuned parameters only for the task's "
                                 "workloads)" % dims)
        values = dict(self.builds[self.default_build].params)
        values.update(dims)
        for c in self.constraints:
            try:
                ok = c.eval_double(values) != 0.0
            except ExprError as e:
                raise KsRuntimeError("parameter constraint \"%s\" cannot be checked for %s: %s" % (c.text, dims, e))
            if not ok:
                raise KsRuntimeError("the solution's parameters %s do not admit %s: constraint \"%s\" fails"
                                     % (self.builds[self.default_build].params, dims, c.text))
        return self.default_build


# ---------------------------------------------------------------------------
# The CUDA driver, through ctypes.

CU_DEVICE_ATTRIBUTE = {
    "max_threads_per_block": 1, "max_block_x": 2, "max_block_y": 3, "max_block_z": 4, "max_grid_x": 5,
    "max_grid_y": 6, "max_grid_z": 7, "max_shared_per_block": 8, "cc_major": 75, "cc_minor": 76,
    "max_shared_per_block_optin": 97, "cluster_launch": 120,
}
CU_FUNC_MAX_THREADS_PER_BLOCK = 0
CU_FUNC_SHARED_SIZE_BYTES = 1
CU_FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_FUNC_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14
CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4
_WRONG_BINARY = (200, 209, 222)  # CUDA_ERROR_INVALID_IMAGE, NO_BINARY_FOR_GPU, UNSUPPORTED_PTX_VERSION


class _LaunchAttribute(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("x", ctypes.c_uint), ("y", ctypes.c_uint),
                ("z", ctypes.c_uint), ("rest", ctypes.c_char * 52)]


class _LaunchConfig(ctypes.Structure):
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(_LaunchAttribute)), ("numAttrs", ctypes.c_uint)]


def arch_for_capability(major, minor):
    """lib/eval/cuda/cuda_device.cpp: from Hopper on, the "a" targets."""
    return "sm_%d%d%s" % (major, minor, "a" if major >= 9 else "")


class CudaDriver:
    """libcuda entry points the runtime needs; every call checked, errors named."""

    def __init__(self):
        path = os.environ.get("KSEARCH_LIBCUDA") or "libcuda.so.1"
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise KsRuntimeError("cannot load the CUDA driver (%s): %s" % (path, e))
        self.lib = lib
        vp, u, i, sz = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_size_t
        P = ctypes.POINTER
        sig = {
            "cuInit": [u], "cuGetErrorName": [i, P(ctypes.c_char_p)], "cuGetErrorString": [i, P(ctypes.c_char_p)],
            "cuDeviceGet": [P(i), i], "cuDeviceGetAttribute": [P(i), i, i], "cuCtxGetCurrent": [P(vp)],
            "cuCtxSetCurrent": [vp], "cuDevicePrimaryCtxRetain": [P(vp), i], "cuModuleLoadData": [P(vp), vp],
            "cuModuleGetFunction": [P(vp), vp, ctypes.c_char_p], "cuFuncGetAttribute": [P(i), i, vp],
            "cuFuncSetAttribute": [vp, i, i],
            "cuLaunchKernel": [vp, u, u, u, u, u, u, u, vp, vp, vp],
        }
        for name, args in sig.items():
            f = getattr(lib, name, None)
            if f is None:
                raise KsRuntimeError("the CUDA driver %s has no %s" % (path, name))
            f.restype = ctypes.c_int
            f.argtypes = args
            setattr(self, name, f)
        self.cuLaunchKernelEx = getattr(lib, "cuLaunchKernelEx", None)
        if self.cuLaunchKernelEx is not None:
            self.cuLaunchKernelEx.restype = ctypes.c_int
            self.cuLaunchKernelEx.argtypes = [P(_LaunchConfig), vp, vp, vp]
        self.cuFuncGetParamInfo = getattr(lib, "cuFuncGetParamInfo", None)
        if self.cuFuncGetParamInfo is not None:
            self.cuFuncGetParamInfo.restype = ctypes.c_int
            self.cuFuncGetParamInfo.argtypes = [vp, sz, P(sz), P(sz)]
        self.check(self.cuInit(0), "cuInit")
        self._contexts = {}

    def error_text(self, r):
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        self.cuGetErrorName(r, ctypes.byref(name))
        self.cuGetErrorString(r, ctypes.byref(text))
        n = name.value.decode() if name.value else "CUDA error %d" % r
        return "%s (%s)" % (n, text.value.decode()) if text.value else n

    def check(self, r, call, what=""):
        if r != 0:
            raise KsRuntimeError("%s: %s%s" % (call, self.error_text(r), (" " + what) if what else ""))

    # -- devices and contexts: PyTorch's, i.e. each device's primary context
    def device_of(self, tensor):
        if not tensor.is_cuda:
            raise KsRuntimeError("tensors must be on a CUDA device; got one on %s" % tensor.device)
        return tensor.device.index if tensor.device.index is not None else 0

    def context(self, ordinal):
        ctx = self._contexts.get(ordinal)
        if ctx is None:
            dev = ctypes.c_int()
            self.check(self.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")
            c = ctypes.c_void_p()
            self.check(self.cuDevicePrimaryCtxRetain(ctypes.byref(c), dev), "cuDevicePrimaryCtxRetain")
            ctx = self._contexts[ordinal] = c.value
        return ctx

    def make_current(self, ordinal):
        ctx = self.context(ordinal)
        cur = ctypes.c_void_p()
        self.cuCtxGetCurrent(ctypes.byref(cur))
        if cur.value != ctx:
            self.check(self.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    def device_info(self, ordinal):
        dev = ctypes.c_int()
        self.check(self.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")

        def attr(name):
            v = ctypes.c_int()
            self.check(self.cuDeviceGetAttribute(ctypes.byref(v), CU_DEVICE_ATTRIBUTE[name], dev),
                       "cuDeviceGetAttribute")
            return v.value

        major, minor = attr("cc_major"), attr("cc_minor")
        shared = attr("max_shared_per_block")
        limits = DeviceLimits(
            max_threads_per_block=attr("max_threads_per_block"),
            max_block=(attr("max_block_x"), attr("max_block_y"), attr("max_block_z")),
            max_grid=(attr("max_grid_x"), attr("max_grid_y"), attr("max_grid_z")),
            max_shared_per_block=shared,
            max_shared_per_block_optin=max(shared, attr("max_shared_per_block_optin")),
            cluster_launch=attr("cluster_launch") != 0,
            max_cluster_size=16 if major >= 9 else 8)
        return arch_for_capability(major, minor), limits

    # -- modules and functions
    def load_module(self, image):
        """A module handle, or the CUresult when the image does not fit the device."""
        m = ctypes.c_void_p()
        buf = ctypes.create_string_buffer(image, len(image))
        r = self.cuModuleLoadData(ctypes.byref(m), buf)
        if r in _WRONG_BINARY:
            return None, r
        self.check(r, "cuModuleLoadData")
        return m.value, 0

    def function(self, module, symbol):
        f = ctypes.c_void_p()
        self.check(self.cuModuleGetFunction(ctypes.byref(f), module, symbol.encode()), "cuModuleGetFunction",
                   "(kernel %s)" % symbol)
        return f.value

    def function_info(self, f):
        """(params or None, max threads per block, static shared bytes, current dynamic shared limit)."""
        params = None
        if self.cuFuncGetParamInfo is not None:
            params = []
            off, size = ctypes.c_size_t(), ctypes.c_size_t()
            while len(params) < 4096 and self.cuFuncGetParamInfo(f, len(params), ctypes.byref(off),
                                                                  ctypes.byref(size)) == 0:
                params.append((off.value, size.value))

        def attr(a):
            v = ctypes.c_int()
            return v.value if self.cuFuncGetAttribute(ctypes.byref(v), a, f) == 0 else 0

        return (params, attr(CU_FUNC_MAX_THREADS_PER_BLOCK), attr(CU_FUNC_SHARED_SIZE_BYTES),
                attr(CU_FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES))

    def set_max_dynamic_shared(self, f, nbytes, kernel):
        self.check(self.cuFuncSetAttribute(f, CU_FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes), "cuFuncSetAttribute",
                   "raising `%s` to %d bytes of dynamic shared memory" % (kernel, nbytes))

    def allow_large_clusters(self, f, kernel):
        self.check(self.cuFuncSetAttribute(f, CU_FUNC_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1), "cuFuncSetAttribute",
                   "allowing `%s` clusters above 8 blocks" % kernel)

    # -- launches
    def stream(self, tensor):
        # PyTorch's current stream as a CUstream. The raw getter (what Triton's launcher calls) spares
        # building a Stream object on every call; the public API where it is missing.
        import torch
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            return raw(tensor.get_device())
        return torch.cuda.current_stream(tensor.device).cuda_stream

    def launch(self, launch, stream):
        l = launch
        if l.config is not None:
            l.config.hStream = stream
            r = self.cuLaunchKernelEx(ctypes.byref(l.config), l.function, l.param_ptrs, None)
        else:
            r = self.cuLaunchKernel(*l.dims, stream, l.param_ptrs, None)
        if r != 0:
            self.check(r, "cuLaunchKernel", "launching kernel `%s` with grid %dx%dx%d, block %dx%dx%d, %d bytes of "
                       "dynamic shared memory" % ((l.kernel,) + tuple(l.grid) + tuple(l.block) + (l.shared_bytes,)))


# ---------------------------------------------------------------------------
# NVRTC, for a GPU whose architecture the embedded cubins were not built for.

def _nvrtc_candidates():
    env = os.environ.get("KSEARCH_LIBNVRTC")
    if env:
        return [env]
    names = ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for r in roots:
        if r:
            names += sorted(glob.glob(os.path.join(r, "lib64", "libnvrtc.so*")))
    for p in sys.path:  # the NVRTC wheels PyTorch depends on
        names += sorted(glob.glob(os.path.join(p, "nvidia", "*", "lib", "libnvrtc.so*")))
        names += sorted(glob.glob(os.path.join(p, "nvidia", "cu*", "lib", "libnvrtc.so*")))
    return [n for n in names if "builtins" not in n and "alt" not in os.path.basename(n)]


class Nvrtc:
    def __init__(self):
        tried = []
        self.lib = None
        for name in _nvrtc_candidates():
            try:
                self.lib = ctypes.CDLL(name)
                self.path = name
                break
            except OSError:
                tried.append(name)
        if self.lib is None:
            raise KsRuntimeError("NVRTC not found (tried %s); set KSEARCH_LIBNVRTC" % ", ".join(tried))
        vp, i, cp, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t
        P = ctypes.POINTER
        sig = {
            "nvrtcVersion": [P(i), P(i)], "nvrtcGetErrorString": [i],
            "nvrtcCreateProgram": [P(vp), cp, cp, i, P(cp), P(cp)], "nvrtcDestroyProgram": [P(vp)],
            "nvrtcCompileProgram": [vp, i, P(cp)], "nvrtcGetProgramLogSize": [vp, P(sz)],
            "nvrtcGetProgramLog": [vp, cp], "nvrtcGetCUBINSize": [vp, P(sz)], "nvrtcGetCUBIN": [vp, cp],
            "nvrtcAddNameExpression": [vp, cp], "nvrtcGetLoweredName": [vp, cp, P(cp)],
        }
        for name, args in sig.items():
            f = getattr(self.lib, name)
            f.restype = ctypes.c_int if name != "nvrtcGetErrorString" else ctypes.c_char_p
            f.argtypes = args
            setattr(self, name, f)
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        self.version = "%d.%d" % (major.value, minor.value)

    def include_dirs(self):
        """The toolkit's include folders, found as lib/eval/cuda/cuda_api.cpp finds them."""
        lib = os.path.realpath(self.path) if os.path.isabs(self.path) else self._loaded_path()
        roots = []
        if lib:
            roots += [os.path.dirname(os.path.dirname(lib)),
                      os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(lib))))]
        roots += [r for r in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda") if r]
        for r in roots:
            inc = os.path.join(r, "include")
            if os.path.exists(os.path.join(inc, "cuda_fp16.h")):
                out = [inc]
                if os.path.isdir(os.path.join(inc, "cccl")):
                    out.append(os.path.join(inc, "cccl"))
                return out
        return []

    def _loaded_path(self):
        try:
            with open("/proc/self/maps") as f:
                for line in f:
                    if "libnvrtc.so" in line and "builtins" not in line:
                        return os.path.realpath(line.split()[-1])
        except OSError:
            pass
        return None

    def compile(self, program, options, name_expressions):
        """(cubin bytes, lowered names) for an assembled program {"name", "text", "headers"}."""
        def check(r, call):
            if r != 0:
                raise KsRuntimeError("%s: %s" % (call, self.nvrtcGetErrorString(r).decode()))

        prog = ctypes.c_void_p()
        headers = program.get("headers", [])
        h_text = (ctypes.c_char_p * max(1, len(headers)))(*[h[1].encode() for h in headers])
        h_name = (ctypes.c_char_p * max(1, len(headers)))(*[h[0].encode() for h in headers])
        check(self.nvrtcCreateProgram(ctypes.byref(prog), program["text"].encode(), program["name"].encode(),
                                      len(headers), h_text, h_name), "nvrtcCreateProgram")
        try:
            for e in name_expressions:
                check(self.nvrtcAddNameExpression(prog, e.encode()), "nvrtcAddNameExpression")
            opts = (ctypes.c_char_p * max(1, len(options)))(*[o.encode() for o in options])
            r = self.nvrtcCompileProgram(prog, len(options), opts)
            if r != 0:
                size = ctypes.c_size_t()
                self.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
                log = ctypes.create_string_buffer(size.value)
                self.nvrtcGetProgramLog(prog, log)
                raise KsRuntimeError("NVRTC could not compile the solution: %s\n%s"
                                     % (self.nvrtcGetErrorString(r).decode(), log.value.decode(errors="replace")))
            size = ctypes.c_size_t()
            check(self.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
            buf = ctypes.create_string_buffer(size.value)
            check(self.nvrtcGetCUBIN(prog, buf), "nvrtcGetCUBIN")
            lowered = {}
            for e in name_expressions:
                p = ctypes.c_char_p()
                if self.nvrtcGetLoweredName(prog, e.encode(), ctypes.byref(p)) == 0 and p.value:
                    lowered[e] = p.value.decode()
            return buf.raw, lowered
        finally:
            self.nvrtcDestroyProgram(ctypes.byref(prog))


def nvrtc_options_for(recorded, recorded_includes, arch, include_dirs):
    """The recorded NVRTC options for another architecture and this machine's toolkit headers."""
    out = []
    placed = False
    for o in recorded:
        if o.startswith("-arch="):
            out.append("-arch=" + arch)
        elif o.startswith("-I") and o[2:] in recorded_includes:
            if not placed:
                out += ["-I" + d for d in include_dirs]
                placed = True
        else:
            out.append(o)
    if not placed and include_dirs:
        out += ["-I" + d for d in include_dirs]
    return out


# ---------------------------------------------------------------------------
# GEMM steps, run with PyTorch's matmul (cuBLAS on a GPU) instead of cuBLASLt:
# the same arithmetic (row-major D = alpha op(A) op(B) + beta C, f32
# accumulation, then bias and activation in f32, rounded once into D),
# though not the same kernel, and `algo` (an index into cuBLASLt's ranking)
# has no PyTorch counterpart: it is ignored.

_OUT_DTYPE_MATMUL = {}  # device type -> whether torch.bmm takes out_dtype=float32 for f16/bf16 there


def _torch_flag(obj, name):
    try:  # PyTorch 1.x's torch.backends.cuda.matmul raises AssertionError for an unknown name
        return getattr(obj, name)
    except Exception:
        return None


class _MatmulPrecision:
    """PyTorch's matmul flags for one GEMM step, restored after: TF32 only for compute "tf32", and no
    reduced-precision (f16/bf16) reductions, so products accumulate in f32 as cuBLASLt's do."""

    def __init__(self, torch, tf32):
        self.m = torch.backends.cuda.matmul
        self.want = {"allow_fp16_reduced_precision_reduction": False,
                     "allow_bf16_reduced_precision_reduction": False}
        if _torch_flag(self.m, "fp32_precision") is not None:
            self.want["fp32_precision"] = "tf32" if tf32 else "ieee"  # PyTorch 2.9's API
        else:
            self.want["allow_tf32"] = tf32
        self.saved = {}

    def __enter__(self):
        for name, value in self.want.items():
            old = _torch_flag(self.m, name)
            if old is not None and old != value:
                self.saved[name] = old
                setattr(self.m, name, value)
        return self

    def __exit__(self, *exc):
        for name, value in self.saved.items():
            setattr(self.m, name, value)
        return False


def _f32_value(v):
    # cuBLASLt takes alpha and beta as floats (static_cast<float>).
    return struct.unpack("<f", _pack_f32(v))[0]


def _gemm_product(torch, A, B, compute, d_dtype):
    """op(A) @ op(B) as float32, accumulated in f32. f32 operands: one f32 matmul (TF32 for compute "tf32").
    f16/bf16 ones: torch.bmm with out_dtype=float32 where this PyTorch has it on the device; else, on a
    GPU and with a D of their own dtype, their own matmul (f32 accumulation, the product rounded to their
    dtype before the epilogue); else (an f32 D, or the CPU) in f32 from the widened operands."""
    f32 = torch.float32
    with _MatmulPrecision(torch, compute == "tf32"):
        if A.dtype == f32:
            return torch.bmm(A, B)
        kind = A.device.type
        if _OUT_DTYPE_MATMUL.get(kind, True):
            try:
                out = torch.bmm(A, B, out_dtype=f32)
                _OUT_DTYPE_MATMUL[kind] = True
                return out
            except (TypeError, RuntimeError, NotImplementedError):
                _OUT_DTYPE_MATMUL[kind] = False
        if kind == "cuda" and d_dtype == A.dtype:
            return torch.bmm(A, B).to(f32)
        return torch.bmm(A.to(f32), B.to(f32))


def _gemm_into(torch, A, B, D, compute):
    """D = op(A) @ op(B) written by the matmul itself, without an f32 intermediate, where D is dense and
    PyTorch can: operands of D's dtype, or f16/bf16 ones into an f32 D with out_dtype. False where it
    cannot (then run_gemm takes the general path)."""
    if not D.is_contiguous():
        return False
    f32 = torch.float32
    kind = A.device.type
    with _MatmulPrecision(torch, compute == "tf32"):
        try:
            if A.dtype == D.dtype:
                torch.bmm(A, B, out=D)
                return True
            if D.dtype == f32 and _OUT_DTYPE_MATMUL.get(kind, True):
                torch.bmm(A, B, out_dtype=f32, out=D)
                return True
        except (TypeError, RuntimeError, NotImplementedError):
            return False
    return False


def run_gemm(g, a, b, c, d, bias=None):
    """Runs GEMM step `g` (a ResolvedGemm) with PyTorch on the current stream: a, b, c, d and bias are
    one-dimensional tensors over the buffers (each of its buffer's dtype; c may be d), read through
    the step's leading dimensions and batch strides; D is written in place:
        D[i] = epilogue(alpha * op(A[i]) @ op(B[i]) + beta * C[i] + bias)
    in f32, rounded once to D's dtype. C is not read when beta is 0; bias (n values, one per column of
    D) only with a bias epilogue; gelu is the tanh approximation, as cuBLASLt's."""
    import torch
    f32 = torch.float32

    def matrix(t, rows, cols, ld, stride):
        return torch.as_strided(t, (g.batch, rows, cols), (stride, ld, 1))

    A = matrix(a, g.k, g.m, g.lda, g.stride_a).transpose(1, 2) if g.trans_a else \
        matrix(a, g.m, g.k, g.lda, g.stride_a)
    B = matrix(b, g.n, g.k, g.ldb, g.stride_b).transpose(1, 2) if g.trans_b else \
        matrix(b, g.k, g.n, g.ldb, g.stride_b)
    D = matrix(d, g.m, g.n, g.ldd, g.stride_d)
    alpha, beta = _f32_value(g.alpha), _f32_value(g.beta)
    # The common step (no scaling, no C, no epilogue) straight into D: an f32 intermediate of D's size
    # costs a pass over memory as large as the GEMM's own output.
    if alpha == 1.0 and beta == 0.0 and g.epilogue == "none" and _gemm_into(torch, A, B, D, g.compute):
        return d
    acc = _gemm_product(torch, A, B, g.compute, D.dtype)
    if alpha != 1.0:
        acc = acc * alpha
    if beta != 0.0:
        acc = acc + beta * matrix(c, g.m, g.n, g.ldc, g.stride_c).to(f32)
    if g.epilogue in _BIAS_EPILOGUES:
        acc = acc + bias[:g.n].to(f32)
    if g.epilogue in ("relu", "relu_bias"):
        acc = torch.relu(acc)
    elif g.epilogue in ("gelu", "gelu_bias"):
        acc = torch.nn.functional.gelu(acc, approximate="tanh")
    D.copy_(acc)
    return d


class _GemmLaunch:
    """A GEMM step bound to its buffers: (position among the call's tensors or -1, scratch offset, bytes,
    torch dtype) for a, b, c, d and bias (None where there is none)."""
    __slots__ = ("gemm", "where", "operands")

    def run(self, tensors, scratch, scratch_base):
        def flat(op):
            if op is None:
                return None
            i, offset, nbytes, dtype = op
            if i >= 0:
                return tensors[i].reshape(-1)
            return scratch.narrow(0, scratch_base + offset, nbytes).view(dtype)

        a, b, c, d, bias = [flat(op) for op in self.operands]
        run_gemm(self.gemm, a, b, c, d, bias)


# ---------------------------------------------------------------------------
# Loading and launching.

class _Kernel:
    __slots__ = ("handle", "desc", "dynamic_limit", "large_clusters")


class _Module:
    """One build loaded on one device: its functions and what the driver says about them."""

    def __init__(self, driver, ordinal, solution, build_index):
        self.driver = driver
        build = solution.builds[build_index]
        arch, self.limits = driver.device_info(ordinal)
        driver.make_current(ordinal)
        self.lowered = build.lowered_names
        self.origin = "embedded cubin (%s)" % build.arch
        image = None
        forced = os.environ.get("KSEARCH_EXPORT_NVRTC") == "1"
        if arch == build.arch and not forced:
            image = build.cubin()
            self.handle, err = driver.load_module(image)
            if self.handle is None:
                sys.stderr.write("ksearch_runtime: the embedded %s cubin does not load on this GPU (%s); compiling "
                                 "the solution with NVRTC instead\n" % (build.arch, driver.error_text(err)))
                image = None
        if image is None:
            image = self._compile(solution, build, arch, forced)
            self.handle, err = driver.load_module(image)
            if self.handle is None:
                driver.check(err, "cuModuleLoadData")
        self.image = image
        self.build = build
        self.kernels = {}

    def _compile(self, solution, build, arch, forced):
        nv = Nvrtc()
        rec = solution.nvrtc
        why = "KSEARCH_EXPORT_NVRTC=1" if forced and arch == build.arch else \
            "this GPU is %s, the embedded cubins are %s" % (arch, build.arch)
        sys.stderr.write("ksearch_runtime: %s: compiling the solution with NVRTC %s (%s) for %s with the recorded "
                         "options; this is a rebuild, not the binary libksearch evaluated (NVRTC %s)\n"
                         % (why, nv.version, nv.path, arch, rec.get("version", "?")))
        options = nvrtc_options_for(rec.get("options", []), rec.get("toolkit_include_dirs", []), arch,
                                    nv.include_dirs())
        image, lowered = nv.compile(build.program, options, build.name_expressions)
        self.lowered = dict(build.lowered_names)
        self.lowered.update(lowered)
        self.origin = "NVRTC %s rebuild for %s" % (nv.version, arch)
        return image

    def kernel(self, plan_name):
        k = self.kernels.get(plan_name)
        if k is not None:
            return k
        symbol = self.build.symbol_for(plan_name, self.lowered)
        if symbol is None:
            return None
        k = _Kernel()
        k.handle = self.driver.function(self.handle, symbol)
        params, max_threads, static_shared, dynamic = self.driver.function_info(k.handle)
        if params is None:
            params = self.build.recorded_params(symbol)
        k.desc = KernelDesc(symbol, params, max_threads, static_shared)
        k.dynamic_limit = dynamic
        k.large_clusters = False
        self.kernels[plan_name] = k
        return k


class _Launch:
    __slots__ = ("kernel", "function", "grid", "block", "shared_bytes", "config", "attr", "values", "param_ptrs",
                 "slots", "dims", "gemm")


class _Bound:
    """Everything a call with these shapes needs, computed once."""
    __slots__ = ("dims", "build", "plan", "out_shapes", "out_dtypes", "in_dtypes", "scratch_total", "launches",
                 "module", "lock", "ordinal")


def _align(n, a=256):
    return (n + a - 1) // a * a


class Runner:
    """Runs an exported solution: run(inputs) -> outputs, inputs in the task's order (tensors and
    scalar inputs), outputs in the task's order."""

    # Calls resolved per (device, shapes, scalar values) are kept; beyond this many the oldest goes.
    MAX_BOUND = 256

    def __init__(self, manifest, driver=None):
        self.solution = Solution(manifest)
        self._driver = driver
        self._modules = {}
        self._bound = {}
        self._lock = threading.Lock()
        sol = self.solution
        self._n_inputs = len(sol.inputs)
        # Positions of the tensor and the scalar inputs among the call's inputs.
        self._tensor_pos = [i for i, t in enumerate(sol.inputs) if not t.scalar]
        self._scalar_pos = [(i, t) for i, t in enumerate(sol.inputs) if t.scalar]
        if not self._tensor_pos:
            raise KsRuntimeError("task \"%s\" has no tensor input; the runtime needs one to know the device"
                                 % sol.task_name)

    @property
    def driver(self):
        if self._driver is None:
            self._driver = CudaDriver()
        return self._driver

    def module(self, ordinal, build):
        key = (ordinal, build)
        m = self._modules.get(key)
        if m is None:
            m = self._modules[key] = _Module(self.driver, ordinal, self.solution, build)
        return m

    @staticmethod
    def scalar_of(spec, v):
        """The value libksearch would hold for scalar input `spec` given the caller's `v` (a Python
        number, bool, or a one-element tensor)."""
        try:
            if hasattr(v, "numel") and hasattr(v, "item"):
                if v.numel() != 1:
                    raise KsRuntimeError("scalar input \"%s\" got a tensor of %d elements" % (spec.name, v.numel()))
                v = v.item()
            return scalar_value(spec.dtype, float(v))
        except (TypeError, ValueError, OverflowError) as e:
            raise KsRuntimeError("scalar input \"%s\" (%s) must be a number, got %r (%s)" % (spec.name, spec.dtype, v,
                                                                                          e))

    def bind(self, tensors, scalars, ordinal):
        """Resolves the plan for these tensor inputs (task order) and scalar values (name -> value)."""
        import torch
        sol = self.solution
        shapes = [tuple(t.shape) for t in tensors]
        dims = sol.bind_dims(shapes)
        b = _Bound()
        b.dims = dims
        b.build = sol.build_for(dims, scalars)
        m = self.module(ordinal, b.build)
        b.module = m
        typed = {t.name: (t.dtype, scalars[t.name]) for t in sol.scalar_inputs}
        variables = plan_variables(dims, sol.builds[b.build].params, typed)

        def find(name):
            k = m.kernel(name)
            return None if k is None else k.desc

        b.plan = resolve_plan(sol.plan, variables, sol.tensor_names, find, sol.builds[b.build].kernel_names(),
                              m.limits, typed, {t.name: t.dtype for t in sol.tensors if not t.scalar})
        b.out_shapes = sol.output_shapes(dims)
        b.out_dtypes = [t.torch_type(torch) for t in sol.outputs]
        b.in_dtypes = [t.torch_type(torch) for t in sol.tensor_inputs]
        offsets = {}
        total = 0
        for name, nbytes in b.plan.scratch:
            offsets[name] = total
            total += _align(max(nbytes, 1))
        b.scratch_total = total
        # Buffers by name -> position in the call's pointers (tensor inputs, then outputs).
        index = {t.name: i for i, t in enumerate(sol.tensor_inputs + sol.outputs)}
        b.ordinal = ordinal
        b.launches = []
        for l in b.plan.launches:
            if l.gemm is not None:
                b.launches.append(self._bind_gemm(b, l, shapes, index, offsets, torch))
                continue
            k = m.kernel(l.kernel)
            if l.shared_bytes > k.dynamic_limit:
                self.driver.set_max_dynamic_shared(k.handle, l.shared_bytes, l.kernel)
                k.dynamic_limit = l.shared_bytes
            if l.has_cluster and l.cluster[0] * l.cluster[1] * l.cluster[2] > 8 and not k.large_clusters:
                self.driver.allow_large_clusters(k.handle, l.kernel)
                k.large_clusters = True
            x = _Launch()
            x.gemm = None
            x.kernel, x.function = l.kernel, k.handle
            x.grid, x.block, x.shared_bytes = tuple(l.grid), tuple(l.block), l.shared_bytes
            x.dims = (k.handle,) + x.grid + x.block + (l.shared_bytes,)  # cuLaunchKernel's leading arguments
            n = len(l.args)
            x.values = ctypes.create_string_buffer(8 * max(n, 1))
            x.param_ptrs = (ctypes.c_void_p * max(n, 1))()
            x.slots = []
            base = ctypes.addressof(x.values)
            for i, a in enumerate(l.args):
                x.param_ptrs[i] = base + 8 * i
                if a.is_buffer:
                    slot = ctypes.c_uint64.from_buffer(x.values, 8 * i)
                    if a.buffer in index:
                        x.slots.append((slot, index[a.buffer], 0))
                    else:
                        x.slots.append((slot, -1, offsets[a.buffer]))
                else:
                    ctypes.memmove(base + 8 * i, a.data, a.size)
            x.config = x.attr = None
            if l.has_cluster:
                if self.driver.cuLaunchKernelEx is None:
                    raise KsRuntimeError("cluster launches need cuLaunchKernelEx (a CUDA 12.0 or newer driver)")
                x.attr = _LaunchAttribute(id=CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, x=l.cluster[0], y=l.cluster[1],
                                          z=l.cluster[2])
                x.config = _LaunchConfig(l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2],
                                         l.shared_bytes, None, ctypes.pointer(x.attr), 1)
            b.launches.append(x)
        b.lock = threading.Lock()
        return b

    def _bind_gemm(self, b, l, shapes, index, offsets, torch):
        """A GEMM step's buffers, each checked to hold what the step reaches (CudaProgram::bind_gemm)."""
        sol = self.solution
        g = l.gemm
        where = "launch plan: %s (GEMM step)" % b.plan.step_where(l)
        have = {}
        for t, shape in zip(sol.tensor_inputs + sol.outputs, list(shapes) + b.out_shapes):
            have[t.name] = (t.size * math.prod(shape), t.torch_type(torch))
        for name, nbytes in b.plan.scratch:
            have[name] = (nbytes, None)
        x = _GemmLaunch()
        x.gemm, x.where, x.operands = g, where, []
        for name, need in ((g.a, g.bytes_a()), (g.b, g.bytes_b()), (g.c, g.bytes_c()), (g.d, g.bytes_d()),
                           (g.bias, g.bytes_bias())):
            if not name:
                x.operands.append(None)
                continue
            nbytes, dtype = have[name]
            if need > nbytes:
                raise PlanError("%s: %s reaches %d bytes into `%s`, which has %d; check m, n, k, the leading "
                                "dimensions, batch and strides" % (where, g.describe(), need, name, nbytes))
            if name in index:
                x.operands.append((index[name], 0, nbytes, dtype))
            else:
                dt = {g.a: g.a_type, g.b: g.b_type}.get(name, g.d_type)
                x.operands.append((-1, offsets[name], nbytes, _torch_dtype(torch, _DTYPES[dt][1], name)))
        return x

    def _split(self, inputs):
        """(tensor inputs, scalar values by name, a key for them) of a call's inputs."""
        if len(inputs) != self._n_inputs:
            sol = self.solution
            raise KsRuntimeError("expected %d inputs (%s), got %d" % (len(sol.inputs), ", ".join(
                t.name for t in sol.inputs), len(inputs)))
        if not self._scalar_pos:
            return inputs, {}, ()
        tensors = [inputs[i] for i in self._tensor_pos]
        scalars = {t.name: self.scalar_of(t, inputs[i]) for i, t in self._scalar_pos}
        # Bit patterns, so a NaN is one key.
        return tensors, scalars, tuple(struct.pack("<d", v) for v in scalars.values())

    def run(self, inputs, outputs=None):
        """Launches the plan on `inputs` (the task's inputs in order: tensors, and scalar inputs as Python
        numbers) and returns the outputs (in the task's output order): `outputs` when given
        (destination-passing style), else new tensors."""
        import torch
        tensors, scalars, skey = self._split(inputs)
        first = tensors[0]
        index = first.get_device()
        key = (index, tuple([t.shape for t in tensors]), skey)
        b = self._bound.get(key)
        if b is None:
            with self._lock:
                b = self._bound.get(key)
                if b is None:
                    b = self.bind(tensors, scalars, self.driver.device_of(first))
                    if len(self._bound) >= self.MAX_BOUND:
                        self._bound.pop(next(iter(self._bound)))
                    self._bound[key] = b
        device = first.device
        ptrs = []
        for t, dt in zip(tensors, b.in_dtypes):
            if t.dtype != dt or t.get_device() != index or not t.is_contiguous():
                self._refuse(tensors, b, device)
            ptrs.append(t.data_ptr())
        if outputs is None:
            outputs = [torch.empty(s, dtype=dt, device=device) for s, dt in zip(b.out_shapes, b.out_dtypes)]
        else:
            if len(outputs) != len(b.out_shapes):
                raise KsRuntimeError("expected %d outputs (%s), got %d" % (len(b.out_shapes), ", ".join(
                    t.name for t in self.solution.outputs), len(outputs)))
            for t, s, dt, spec in zip(outputs, b.out_shapes, b.out_dtypes, self.solution.outputs):
                if tuple(t.shape) != s or t.dtype != dt or t.device != device or not t.is_contiguous():
                    raise KsRuntimeError("output \"%s\" must be a contiguous %s tensor of shape %s on %s" % (
                        spec.name, spec.torch_dtype, list(s), device))
        for t in outputs:
            ptrs.append(t.data_ptr())
        # One allocation for every scratch buffer, each at a 256-byte boundary (as cuMemAlloc gives them).
        scratch = torch.empty(b.scratch_total + 255, dtype=torch.uint8, device=device) if b.scratch_total else None
        sbase = _align(scratch.data_ptr()) if scratch is not None else 0
        driver = self.driver
        stream = driver.stream(first)
        with b.lock:
            driver.make_current(b.ordinal)
            for x in b.launches:
                if x.gemm is not None:  # PyTorch's matmul, on PyTorch's current stream as the kernels
                    x.run(list(tensors) + list(outputs), scratch, sbase - scratch.data_ptr() if scratch is not None
                          else 0)
                    continue
                for slot, i, off in x.slots:
                    slot.value = ptrs[i] if i >= 0 else sbase + off
                driver.launch(x, stream)
        return outputs

    def _refuse(self, tensors, b, device):
        for t, dt, spec in zip(tensors, b.in_dtypes, self.solution.tensor_inputs):
            if t.dtype != dt or t.device != device or not t.is_contiguous():
                raise KsRuntimeError("input \"%s\" must be a contiguous %s tensor on %s; got %s%s on %s" % (
                    spec.name, spec.torch_dtype, device, "" if t.is_contiguous() else "non-contiguous ",
                    str(t.dtype).replace("torch.", ""), t.device))

    def describe(self, inputs):
        """The resolved plan for these inputs, in words (for logs)."""
        tensors, scalars, _ = self._split(inputs)
        ordinal = self.driver.device_of(tensors[0])
        b = self.bind(tensors, scalars, ordinal)
        return "build %d (%s): %s" % (b.build, b.module.origin, b.plan.describe())


def load_json(text):
    import json
    return json.loads(text)
