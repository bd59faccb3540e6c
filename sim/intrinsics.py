"""Two machine-level helpers for the Numba kernels: a cache prefetch and count-trailing-zeros.

Why: the event loops are memory-bound on large graphs (a task's state is touched at
moments far apart), and a load that misses the cache stalls a dependent chain of work.
A software prefetch (``llvm.prefetch``, no fault on any address, retires at once) issued
some events before the data is needed hides that latency; a plain load ("touching" the
row) does not, because it holds the pipeline until the data arrives. ``ctz`` finds the
next non-empty bucket of a bitmap in one instruction (``tzcnt``).

With ``NUMBA_DISABLE_JIT=1`` the same names are plain Python: ``prefetch`` does nothing
and ``ctz`` computes the index with Python integers, so the kernels stay valid Python.
"""

from __future__ import annotations

from typing import Any

import numba
from numba import types

__all__ = ["ctz", "prefetch", "prefetch2"]

ctz: Any  # count trailing zeros: Numba's intrinsic, or plain Python without JIT

if getattr(numba.config, "DISABLE_JIT", False):

    def prefetch(arr, i):  # noqa: ARG001 - same signature as the intrinsic
        """No-op without JIT."""

    def prefetch2(arr, i, j):  # noqa: ARG001
        """No-op without JIT."""

    def _ctz_py(x):
        """Index of the lowest set bit of a non-zero int64 (two's complement)."""
        x = int(x) & 0xFFFFFFFFFFFFFFFF
        return (x & -x).bit_length() - 1

    ctz = _ctz_py

else:
    from llvmlite import ir
    from numba.core import cgutils
    from numba.cpython.unsafe.numbers import trailing_zeros
    from numba.extending import intrinsic

    def _emit_prefetch(context, builder, aty, ary_val, idx_vals, idx_tys):
        """Emit ``llvm.prefetch(ptr, read, locality 3, data)`` for ``ary[idx...]``."""
        ary = context.make_array(aty)(context, builder, ary_val)
        idx = [context.cast(builder, v, t, types.intp) for v, t in zip(idx_vals, idx_tys)]
        ptr = cgutils.get_item_pointer(context, builder, aty, ary, idx,
                                       wraparound=False, boundscheck=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0),
                          ir.Constant(i32, 3), ir.Constant(i32, 1)])

    @intrinsic
    def prefetch(typingctx, arr, i):
        """Prefetch the cache line of ``arr[i]`` (1-D); any index is safe (no fault)."""
        sig = types.void(arr, i)

        def codegen(context, builder, signature, args):
            _emit_prefetch(context, builder, signature.args[0], args[0], args[1:],
                           signature.args[1:])
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def prefetch2(typingctx, arr, i, j):
        """Prefetch the cache line of ``arr[i, j]`` (2-D, C order); any index is safe."""
        sig = types.void(arr, i, j)

        def codegen(context, builder, signature, args):
            _emit_prefetch(context, builder, signature.args[0], args[0], args[1:],
                           signature.args[1:])
            return context.get_dummy_value()

        return sig, codegen

    ctz = trailing_zeros
