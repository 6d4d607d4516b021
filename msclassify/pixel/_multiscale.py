"""Multi-scale prediction: evaluate trees on pyramid blocks, coarse to fine.

A level-L feature is constant on each ``2**L x 2**L`` block of the padded image
(docs/design.md, *Multi-scale prediction*). Each tree is walked once per block of the
coarsest level its root may use; while the path only needs features constant on
the current block, one node evaluation serves every pixel of the block. A node
whose feature lives on a finer level splits the block into four and continues on
each quarter (quarters lying wholly in the padding are dropped); a node that
needs full resolution finishes its subtree pixel by pixel. Leaf values are
added to one accumulator per level, and the levels are upsampled and summed once
at the end.

Under this scheme a node is evaluated once per block of level
``min(root level, levels of the features on its path up to and including it)``,
which is the share ``min(s_p, s_m)`` the core charges with ``share_mode="path"``.
So the pixel-weighted number of evaluations performed here equals the core's
reported evaluation cost divided by ``split_cost``, exactly (tested).

Volumes work the same way with a third axis: a level's block is ``bz x 2**L x
2**L`` (`msclassify.features.VoxelGrid`), and a block splits into its four
(1x2x2 step) or eight (2x2x2 step) children of the next finer level. An image is
the volume of one plane whose blocks never pool z, so both run the same kernels.

This module knows trees (`msclassify.cegb.Booster`) and level arrays, but not
how features are computed: `msclassify.pixel` joins it to the feature bank.
"""

from typing import NamedTuple

import numpy as np
from numba import get_num_threads, njit, prange

from ..features import N_LEVELS
from ._apply import label_dtype

# Columns of the node records the walk reads (`_node_records`): one 64-byte row per node.
_LEVEL, _BASE, _PLANE, _ROW, _COL, _LEFT, _RIGHT, _THRESHOLD = range(8)
# The threshold's column in the float32 view of the records (the first half of `_THRESHOLD`).
_THRESHOLD32 = 2 * _THRESHOLD

# Pending child blocks of one tree walk: at most 7 per block split along the path.
_STACK_SIZE = 7 * (N_LEVELS - 1) + 1


class MultiscaleResult(NamedTuple):
    """Output of `predict_multiscale`.

    Attributes
    ----------
    values : ndarray
        What ``output`` asked for: raw scores (float64, ``(H, W, K)``), class
        probabilities (float32, ``(H, W, n_classes)``) or the most probable class
        (``classes`` values, ``(H, W)``); a volume has ``Z`` in front. Raw scores
        equal per-pixel ``Booster.predict_raw`` up to the order of floating-point
        summation.
    cost_map : ndarray of float64, shape (H, W) or (Z, H, W), or None
        Per-pixel evaluation cost: sum of ``split_cost / share`` over the nodes on
        the pixel's paths (None unless asked for).
    n_evaluations : int
        Block-node evaluations performed (the work done).
    pixel_evaluations : float
        The same evaluations, each weighted by the fraction of its block's pixels
        that lie inside the image: ``sum over pixels and visited nodes of 1/share``.
        For an image whose sides are multiples of 8 it equals ``n_evaluations``.
    """

    values: np.ndarray
    cost_map: np.ndarray | None
    n_evaluations: int
    pixel_evaluations: float


@njit(inline="always")
def _u(index):
    """``index`` (never negative) as unsigned: Numba then indexes an array without the
    test for a negative index that a signed one costs (three instructions a lookup in the
    walk's loops)."""
    return np.uint64(index)


@njit(inline="always")
def _walk_pixels(features, nodes, node_threshold, default_left, value, node_cost, start_node, k,
                 n_outputs, level_zshift, z_start, z_stop, y_start, y_stop, x_start, x_stop,
                 acc_offset, acc_height, acc_width, acc, cost):
    """Walk the subtree below ``start_node`` for every pixel of a block; return the evaluations."""
    n_eval = 0
    for z in range(z_start, z_stop):
        for y in range(y_start, y_stop):
            for x in range(x_start, x_stop):
                node = _u(start_node)
                while True:
                    feature_level = nodes[node, _LEVEL]
                    if feature_level < 0:
                        break
                    at = (nodes[node, _BASE] + (y >> feature_level) * nodes[node, _ROW]
                          + (x >> feature_level) * nodes[node, _COL])
                    if z_stop > 1:
                        at += (z >> level_zshift[_u(feature_level)]) * nodes[node, _PLANE]
                    v = features[_u(at)]
                    n_eval += 1
                    if cost is not None:
                        cost[_u(acc_offset // n_outputs + (z * acc_height + y) * acc_width
                                + x)] += node_cost[node]
                    go_left = v <= node_threshold[node, _THRESHOLD32] or (np.isnan(v)
                                                                        and default_left[node])
                    node = _u(nodes[node, _LEFT] if go_left else nodes[node, _RIGHT])
                acc[_u(acc_offset + ((z * acc_height + y) * acc_width + x) * n_outputs
                       + k)] += value[node]
    return n_eval


@njit(inline="always")
def _push(stack, pending, node, level, start, stop):
    """Put a list ``blocks[start:stop]`` of level-``level`` blocks at ``node`` on the stack."""
    stack[pending, 0] = node
    stack[pending, 1] = level
    stack[pending, 2] = start
    stack[pending, 3] = stop
    return pending + 1


@njit(inline="always")
def _split_record(nodes, node_threshold, default_left, node, level, feature_level):
    """What split ``node`` reads for a level-``level`` block ``(y, x)`` of `_walk_row`: the
    block goes left if ``v <= threshold`` or ``v`` is NaN and ``nan_left``, where ``v =
    features[base + (y >> shift) * row_step + (x >> shift) * col_step]``."""
    return (feature_level - level, nodes[node, _BASE], nodes[node, _ROW], nodes[node, _COL],
            node_threshold[node, _THRESHOLD32], default_left[node])


@njit(inline="always")
def _goes_left(v, threshold, nan_left):
    """Whether ``v`` goes left at a split: ``v <= threshold``, or NaN with ``nan_left``. With
    ``nan_left`` a constant this is one comparison (``not v > threshold`` is true for NaN)."""
    return not (v > threshold) if nan_left else v <= threshold


@njit(inline="always")
def _split_blocks(features, split, nan_left, y_first, blocks, spare, start, stop, target):
    """Split the level-``level`` blocks ``blocks[start:stop]`` of a row (`_walk_row`) at the
    split ``split`` (`_split_record`; NaN goes left if ``nan_left``): the blocks going left
    go to ``blocks[target:]``, in order, and those going right follow them, in order.
    Return how many go left."""
    shift, base, row_step, col_step, threshold, _ = split
    n_left = 0
    n_right = 0
    for i in range(start, stop):
        block = blocks[_u(i)]
        wide = np.int64(block)
        v = features[_u(base + ((y_first + (wide & 7)) >> shift) * row_step
                        + ((wide >> 3) >> shift) * col_step)]
        go_left = _goes_left(v, threshold, nan_left)
        blocks[_u(target + n_left)] = block
        spare[_u(n_right)] = block
        n_left += go_left
        n_right += 1 - go_left
    blocks[target + n_left:target + stop - start] = spare[:n_right]
    return n_left


