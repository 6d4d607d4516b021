"""Histogram bins as one 4-lane vector: gradient, hessian, count and a padding lane.

A histogram update adds a row's (gradient, hessian, 1, 0) to its bin. Written as
three scalar read-modify-writes it costs three loads and three stores per row
and feature; as one <4 x double> add it costs one of each (AVX2 on x86; two
SSE2 halves on older CPUs, the same result). Numba does not vectorise the three
scalar adds itself (its SLP vectoriser is off by default), so `add_lanes` emits
the vector instructions through an intrinsic. Lane-wise addition is exactly the
scalar addition: results do not change.

Histograms are built three features at a time: each row's vector is loaded once
and added to all three features' bins, and a leaf's gathered statistics are streamed
a third as often (same sums in the same order). On an AMD EPYC a microbenchmark
gave 24% less time per add with two features than with one, and three took 9%
less than two (docs/scribbles.md, section 27).

`prefetch` asks for a cache line ahead of its use: gathering the statistics of a
leaf's rows reads them scattered over the whole array, and fetching the row 32
places ahead cut the gather's time by a quarter.
"""

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

LANES = 4


@intrinsic
def add_lanes(typingctx, dst, dst_offsets, src, src_offset):
    """``dst.flat[o:o+4] += src.flat[src_offset:src_offset+4]`` as one vector add, for the
    offset ``o = dst_offsets`` or each offset of a tuple ``dst_offsets``.

    With a tuple the source vector is loaded once for all its destinations (the
    histograms of two features share each row's statistics). Both arrays must be
    C-contiguous float64; offsets count elements. No bounds checks (callers index
    inside the arrays).
    """
    if not (isinstance(dst, types.Array) and isinstance(src, types.Array)
            and dst.dtype == types.float64 and src.dtype == types.float64):
        return None
    n_destinations = len(dst_offsets) if isinstance(dst_offsets, types.UniTuple) else 0
    sig = types.void(dst, dst_offsets, src, types.intp)

    def codegen(context, builder, signature, args):
        dst_array = context.make_array(signature.args[0])(context, builder, args[0])
        src_array = context.make_array(signature.args[2])(context, builder, args[2])
        vector = ir.VectorType(ir.DoubleType(), LANES).as_pointer()
        by = builder.load(builder.bitcast(builder.gep(src_array.data, [args[3]]), vector),
                          align=8)
        offsets = ([builder.extract_value(args[1], j) for j in range(n_destinations)]
                   if n_destinations else [args[1]])
        for offset in offsets:
            to = builder.bitcast(builder.gep(dst_array.data, [offset]), vector)
            builder.store(builder.fadd(builder.load(to, align=8), by), to, align=8)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def prefetch(typingctx, array, index):
    """Hint the CPU to fetch the cache line of ``array.flat[index]`` (LLVM's ``prefetch``: a
    read, kept in all cache levels). No effect on results; an index outside the array
    does not fault."""
    if not isinstance(array, types.Array):
        return None
    sig = types.void(array, types.intp)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0])
        byte_pointer = ir.IntType(8).as_pointer()
        address = builder.bitcast(builder.gep(data.data, [args[1]]), byte_pointer)
        i32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32]),
            "llvm.prefetch.p0i8")
        builder.call(function, [address, ir.Constant(i32, 0), ir.Constant(i32, 3),
                                ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen
