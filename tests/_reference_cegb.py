"""A deliberately naive pure-Python CEGB (squared error) to check the Numba core against.

It follows docs/design.md (*CEGB, exactly*) literally: best-first over all open
leaves, exact thresholds halfway between distinct values, penalty
mu * (alpha * W_p / min(s_p, s_m) + gamma_m * (1 - D_m) + beta_m * #unpaid),
recomputed at every step.
"""

import numpy as np


def reference_trees(X, y, n_trees, max_leaves, mu, alpha, beta, gamma, share, l2=1.0,
                    min_samples_leaf=1, learning_rate=1.0):
    n, m_total = X.shape
    used = np.zeros(m_total, bool)
    paid = np.zeros((n, m_total), bool)
    pred = np.full(n, y.mean())
    root_share = share.max()
    trees = []
    for _ in range(n_trees):
        g = pred - y
        h = np.ones(n)
        nodes = [dict(rows=np.arange(n), share=root_share, feature=-1, left=-1, right=-1,
                      threshold=np.nan)]
        open_leaves = [0]
        while len(open_leaves) < max_leaves:
            best = None
            for leaf in open_leaves:
                rows = nodes[leaf]["rows"]
                for m in range(m_total):
                    raw, thr = _best_threshold(X[rows, m], g[rows], h[rows], l2, min_samples_leaf,
                                               np.unique(X[:, m]))
                    if thr is None:
                        continue
                    eff = min(nodes[leaf]["share"], share[m])
                    penalty = (alpha * len(rows) / eff + gamma[m] * (not used[m])
                               + beta[m] * np.sum(~paid[rows, m]))
                    gain = raw - mu * penalty
                    if gain > 0 and (best is None or gain > best[0]):
                        best = (gain, leaf, m, thr)
            if best is None:
                break
            _, leaf, m, thr = best
            rows = nodes[leaf]["rows"]
            used[m] = True
            paid[rows, m] = True
            go_left = X[rows, m] <= thr
            child_share = min(nodes[leaf]["share"], share[m])
            nodes[leaf].update(feature=m, threshold=thr, left=len(nodes), right=len(nodes) + 1)
            for part in (rows[go_left], rows[~go_left]):
                nodes.append(dict(rows=part, share=child_share, feature=-1, left=-1, right=-1,
                                  threshold=np.nan))
            open_leaves.remove(leaf)
            open_leaves += [len(nodes) - 2, len(nodes) - 1]
        values = np.array([-g[nd["rows"]].sum() / (h[nd["rows"]].sum() + l2) * learning_rate
                           for nd in nodes])
        for leaf in open_leaves:
            pred[nodes[leaf]["rows"]] += values[leaf]
        trees.append(dict(feature=np.array([nd["feature"] for nd in nodes]),
                          threshold=np.array([nd["threshold"] for nd in nodes]),
                          left=np.array([nd["left"] for nd in nodes]),
                          right=np.array([nd["right"] for nd in nodes]), value=values))
    return trees


def _best_threshold(x, g, h, l2, min_samples_leaf, all_values):
    """Best split of one leaf; the threshold sits halfway to the next value of the whole column
    (bins are global, so an empty gap inside a leaf resolves to its lowest bin edge)."""
    values = np.unique(x)
    G, H = g.sum(), h.sum()
    best_gain, best_thr = -np.inf, None
    for a in values[:-1]:
        thr = (a + all_values[np.searchsorted(all_values, a) + 1]) / 2
        left = x <= thr
        nl = left.sum()
        if nl < min_samples_leaf or len(x) - nl < min_samples_leaf:
            continue
        gl, hl = g[left].sum(), h[left].sum()
        gain = 0.5 * (gl**2 / (hl + l2) + (G - gl)**2 / (H - hl + l2) - G**2 / (H + l2))
        if gain > best_gain:
            best_gain, best_thr = gain, thr
    return best_gain, best_thr