@njit(inline="always")
def _split_to_leaves(features, nodes, node_threshold, default_left, value, node, level,
                     feature_level, y_first, blocks, start, stop, target, acc_base, row_width,
                     n_outputs, acc, left_leaf, right_leaf, nan_left):
    """Evaluate split ``node``, a child of which at least is a leaf, on the level-``level``
    blocks ``blocks[start:stop]`` of a row (`_walk_row`), in one pass: a block going to a
    leaf child adds its value to the block's accumulator cell; with one leaf child, the
    blocks going to the other child are kept, in order, at ``blocks[target:]`` (two leaves
    write no block). Return how many were kept. ``nan_left`` is ``default_left[node]``,
    passed as a constant (`_goes_left`).

    Every block adds a value, 0.0 if its child is not a leaf, without a branch: that leaves
    the cell as it was, since no cell is ever -0.0 (they start at +0.0, and a sum is -0.0
    only if both terms are).
    """
    shift, base, row_step, col_step, threshold, _ = _split_record(
        nodes, node_threshold, default_left, node, level, feature_level)
    left_value = value[nodes[node, _LEFT]] if left_leaf else 0.0
    right_value = value[nodes[node, _RIGHT]] if right_leaf else 0.0
    n_kept = 0
    if left_leaf and right_leaf:
        for i in range(start, stop):
            wide = np.int64(blocks[_u(i)])
            y = y_first + (wide & 7)
            x = wide >> 3
            v = features[_u(base + (y >> shift) * row_step + (x >> shift) * col_step)]
            go_left = _goes_left(v, threshold, nan_left)
            acc[_u(acc_base + (y * row_width + x) * n_outputs)] += \
                left_value if go_left else right_value
        return n_kept
    for i in range(start, stop):
        block = blocks[_u(i)]
        wide = np.int64(block)
        y = y_first + (wide & 7)
        x = wide >> 3
        v = features[_u(base + (y >> shift) * row_step + (x >> shift) * col_step)]
        go_left = _goes_left(v, threshold, nan_left)
        acc[_u(acc_base + (y * row_width + x) * n_outputs)] += \
            left_value if go_left else right_value
        blocks[_u(target + n_kept)] = block
        n_kept += go_left ^ left_leaf
    return n_kept


# A level-0 list of `_walk_row` holds level-1 blocks with a mask of their pixels:
# ``mask << 24 | x << 3 | dy``, bit ``2 * py + px`` for the pixel (py, px) of the block.
_MASK_SHIFT = 24
_POSITION = (1 << _MASK_SHIFT) - 1
_ALL_PIXELS = 0xF << _MASK_SHIFT


@njit(inline="always")
def _pixels_in(blocks, start, stop):
    """Pixels of the masked level-1 blocks ``blocks[start:stop]``."""
    n = 0
    for i in range(start, stop):
        mask = np.int64(blocks[_u(i)]) >> _MASK_SHIFT
        n += (mask & 1) + ((mask >> 1) & 1) + ((mask >> 2) & 1) + (mask >> 3)
    return n


@njit(inline="always")
def _add_to_pixels(acc, base, row_width, n_outputs, y, x, mask, left, left_value, right_value):
    """Add ``left_value`` to the pixels of level-1 block (y, x) in both ``mask`` and ``left``,
    ``right_value`` to those only in ``mask``, 0.0 to the others (no branch: a cell is
    never -0.0, so adding 0.0 leaves it as it was)."""
    at = base + 2 * (y * row_width + x) * n_outputs
    below = at + row_width * n_outputs
    v = left_value if left & 1 else right_value
    acc[_u(at)] += v if mask & 1 else 0.0
    v = left_value if left & 2 else right_value
    acc[_u(at + n_outputs)] += v if mask & 2 else 0.0
    v = left_value if left & 4 else right_value
    acc[_u(below)] += v if mask & 4 else 0.0
    v = left_value if left & 8 else right_value
    acc[_u(below + n_outputs)] += v if mask & 8 else 0.0


@njit(inline="always")
def _split_pixels(features, nodes, node_threshold, default_left, value, node, feature_level,
                  y_first, blocks, start, stop, target, spare, acc, acc_base, row_width,
                  n_outputs, left_leaf, right_leaf, nan_left):
    """Evaluate split ``node`` on the masked level-1 blocks ``blocks[start:stop]`` of a
    level-0 list of `_walk_row`: a pixel feature on each pixel of a block (four tests), a
    coarser one once for the block. Each block's pixels going left keep it, with their
    mask, at ``blocks[target:]`` in order, those going right at ``spare[0:]``; pixels going
    to a leaf child (``left_leaf`` / ``right_leaf``) add its value instead. Return the
    numbers of blocks kept on each side. ``nan_left`` is ``default_left[node]``, passed as
    a constant (`_goes_left`).
    """
    base = nodes[node, _BASE]
    row_step = nodes[node, _ROW]
    col_step = nodes[node, _COL]
    threshold = node_threshold[node, _THRESHOLD32]
    left_value = value[nodes[node, _LEFT]] if left_leaf else 0.0
    right_value = value[nodes[node, _RIGHT]] if right_leaf else 0.0
    shift = feature_level - 1
    n_left = 0
    n_right = 0
    for i in range(start, stop):
        wide = np.int64(blocks[_u(i)])
        y = y_first + (wide & 7)
        x = (wide >> 3) & (_POSITION >> 3)
        mask = wide >> _MASK_SHIFT
        if feature_level == 0:
            at = base + 2 * (y * row_step + x * col_step)
            v0 = features[_u(at)]
            v1 = features[_u(at + col_step)]
            v2 = features[_u(at + row_step)]
            v3 = features[_u(at + row_step + col_step)]
            left = (np.int64(_goes_left(v0, threshold, nan_left))
                    | (np.int64(_goes_left(v1, threshold, nan_left)) << 1)
                    | (np.int64(_goes_left(v2, threshold, nan_left)) << 2)
                    | (np.int64(_goes_left(v3, threshold, nan_left)) << 3))
        else:
            v = features[_u(base + (y >> shift) * row_step + (x >> shift) * col_step)]
            left = -np.int64(_goes_left(v, threshold, nan_left)) & 0xF
        if left_leaf or right_leaf:
            _add_to_pixels(acc, acc_base, row_width, n_outputs, y, x, mask, left, left_value,
                           right_value)
        left_mask = mask & left
        right_mask = mask & ~left
        position = wide & _POSITION
        blocks[_u(target + n_left)] = (left_mask << _MASK_SHIFT) | position
        spare[_u(n_right)] = (right_mask << _MASK_SHIFT) | position
        n_left += (left_mask != 0) & (not left_leaf)
        n_right += (right_mask != 0) & (not right_leaf)
    return n_left, n_right


@njit(inline="always")
def _walk_pixel_list(features, nodes, node_threshold, default_left, value, same_root, keep,
                     start_level, block_row, templates, first, top, blocks, spare, stack,
                     pending, node, start, stop, feature_level, acc_base, row_width, n_outputs,
                     acc, root_left, root_count):
    """`_walk_row`'s step for node ``node`` on the level-0 list ``blocks[start:stop]``
    (masked level-1 blocks): a leaf adds its value to their pixels; a split divides their
    pixels (`_split_pixels`) and pushes the children's lists. A root (its blocks are the
    template) writes its lists to fresh room; it may reuse (``same_root``) or save
    (``keep``) the root lists, whose sizes ``root_left`` and ``root_count`` it passes on.
    Return ``pending``, the pixel evaluations, ``root_left`` and ``root_count``.
    """
    y_first = np.int64(block_row) << (start_level - 1)
    if feature_level < 0:
        leaf = value[node]
        for i in range(start, stop):
            wide = np.int64(blocks[_u(i)])
            _add_to_pixels(acc, acc_base, row_width, n_outputs, y_first + (wide & 7),
                           (wide >> 3) & (_POSITION >> 3), wide >> _MASK_SHIFT, 0xF, leaf, 0.0)
        return pending, 0, root_left, root_count
    n_eval = _pixels_in(blocks, start, stop)
    root = start >= templates
    left = nodes[node, _LEFT]
    right = nodes[node, _RIGHT]
    saved = 2 * templates + first[0]
    if root and same_root:
        # The previous tree's root split alike: its lists, as saved.
        target = top[0]
        n_left = root_left
        n_right = root_count - root_left
        blocks[target:target + root_count] = blocks[saved:saved + root_count]
        right_at = target + n_left
        top[0] = right_at + n_right
    else:
        # A leaf child takes its pixels' values in the pass, unless the next tree reuses
        # this root's lists.
        target = top[0] if root else start
        left_leaf = nodes[left, _LEVEL] < 0 and not (root and keep)
        right_leaf = nodes[right, _LEVEL] < 0 and not (root and keep)
        # NaN's way as a constant: each call compiles to one comparison a value
        if default_left[node]:
            n_left, n_right = _split_pixels(
                features, nodes, node_threshold, default_left, value, node, feature_level,
                y_first, blocks, start, stop, target, spare, acc, acc_base, row_width,
                n_outputs, left_leaf, right_leaf, True)
        else:
            n_left, n_right = _split_pixels(
                features, nodes, node_threshold, default_left, value, node, feature_level,
                y_first, blocks, start, stop, target, spare, acc, acc_base, row_width,
                n_outputs, left_leaf, right_leaf, False)
        if root:
            right_at = target + n_left
            top[0] = right_at + n_right
        elif n_left + n_right <= stop - start:
            right_at = target + n_left
        else:
            right_at = top[0]
            top[0] += n_right
        blocks[right_at:right_at + n_right] = spare[:n_right]
        if root and keep:
            root_left = n_left
            root_count = n_left + n_right
            blocks[saved:saved + root_count] = blocks[target:target + root_count]
    if n_right > 0:
        pending = _push(stack, pending, right, 0, right_at, right_at + n_right)
    if n_left > 0:      # walked first
        pending = _push(stack, pending, left, 0, target, target + n_left)
    return pending, n_eval, root_left, root_count


@njit(inline="always")
def _list_offsets(n_cols, start_level, n_levels, path_nodes):
    """Where each level's list of `_walk_row` starts in its buffer (and, last, where the
    lists end) for a row of ``n_cols`` start-level blocks."""
    first = np.empty(n_levels + 1, dtype=np.int64)
    first[0] = 0
    for level in range(n_levels):
        first[level + 1] = first[level] + ((n_cols << (2 * (start_level - level)))
                                           if level <= start_level else 0)
    # A level-0 list's pixel splits may keep a block on both sides, and the right ones then
    # go to fresh room: a node writes at most one block per pixel reaching it, and a pixel
    # reaches at most `path_nodes` nodes of a tree.
    first[1:] += first[1] * path_nodes
    return first


@njit(inline="always")
def _list_buffers(n_cols, start_level, n_levels, path_nodes):
    """The ``blocks`` and ``spare`` buffers of `_walk_row` for rows of ``n_cols`` blocks:
    the lists; after them each level's blocks of the row in order (a tree's first blocks,
    read in place by its root, filled on a level's first use); last, a root's two lists
    as it left them, for the next tree when its root splits alike."""
    first = _list_offsets(n_cols, start_level, n_levels, path_nodes)
    return (np.empty(3 * first[n_levels], dtype=np.int32),
            np.empty(max(first[1], 1), dtype=np.int32))


@njit(cache=True, nogil=True)
def _walk_row(features, nodes, node_threshold, default_left, value, roots, root_level, same_root,
              tree_output, n_outputs, start_level, block_row, n_cols, level_offset, level_width,
              path_nodes, blocks, spare, acc):
    """`_walk_blocks` on the first ``n_cols`` start-level blocks of one row of an image, all
    inside the image and without a cost map; return the evaluations.

    The same blocks, evaluations and leaf values, in another order: tree by tree, every
    node splits the row's list of blocks that reach it into those going left and those
    going right, in one branch-free pass over the feature values (a walk per block
    mispredicts about one branch per node). A node finer than its blocks replaces each
    by its children on the node's level, which ``nodes`` reaches without the blocks in
    between (those evaluate nothing). A level-L block of the row is one int32,
    ``x << 3 | dy``, its column and its row below the row's first on that level (less than
    ``2**start_level <= 8``); each level has its own list, which holds each of the row's
    blocks of that level at most once per tree (a block splits at most once). Level 0's
    list holds level-1 blocks with a mask of their pixels instead (`_walk_pixel_list`): a
    test coarser than a pixel is made once for a block's pixels that reach it, and counted
    once per pixel, as the general walk makes it. A tree's root reads its level's blocks of
    the row in place (a root on a pixel feature, the row's level-1 blocks with all their
    pixels) and writes its two lists to the level's list. A split with a leaf child adds the
    leaf's value to the blocks going there in its own pass (`_split_to_leaves`) and keeps
    only the others. A root whose next tree's root splits alike (``same_root[t + 1]``) keeps
    both lists and saves them; that next root copies them back and is counted without being
    evaluated again. Every accumulator cell still adds its trees in tree order. ``blocks``
    and ``spare`` hold the lists (`_list_buffers`: allocated once per thread, not per row).
    """
    n_levels = level_offset.shape[0]
    first = _list_offsets(n_cols, start_level, n_levels, path_nodes)
    templates = first[n_levels]
    root_left = 0
    root_count = 0
    filled = np.zeros(n_levels, dtype=np.bool_)
    top = np.empty(n_levels, dtype=np.int64)
    # Lists still to walk, (node, level, start, stop): the right children along one path.
    stack = np.empty((nodes.shape[0] + 1, 4), dtype=np.int64)
    n_eval = 0
    for t in range(roots.shape[0]):
        k = tree_output[t]
        level = np.int64(root_level[t])
        if nodes[roots[t], _LEVEL] == 0:
            level = np.int64(0)         # a pixel feature's root reads the row's pixels in place
        # The next tree reuses this tree's root lists: the root keeps both (even beside a
        # leaf child) and saves them.
        keep = t + 1 < roots.shape[0] and same_root[t + 1]
        step = start_level - max(level, 1)
        for L in range(n_levels):
            top[L] = first[L]
        # The tree's first blocks: the level-`level` blocks of the row's start-level blocks
        # (on level 0, the level-1 blocks with all their pixels).
        start = templates + first[level]
        stop = start + (n_cols << (2 * step))
        if not filled[level]:
            at = start
            for x in range(n_cols << step):
                for dy in range(1 << step):
                    blocks[at] = (x << 3) | dy | (_ALL_PIXELS if level == 0 else 0)
                    at += 1
            filled[level] = True
        pending = _push(stack, 0, roots[t], level, start, stop)
        while pending > 0:
            pending -= 1
            node, level, start, stop = stack[pending]
            feature_level = nodes[node, _LEVEL]
            if level == 0:
                pending, n, root_left, root_count = _walk_pixel_list(
                    features, nodes, node_threshold, default_left, value, same_root[t], keep,
                    start_level, block_row, templates, first, top, blocks, spare, stack, pending,
                    node, start, stop, feature_level, level_offset[0] + k, level_width[0],
                    n_outputs, acc, root_left, root_count)
                n_eval += n
                continue
            y_first = np.int64(block_row) << (start_level - level)
            if feature_level < 0:
                base = level_offset[level] + k
                row_width = level_width[level]
                leaf = value[node]
                for i in range(start, stop):
                    block = np.int64(blocks[_u(i)])
                    acc[_u(base + ((y_first + (block & 7)) * row_width + (block >> 3))
                           * n_outputs)] += leaf
            elif feature_level < level:
                # Finer than the blocks: their children on the feature's level (for a pixel
                # feature, the level-1 blocks with all their pixels).
                shift = level - max(feature_level, 1)
                side = 1 << shift
                pixels = _ALL_PIXELS if feature_level == 0 else 0
                at = top[feature_level]
                for i in range(start, stop):
                    block = np.int64(blocks[_u(i)])
                    child = ((block >> 3) << (shift + 3)) | ((block & 7) << shift) | pixels
                    for dx in range(side):
                        for dy in range(side):
                            blocks[_u(at)] = child + ((dx << 3) | dy)
                            at += 1
                pending = _push(stack, pending, node, feature_level, top[feature_level], at)
                top[feature_level] = at
            else:
                # One evaluation per block: the left ones stay in place (a root's blocks go
                # to the level's list), in order, the right ones go to the spare list and
                # follow them. A leaf child takes its value in the same pass instead.
                count = stop - start
                root = start >= templates
                target = start
                if root:
                    target = top[level]
                    top[level] += count
                n_eval += count
                left = nodes[node, _LEFT]
                right = nodes[node, _RIGHT]
                left_leaf = nodes[left, _LEVEL] < 0
                right_leaf = nodes[right, _LEVEL] < 0
                if (left_leaf or right_leaf) and not (root and (same_root[t] or keep)):
                    acc_base = level_offset[level] + k
                    row_width = level_width[level]
                    # NaN's way as a constant: each call compiles to one comparison a block
                    if default_left[node]:
                        n_kept = _split_to_leaves(
                            features, nodes, node_threshold, default_left, value, node, level,
                            feature_level, y_first, blocks, start, stop, target, acc_base,
                            row_width, n_outputs, acc, left_leaf, right_leaf, True)
                    else:
                        n_kept = _split_to_leaves(
                            features, nodes, node_threshold, default_left, value, node, level,
                            feature_level, y_first, blocks, start, stop, target, acc_base,
                            row_width, n_outputs, acc, left_leaf, right_leaf, False)
                    if n_kept > 0:
                        pending = _push(stack, pending, right if left_leaf else left, level,
                                        target, target + n_kept)
                    continue
                if root and same_root[t]:
                    # The previous tree's root split alike: its lists, as saved.
                    n_left = root_left
                    blocks[target:target + count] = blocks[2 * templates + first[level]:
                                                           2 * templates + first[level] + count]
                else:
                    split = _split_record(nodes, node_threshold, default_left, node, level,
                                          feature_level)
                    # NaN's way as a constant: each call compiles to a loop of one comparison
                    if split[5]:
                        n_left = _split_blocks(features, split, True, y_first, blocks, spare,
                                               start, stop, target)
                    else:
                        n_left = _split_blocks(features, split, False, y_first, blocks, spare,
                                               start, stop, target)
                    if root and keep:
                        root_left = n_left
                        blocks[2 * templates + first[level]:
                               2 * templates + first[level] + count] = blocks[target:
                                                                              target + count]
                start = target
                stop = target + count
                middle = start + n_left
                if stop > middle:
                    pending = _push(stack, pending, right, level, middle, stop)
                if middle > start:      # walked first
                    pending = _push(stack, pending, left, level, start, middle)
    return n_eval


@njit(cache=True, nogil=True)
def _longest_path(nodes, roots):
    """The most nodes on a path from a root of ``roots`` to a leaf, the leaf included."""
    depth = np.zeros(nodes.shape[0], dtype=np.int64)
    longest = 0
    for root in roots:
        depth[root] = 1
        stack = [root]
        while len(stack) > 0:
            node = stack.pop()
            longest = max(longest, depth[node])
            if nodes[node, _LEVEL] >= 0:
                for child in (nodes[node, _LEFT], nodes[node, _RIGHT]):
                    depth[child] = depth[node] + 1
                    stack.append(child)
    return longest


