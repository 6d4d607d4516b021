"""Histogram bins as one 4-lane vector: gradient, hessian, count and a padding lane.

A histogram update adds a row's (gradient, hessian, 1, 0) to its bin. Written as
three scalar read-modify-writes it costs three loads and three stores per row
and feature; as one <4 x double> add it costs one of each (AVX2 on x86; two
SSE2 halves on older CPUs, the same result). Numba does not vectorise the three
scalar adds itself (its SLP vectoriser is off by default), so `add_lanes` emits
the vector instructions through an intrinsic. Lane-wise addition is exactly the
scalar addition: results do not change.
"""

from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

LANES = 4


@intrinsic
def add_lanes(typingctx, dst, dst_offset, src, src_offset):
    """``dst.flat[dst_offset:dst_offset+4] += src.flat[src_offset:src_offset+4]`` as one vector add.

    Both arrays must be C-contiguous float64; offsets count elements. No bounds
    checks (callers index inside the arrays).
    """
    if not (isinstance(dst, types.Array) and isinstance(src, types.Array)
            and dst.dtype == types.float64 and src.dtype == types.float64):
        return None
    sig = types.void(dst, types.intp, src, types.intp)

    def codegen(context, builder, signature, args):
        dst_array = context.make_array(signature.args[0])(context, builder, args[0])
        src_array = context.make_array(signature.args[2])(context, builder, args[2])
        vector = ir.VectorType(ir.DoubleType(), LANES).as_pointer()
        to = builder.bitcast(builder.gep(dst_array.data, [args[1]]), vector)
        by = builder.bitcast(builder.gep(src_array.data, [args[3]]), vector)
        total = builder.fadd(builder.load(to, align=8), builder.load(by, align=8))
        builder.store(total, to, align=8)
        return context.get_dummy_value()

    return sig, codegen