@njit(cache=True, nogil=True)
def _walk_general(features, nodes, node_threshold, default_left, value, node_cost, roots,
                  root_level, tree_output, n_outputs, start_level, depth, height, width,
                  level_zshift, level_offset, level_height, level_width, acc, cost, unit_bits,
                  block_plane, block_row, first_col, n_block_cols):
    """`_walk_blocks`' general walk of the start-level blocks ``first_col:n_block_cols`` of
    one row (plane ``block_plane``, row ``block_row``), block by block and tree by tree; return
    the evaluations of blocks inside the image, those of blocks reaching into the padding,
    and the latter's image pixels in units of ``2**-unit_bits`` of a coarsest block. Its own
    function, so that the walk by lists' loop in `_walk_blocks` is compiled without it."""
    start_zshift = level_zshift[start_level]
    stack_node = np.empty(_STACK_SIZE, dtype=np.int64)
    stack_level = np.empty(_STACK_SIZE, dtype=np.int64)
    stack_z = np.empty(_STACK_SIZE, dtype=np.int64)
    stack_y = np.empty(_STACK_SIZE, dtype=np.int64)
    stack_x = np.empty(_STACK_SIZE, dtype=np.int64)
    n_inside = 0
    n_border = 0
    border_units = 0
    for block_col in range(first_col, n_block_cols):
        # A start-level block wholly inside the image: so are all its blocks.
        block_inside = (((block_plane + 1) << start_zshift) <= depth
                        and ((block_row + 1) << start_level) <= height
                        and ((block_col + 1) << start_level) <= width)
        for t in range(roots.shape[0]):
            k = tree_output[t]
            first_level = np.int64(root_level[t])
            # The level-`first_level` blocks of this start-level block holding image pixels.
            first_zshift = level_zshift[first_level]
            z_factor = start_zshift - first_zshift
            step = start_level - first_level
            z_first = np.int64(block_plane) << z_factor
            y_first = np.int64(block_row) << step
            x_first = np.int64(block_col) << step
            z_last = min(z_first + (1 << z_factor),
                         (depth + (1 << first_zshift) - 1) >> first_zshift)
            y_last = min(y_first + (1 << step),
                         (height + (1 << first_level) - 1) >> first_level)
            x_last = min(x_first + (1 << step),
                         (width + (1 << first_level) - 1) >> first_level)
            for z_root in range(z_first, z_last):
                for y_root in range(y_first, y_last):
                    for x_root in range(x_first, x_last):
                        node = _u(roots[t])
                        level = first_level
                        z = z_root
                        y = y_root
                        x = x_root
                        top = 0
                        while True:
                            zshift = level_zshift[_u(level)]
                            back = (z + 1) << zshift
                            bottom = (y + 1) << level
                            right_edge = (x + 1) << level
                            # Every feature constant on this block: one evaluation
                            # serves it.
                            n = 0
                            feature_level = nodes[node, _LEVEL]
                            while feature_level >= level:
                                shift = feature_level - level
                                at = (nodes[node, _BASE] + (y >> shift) * nodes[node, _ROW]
                                      + (x >> shift) * nodes[node, _COL])
                                # an image's plane term is 0: skip its lookup
                                if depth > 1:
                                    at += ((z >> (level_zshift[_u(feature_level)] - zshift))
                                           * nodes[node, _PLANE])
                                v = features[_u(at)]
                                n += 1
                                if cost is not None:
                                    cost[_u(level_offset[_u(level)] // n_outputs
                                           + (z * level_height[_u(level)] + y)
                                           * level_width[_u(level)] + x)] += \
                                        node_cost[node]
                                go_left = (v <= node_threshold[node, _THRESHOLD32]
                                           or (np.isnan(v) and default_left[node]))
                                node = _u(nodes[node, _LEFT] if go_left
                                          else nodes[node, _RIGHT])
                                feature_level = nodes[node, _LEVEL]
                            if block_inside or (back <= depth and bottom <= height
                                                and right_edge <= width):
                                n_inside += n
                            elif n > 0:
                                n_border += n
                                border_units += n * (
                                    ((min(depth, back) - (z << zshift))
                                     * (min(height, bottom) - (y << level))
                                     * (min(width, right_edge) - (x << level)))
                                    << (unit_bits - 2 * level - zshift))
                            if feature_level < 0:
                                acc[_u(level_offset[_u(level)]
                                       + ((z * level_height[_u(level)] + y)
                                          * level_width[_u(level)] + x)
                                       * n_outputs + k)] += value[node]
                            elif feature_level == 0:
                                # Nothing is finer than a pixel: finish the subtree pixel by
                                # pixel, without the block bookkeeping.
                                n_inside += _walk_pixels(
                                    features, nodes, node_threshold, default_left, value,
                                    node_cost, node, k, n_outputs, level_zshift,
                                    z << zshift, min(depth, back), y << level,
                                    min(height, bottom),
                                    x << level, min(width, right_edge), level_offset[0],
                                    level_height[0], level_width[0], acc, cost)
                            else:
                                # A coarser feature than a pixel but finer than the block:
                                # continue on the first child block (4 in a 1x2x2 step, 8 in
                                # a 2x2x2 step), queue the others that hold image pixels.
                                level -= 1
                                z_step = zshift - level_zshift[_u(level)]
                                zshift = level_zshift[_u(level)]
                                z <<= z_step
                                y *= 2
                                x *= 2
                                for dz in range(1 << z_step):
                                    if ((z + dz) << zshift) >= depth:
                                        break
                                    for dy in range(2):
                                        if ((y + dy) << level) >= height:
                                            break
                                        for dx in range(2):
                                            if ((x + dx) << level) >= width:
                                                break
                                            if dz + dy + dx == 0:
                                                continue
                                            stack_node[_u(top)] = node
                                            stack_level[_u(top)] = level
                                            stack_z[_u(top)] = z + dz
                                            stack_y[_u(top)] = y + dy
                                            stack_x[_u(top)] = x + dx
                                            top += 1
                                continue
                            if top == 0:
                                break
                            top -= 1
                            node = _u(stack_node[_u(top)])
                            level = stack_level[_u(top)]
                            z = stack_z[_u(top)]
                            y = stack_y[_u(top)]
                            x = stack_x[_u(top)]
    return n_inside, n_border, border_units


@njit(cache=True, parallel=True, nogil=True)
def _walk_blocks(features, nodes, node_threshold, default_left, value, node_cost, roots,
                 root_level, same_root, tree_output, n_outputs, start_level, depth, height, width,
                 level_zshift, level_offset, level_height, level_width, acc, cost, evaluations,
                 pixel_evaluations, n_threads, labels=None, classes=None, levels_used=None,
                 init=None):
    """Walk every tree over every start-level block, coarse to fine, on ``n_threads``.

    All feature levels live in the flat ``features`` buffer. Node ``n`` is the record
    ``nodes[n] = (level, base, plane, row, col, left, right, threshold)`` (one cache
    line; level -1 for a leaf; ``node_threshold`` is the same buffer as float32, whose
    column ``_THRESHOLD32`` holds the threshold rounded down to a float32,
    `float32_threshold`): a split reads its feature at level-``level`` position
    (p, r, c) from ``features[base + p * plane + r * row + c * col]``, addresses that
    depend on the node alone, so a node evaluation waits for one lookup, not two (an
    image, ``depth == 1``, skips the plane term, whose level lookup would be a second). A
    level-L block spans ``2**level_zshift[L]`` planes (an image has one plane and
    shifts 0). ``acc[level_offset[L] + ((z * level_height[L] + y)
    * level_width[L] + x) * K + k]`` accumulates the leaf values of output k reached
    by the level-L block (z, y, x); ``cost`` the node costs, indexed the same way
    with K = 1, or None: Numba then compiles the walk without the cost code. Work is
    split by rows of start-level blocks, which own disjoint rows of every finer level,
    so writes never race. Within a start-level block the trees run in order and each
    adds at most one value to a cell, so every cell sums its trees in tree order,
    whatever the order of the blocks.

    Tree ``t`` is first walked on the blocks of ``root_level[t]`` (its root's
    feature level, or the start level for a leaf or a pixel feature) inside the
    start-level block: a coarser block would only be split down to them, without an
    evaluation. Whether a block reaches into the padding is decided once per block
    visit, not per evaluation (once per start-level block when it lies wholly inside the
    image): evaluations of blocks wholly inside the image are
    counted as integers, those of blocks reaching into the padding by their fraction
    of image pixels, summed exactly in units of ``2**-unit_bits`` of a coarsest block.
    The common case, an image's row of start-level blocks inside the image without a cost
    map (of a model with a feature coarser than a pixel, and narrower than 2**22 pixels), is
    walked up to its last whole block by `_walk_row`, without that bookkeeping
    and without a branch per node.

    With ``labels`` (``(Z * H, W)``: ``classes[most probable]`` of each pixel, from the
    scores ``init`` plus the accumulators of ``levels_used``, as `_row_scores` and
    `_row_classes` give them), each row of start-level blocks, once walked, writes the
    classes of its rows of pixels, while their accumulator cells are still in cache:
    the same sums in the same order, without a second parallel pass over the
    accumulators. Without (None), Numba compiles the walk without that code.
    """
    n_levels = level_zshift.shape[0]
    unit_bits = 2 * (n_levels - 1) + level_zshift[n_levels - 1]
    start_zshift = level_zshift[start_level]
    n_block_planes = (depth + (1 << start_zshift) - 1) >> start_zshift
    n_block_rows = (height + (1 << start_level) - 1) >> start_level
    n_block_cols = (width + (1 << start_level) - 1) >> start_level
    path_nodes = _longest_path(nodes, roots)
    n_rows = n_block_planes * n_block_rows
    n_chunks = min(n_threads, n_rows)
    # Each thread walks a run of rows (as prange's static schedule would), so the lists'
    # buffers of `_walk_row` are allocated once per thread, not per row.
    for chunk in prange(n_chunks):
        row_blocks, row_spare = _list_buffers(width >> start_level, start_level, n_levels,
                                              path_nodes)
        if labels is not None:
            scores = np.empty((width, n_outputs))
        for block_index in range(chunk * n_rows // n_chunks, (chunk + 1) * n_rows // n_chunks):
            n_inside = 0
            n_border = 0
            border_units = 0
            block_plane = block_index // n_block_rows
            block_row = block_index - block_plane * n_block_rows
            n_listed = 0
            if depth == 1 and cost is None and start_level > 0 and (width >> 1) <= _POSITION >> 3 \
                    and ((block_row + 1) << start_level) <= height:
                # The common case: an image's row of blocks inside the image, without a cost
                # map, walked with lists of blocks (`_walk_row`) up to its last whole block.
                n_listed = width >> start_level
                if n_listed > 0:
                    n_inside += _walk_row(features, nodes, node_threshold, default_left, value,
                                          roots, root_level, same_root, tree_output, n_outputs,
                                          start_level, block_row, n_listed, level_offset,
                                          level_width, path_nodes, row_blocks, row_spare, acc)
            if n_listed < n_block_cols:
                # The rest of the row (a volume's, a cost map's, or an image's border blocks).
                inside, n_border, border_units = _walk_general(
                    features, nodes, node_threshold, default_left, value, node_cost, roots,
                    root_level, tree_output, n_outputs, start_level, depth, height, width,
                    level_zshift, level_offset, level_height, level_width, acc, cost,
                    unit_bits, block_plane, block_row, n_listed, n_block_cols)
                n_inside += inside
            evaluations[block_index] = n_inside + n_border
            pixel_evaluations[block_index] = n_inside + border_units / (1 << unit_bits)
            if labels is not None:
                # Every cell under this row of blocks is final: the classes of its pixels.
                for z in range(block_plane << start_zshift,
                               min(depth, (block_plane + 1) << start_zshift)):
                    for y in range(block_row << start_level,
                                   min(height, (block_row + 1) << start_level)):
                        r = z * height + y
                        _row_scores(acc, level_offset, level_height, level_width, level_zshift,
                                    levels_used, init, height, r, n_outputs, scores)
                        _row_classes(scores, n_outputs, classes, labels[r])


@njit(inline="always")
def _row_scores_one(acc, level_offset, level_height, level_width, level_zshift, levels_used,
                    init, height, r, scores):
    """`_row_scores` of a model with one output into ``scores`` (W,), the same sums in the
    same order: a level-L cell's value is read once and added to its ``2**L`` pixels."""
    z = r // height
    y = r - z * height
    width = scores.shape[0]
    for x in range(width):
        scores[x] = init[0]
    for L in levels_used:
        base = level_offset[L] + ((z >> level_zshift[L]) * level_height[L] + (y >> L)) \
            * level_width[L]
        for cell in range((width + (1 << L) - 1) >> L):
            v = acc[base + cell]
            for x in range(cell << L, min(width, (cell + 1) << L)):
                scores[x] += v


@njit(inline="always")
def _row_scores(acc, level_offset, level_height, level_width, level_zshift, levels_used, init,
                height, r, n_outputs, row):
    """``row[x, k] = init[k] + sum over used levels L of acc_L[z >> zs_L, y >> L, x >> L, k]``
    for row ``r = z * height + y`` of the output (C-contiguous)."""
    if n_outputs == 1:
        _row_scores_one(acc, level_offset, level_height, level_width, level_zshift, levels_used,
                        init, height, r, row.reshape(row.shape[0]))
        return
    z = r // height
    y = r - z * height
    for x in range(row.shape[0]):
        for k in range(n_outputs):
            row[x, k] = init[k]
    for L in levels_used:
        base = level_offset[L] + ((z >> level_zshift[L]) * level_height[L]
                                  + (y >> L)) * level_width[L] * n_outputs
        for x in range(row.shape[0]):
            for k in range(n_outputs):
                row[x, k] += acc[base + (x >> L) * n_outputs + k]


@njit(cache=True, parallel=True, nogil=True)
def _scores(acc, level_offset, level_height, level_width, level_zshift, levels_used, init,
            height, n_outputs, out):
    """Raw scores ``out`` (Z * H, W, K) from the per-level accumulators."""
    for r in prange(out.shape[0]):
        _row_scores(acc, level_offset, level_height, level_width, level_zshift, levels_used,
                    init, height, r, n_outputs, out[r])


@njit(inline="always")
def _row_probabilities(row, n_outputs, out):
    """``out`` (W, C) float32 from the raw scores ``row``: logistic for K = 1, else softmax."""
    for x in range(out.shape[0]):
        if n_outputs == 1:
            p = 1.0 / (1.0 + np.exp(-row[x, 0]))
            out[x, 0] = 1.0 - p
            out[x, 1] = p
        else:
            top = row[x, 0]
            for k in range(1, n_outputs):
                top = max(top, row[x, k])
            total = 0.0
            for k in range(n_outputs):
                row[x, k] = np.exp(row[x, k] - top)
                total += row[x, k]
            for k in range(n_outputs):
                out[x, k] = row[x, k] / total


@njit(inline="always")
def _row_classes(row, n_outputs, classes, out):
    """``out`` (W,) = ``classes[most probable]``: raw > 0 for K = 1, else the first argmax."""
    for x in range(out.shape[0]):
        if n_outputs == 1:
            out[x] = classes[1] if row[x, 0] > 0 else classes[0]
        else:
            best = 0
            for k in range(1, n_outputs):
                if row[x, k] > row[x, best]:
                    best = k
            out[x] = classes[best]


@njit(cache=True, parallel=True, nogil=True)
def _probabilities(acc, level_offset, level_height, level_width, level_zshift, levels_used, init,
                   height, n_outputs, out):
    """Class probabilities ``out`` (Z * H, W, C) float32: logistic for K = 1, else softmax."""
    for y in prange(out.shape[0]):
        row = np.empty((out.shape[1], n_outputs))
        _row_scores(acc, level_offset, level_height, level_width, level_zshift, levels_used,
                    init, height, y, n_outputs, row)
        _row_probabilities(row, n_outputs, out[y])


@njit(cache=True, parallel=True, nogil=True)
def _classes_and_probabilities(acc, level_offset, level_height, level_width, level_zshift,
                               levels_used, init, height, n_outputs, classes, labels, out):
    """`_row_classes` into ``labels`` and `_probabilities` into ``out`` from one pass over
    the scores: the class decided on the raw scores, as alone (ties alike)."""
    for y in prange(out.shape[0]):
        row = np.empty((out.shape[1], n_outputs))
        _row_scores(acc, level_offset, level_height, level_width, level_zshift, levels_used,
                    init, height, y, n_outputs, row)
        _row_classes(row, n_outputs, classes, labels[y])
        _row_probabilities(row, n_outputs, out[y])


def _node_levels(booster, feature_level, feature_slot):
    """Per flattened node: level and slot of its feature, -1 for leaves."""
    flat = booster.flat_arrays()
    feature = flat["feature"]
    split = feature >= 0
    node_level = np.full(feature.shape, -1, dtype=np.int64)
    node_slot = np.zeros(feature.shape, dtype=np.int64)
    node_level[split] = feature_level[feature[split]]
    node_slot[split] = feature_slot[feature[split]]
    return flat, node_level, node_slot


def _node_records(flat, node_level, node_slot, level_arrays):
    """The nodes as the walk reads them: int64 ``(n_nodes, 8)`` records ``(level, base,
    plane, row, col, left, right, threshold)`` (`_walk_blocks`), and the same buffer as
    float32 ``(n_nodes, 16)``, where column ``_THRESHOLD32`` holds the threshold as
    `float32_threshold` rounds it (the other half of ``_THRESHOLD`` is 0). Where each split
    node finds its feature in the flat buffer of all levels depends on the node alone (0 for
    leaves)."""
    level_start = np.cumsum([0] + [a.size for a in level_arrays[:-1]]).astype(np.int64)
    level_count = np.array([a.shape[-1] for a in level_arrays], dtype=np.int64)
    level_row = np.array([a.shape[-2] for a in level_arrays], dtype=np.int64) * level_count
    level_plane = np.array([a.shape[-3] for a in level_arrays], dtype=np.int64) * level_row
    split = node_level >= 0
    nodes = np.zeros((node_level.size, 8), dtype=np.int64)
    nodes[:, _LEVEL] = node_level
    levels = node_level[split]
    nodes[split, _BASE] = level_start[levels] + node_slot[split]
    nodes[split, _PLANE] = level_plane[levels]
    nodes[split, _ROW] = level_row[levels]
    nodes[split, _COL] = level_count[levels]
    nodes[split, _LEFT] = flat["left"][split]
    nodes[split, _RIGHT] = flat["right"][split]
    node_threshold = nodes.view(np.float32)
    node_threshold[:, _THRESHOLD32] = float32_threshold(flat["threshold"])
    return nodes, node_threshold


def float32_threshold(threshold):
    """The largest float32 at most each float64 ``threshold``: for every float32 ``v``,
    ``v <= threshold`` exactly when ``v <= float32_threshold(threshold)`` (NaN neither), so
    the walk compares its float32 features without widening them.

    Examples
    --------
    >>> t = float32_threshold(np.array([0.1, 0.5, 1e300, -1e300]))
    >>> t.dtype, float(t[0]) <= 0.1 < float(np.nextafter(t[0], np.float32(1)))
    (dtype('float32'), True)
    >>> float(t[1]), float(t[2]) == float(np.finfo(np.float32).max), float(t[3])
    (0.5, True, -inf)
    """
    threshold = np.asarray(threshold, dtype=np.float64)
    with np.errstate(over="ignore"):
        rounded = threshold.astype(np.float32)
    above = rounded > threshold
    rounded[above] = np.nextafter(rounded[above], np.float32(-np.inf))
    return rounded


def _flat_features(level_arrays):
    """All level arrays in one flat float32 buffer, level 0 first: a view of the buffer
    they share when they lie in it back to back (as `FeatureBank.compute_levels` lays
    them out), else a copy."""
    # (an empty array's data pointer says nothing: it holds no values to place)
    arrays = [a for a in (np.asarray(a, dtype=np.float32) for a in level_arrays) if a.size]
    if not arrays:
        return np.zeros(0, dtype=np.float32)
    buffer = _owner(arrays[0])
    if buffer.ndim == 1 and buffer.dtype == np.float32 and buffer.flags.c_contiguous \
            and all(_owner(a) is buffer and a.flags.c_contiguous for a in arrays):
        start = (arrays[0].ctypes.data - buffer.ctypes.data) // 4
        end = start
        for array in arrays:
            if array.ctypes.data != buffer.ctypes.data + 4 * end:
                break
            end += array.size
        else:
            if 0 <= start <= end <= buffer.size:
                return buffer[start:end]
    return np.concatenate([a.ravel() for a in arrays])


def _owner(array):
    """The array whose memory ``array`` views (itself if it owns it)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _root_levels(roots, node_level, start_level):
    """Level of the blocks each tree is first walked on: its root's feature level, or the
    start level for a root that is a leaf or reads a pixel feature."""
    levels = node_level[roots]
    return np.where(levels >= 1, levels, start_level).astype(np.int64)


def _same_roots(nodes, default_left, roots, root_level):
    """Per tree: whether its root splits the same blocks as the previous tree's root, alike
    (same feature, threshold and missing-value direction, first walked on the same level)."""
    record = np.column_stack([nodes[roots][:, [_LEVEL, _BASE, _ROW, _COL, _THRESHOLD]],
                              default_left[roots], root_level])
    same = np.zeros(roots.shape[0], dtype=np.bool_)
    same[1:] = (record[1:] == record[:-1]).all(axis=1) & (nodes[roots[1:], _LEVEL] >= 0)
    return same


def _level_blocks(blocks, n_dims):
    """Per-level blocks ``(bz, by, bx)``: an image's ``(1, 2**L, 2**L)``, or a volume's."""
    if n_dims == 2:
        if blocks is not None:
            raise ValueError("blocks are for volumes; an image of shape (H, W) takes none")
        return [(1, 2 ** L, 2 ** L) for L in range(N_LEVELS)]
    if blocks is None:
        raise ValueError("a volume (Z, H, W) needs the pyramid's blocks (VoxelGrid.blocks)")
    blocks = [tuple(int(b) for b in block) for block in blocks]
    if len(blocks) != N_LEVELS or any(len(b) != 3 or b[1:] != (2 ** L, 2 ** L)
                                      or b[0] < 1 or b[0] & (b[0] - 1)
                                      for L, b in enumerate(blocks)) \
            or any(b[0] not in (a[0], 2 * a[0]) for a, b in zip(blocks, blocks[1:])):
        raise ValueError(f"blocks must be {N_LEVELS} nested (bz, 2**L, 2**L) blocks, got {blocks}")
    return blocks


def _check_inputs(booster, level_arrays, feature_level, feature_slot, shape, blocks):
    feature_level = np.asarray(feature_level, dtype=np.int64)
    feature_slot = np.asarray(feature_slot, dtype=np.int64)
    if feature_level.shape != (booster.n_features,) or feature_slot.shape != feature_level.shape:
        raise ValueError(f"feature_level and feature_slot need one entry per model feature "
                         f"({booster.n_features}), got shapes {feature_level.shape} and "
                         f"{feature_slot.shape}")
    if len(level_arrays) != N_LEVELS:
        raise ValueError(f"level_arrays must hold {N_LEVELS} arrays (levels 0..3), "
                         f"got {len(level_arrays)}")
    shape = tuple(int(v) for v in shape)
    if len(shape) not in (2, 3):
        raise ValueError(f"shape must be (H, W) of an image or (Z, H, W) of a volume, got {shape}")
    blocks = _level_blocks(blocks, len(shape))
    padded = tuple(-(-n // m) * m for n, m in zip(shape, blocks[-1][3 - len(shape):]))
    for level, array in enumerate(level_arrays):
        expected = tuple(n // b for n, b in zip(padded, blocks[level][3 - len(shape):]))
        if array.ndim != len(shape) + 1 or array.shape[:-1] != expected:
            raise ValueError(f"level {level} array has shape {array.shape}; an input of shape "
                             f"{shape} needs {expected} x n_features on that level")
    used = booster.features_used()
    levels = feature_level[used]
    if np.any(levels < 0) or np.any(levels >= N_LEVELS):
        missing = used[(levels < 0) | (levels >= N_LEVELS)]
        raise ValueError(f"the model uses features {missing.tolist()} that have no level array")
    if np.any(feature_slot[used] >= np.array([level_arrays[L].shape[-1] for L in levels],
                                             dtype=np.int64)):
        raise ValueError("feature_slot points past the end of its level array")
    level_share = np.array([float(np.prod(b)) for b in blocks])
    if np.any(booster.feature_share[used] != level_share[levels]):
        raise ValueError("the model's feature shares disagree with the feature levels "
                         f"(a level-L feature must have share {level_share.astype(int).tolist()}"
                         "[L])")
    root_share = float(booster.feature_share.max()) if booster.n_features else 1.0
    if root_share not in level_share:
        raise ValueError(f"the model's largest feature share {root_share:g} is not one of "
                         f"{', '.join(f'{s:g}' for s in level_share)}")
    start_level = int(np.flatnonzero(level_share == root_share)[0])
    depth, height, width = (1,) * (3 - len(shape)) + shape
    padded = (1,) * (3 - len(shape)) + padded
    zshift = np.array([int(b[0]).bit_length() - 1 for b in blocks], dtype=np.int64)
    return feature_level, feature_slot, (depth, height, width), padded, zshift, start_level


_OUTPUTS = ("raw", "proba", "class", "class+proba")


def predict_multiscale(booster, level_arrays, feature_level, feature_slot, shape, output="raw",
                       classes=None, cost_map=False, blocks=None):
    """Predict every pixel, evaluating each tree on blocks, coarse to fine.

    Parameters
    ----------
    booster : msclassify.cegb.Booster
        Trained with ``feature_share[m] = 4**level`` of each feature it uses.
    level_arrays : sequence of 4 ndarray
        ``level_arrays[L]`` is float32 ``(h_L, w_L, k_L)`` over the image padded to a
        multiple of 8 (``h_L = padded_height >> L``), as
        `msclassify.features.FeatureLevels.arrays`.
    feature_level, feature_slot : array_like of int, shape (booster.n_features,)
        Model feature ``m`` is ``level_arrays[feature_level[m]][:, :, feature_slot[m]]``;
        entries of features the model does not use are ignored.
    shape : (int, int) or (int, int, int)
        ``(H, W)`` of the image (the arrays cover its padded extent), or ``(Z, H, W)``
        of a volume, whose level arrays are ``(d_L, h_L, w_L, k_L)``.
    output : {"raw", "proba", "class", "class+proba"}, optional
        Raw scores, class probabilities (binary or softmax models), the most
        probable class, or both of the last two from one walk of the trees
        (``values`` is then ``(classes, probabilities)``, each as alone).
    classes : ndarray, optional
        With ``output="class"``, the value to write for each class (default its
        index, as `label_dtype` of the indices: uint8 up to 256 classes); the
        output has their dtype.
    cost_map : bool, optional
        Also return the per-pixel evaluation cost.
    blocks : sequence of 4 (bz, by, bx), optional
        A volume's block per level (`msclassify.features.VoxelGrid.blocks`);
        level-L features must have share ``bz * by * bx`` of their level.

    Returns
    -------
    MultiscaleResult

    Examples
    --------
    >>> import numpy as np
    >>> from msclassify.cegb import train
    >>> rng = np.random.default_rng(0)
    >>> coarse = rng.random((1, 1, 1), dtype=np.float32)        # one level-3 value: 8x8 pixels
    >>> X = rng.random((200, 1)); y = (X[:, 0] > 0.5).astype(float)
    >>> booster = train(X, y, "binary", {"n_estimators": 3, "feature_share": [64]})
    >>> arrays = [np.zeros((8 >> L, 8 >> L, 0), np.float32) for L in range(3)] + [coarse]
    >>> result = predict_multiscale(booster, arrays, [3], [0], (8, 8))
    >>> result.values.shape, result.n_evaluations    # one evaluation per tree serves 64 pixels
    ((8, 8, 1), 3)
    """
    if output not in _OUTPUTS:
        raise ValueError(f"output must be one of {_OUTPUTS}, got {output!r}")
    if output != "raw" and booster.objective not in ("binary", "multiclass"):
        raise ValueError(f"output={output!r} needs a classification model, this one is "
                         f"{booster.objective!r}")
    feature_level, feature_slot, (depth, height, width), padded, zshift, start_level = \
        _check_inputs(booster, level_arrays, feature_level, feature_slot, shape, blocks)
    flat, node_level, node_slot = _node_levels(booster, feature_level, feature_slot)
    K = booster.n_outputs
    # Blocks only ever sit on the start level or on the level of a feature the model uses.
    levels_used = np.unique(np.concatenate([[start_level], feature_level[booster.features_used()]]))
    levels_used = levels_used[levels_used <= start_level].astype(np.int64)
    level_height = np.array([padded[1] >> L for L in range(N_LEVELS)], dtype=np.int64)
    level_width = np.array([padded[2] >> L for L in range(N_LEVELS)], dtype=np.int64)
    sizes = np.array([(padded[0] >> zshift[L]) * level_height[L] * level_width[L]
                      if L in levels_used else 0 for L in range(N_LEVELS)], dtype=np.int64)
    level_offset = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) * K
    acc = np.zeros(int(sizes.sum()) * K)
    cost = np.zeros(int(sizes.sum())) if cost_map else None
    n_block_rows = (((depth + (1 << zshift[start_level]) - 1) >> zshift[start_level])
                    * ((height + (1 << start_level) - 1) >> start_level))
    evaluations = np.zeros(n_block_rows, dtype=np.int64)
    pixel_evaluations = np.zeros(n_block_rows)
    shape = tuple(int(v) for v in shape)
    n_classes = max(K, 2)
    labels = None
    if output in ("class", "class+proba"):
        classes = np.arange(n_classes, dtype=label_dtype(n_classes - 1)) \
            if classes is None else np.ascontiguousarray(classes)
        if classes.shape != (n_classes,):
            raise ValueError(f"classes must hold one value per class ({n_classes}), got shape "
                             f"{classes.shape}")
        labels = np.empty(shape, dtype=classes.dtype)
    features = _flat_features(level_arrays)
    nodes, node_threshold = _node_records(flat, node_level, node_slot, level_arrays)
    root_level = _root_levels(flat["roots"], node_level, start_level)
    walk = (features, nodes, node_threshold, flat["default_left"], flat["value"],
            flat["node_cost"], flat["roots"], root_level,
            _same_roots(nodes, flat["default_left"], flat["roots"], root_level),
            flat["tree_output"], K, start_level, depth, height, width, zshift, level_offset,
            level_height, level_width, acc, cost, evaluations, pixel_evaluations,
            get_num_threads())
    finish = (acc, level_offset, level_height, level_width, zshift, levels_used,
              booster.init_score, height, K)
    if output == "class":
        # the classes of each row of blocks as soon as it is walked (one parallel pass)
        _walk_blocks(*walk, labels.reshape(-1, width), classes, levels_used, booster.init_score)
        values = labels
    else:
        _walk_blocks(*walk)
    if output == "raw":
        values = np.empty(shape + (K,))
        _scores(*finish, values.reshape(-1, width, K))
    elif output == "proba":
        values = np.empty(shape + (n_classes,), dtype=np.float32)
        _probabilities(*finish, values.reshape(-1, width, n_classes))
    elif output == "class+proba":
        proba = np.empty(shape + (n_classes,), dtype=np.float32)
        _classes_and_probabilities(*finish, classes, labels.reshape(-1, width),
                                   proba.reshape(-1, width, n_classes))
        values = (labels, proba)
    costs = None
    if cost_map:
        costs = np.empty(shape + (1,))
        _scores(cost, level_offset // K, level_height, level_width, zshift, levels_used,
                np.zeros(1), height, 1, costs.reshape(-1, width, 1))
        costs = costs[..., 0]
    return MultiscaleResult(values, costs, int(evaluations.sum()), float(pixel_evaluations.sum()))
