"""Semi-supervised pixel training: GRBB on pixels drawn from the scribbled frames.

`msclassify.PixelClassifier` with ``semi_supervised=True`` trains like
`msclassify.baselines.GRBBClassifier` (Xu, Kusner, Weinberger & Zheng, "Gradient
regularized budgeted boosting", arXiv:1901.04065; docs/design.md, *The pixel classifier*):

* Unlabelled pixels: ``n_unlabelled`` pixels drawn from the labelled frames on a
  jittered grid (one pixel in each cell of a regular grid, so every part of the
  frame, and with it every object larger than a cell, is represented), minus
  scribbled pixels.
* Graph: a symmetric kNN graph on the feature vectors (the whole candidate bank)
  of the unlabelled pixels and up to as many scribbled ones, each column
  standardised to zero mean and unit variance first (the bank mixes intensities,
  derivatives and eigenvalues on very different scales).
* Gradients: the scribbled pixels in the graph get the loss gradient plus
  ``laplacian_regularization * (L H)``, the unlabelled ones the harmonic
  extension of those gradients (`msclassify.graph.regularised_gradients`),
  scribbled pixels left out of the graph the plain loss gradient. With
  ``hessian="exact"`` the hessians are extended the same way.
* Weights: unlabelled rows carry loss weight 1 (the tree fits their propagated
  gradients like a scribble's) and cost weight 0: the cost samples of
  `msclassify.pixel.training_set` already stand for the whole image in the cost
  terms, so every cost term (feature batch cost, split cost) applies unchanged.
  The core's mu is scaled by the total loss weight (scribbles + unlabelled
  pixels), so ``cost_tradeoff`` stays a price per training row.
* Speed: ``L_UU`` (``n_unlabelled`` rows) is factorised once per fit and solved
  twice per tree; with the default 4096 pixels that adds about 0.5 s to a fit
  on 2 cores (``benchmarks/results/semi_supervised.json``, "train s").
* When it helps: with sparse strokes; with a few clicks far from the object
  edges it is worse than supervised training (same benchmark, "scattered").
"""

import numpy as np

from ..cegb import MIN_HESSIAN, output_probabilities
from ..graph import class_targets, knn_laplacian, regularised_gradients

__all__ = ["UnlabelledPixels"]


class UnlabelledPixels:
    """Unlabelled pixels of the training frames and the GRBB objective built on them.

    Parameters
    ----------
    pairs : list of (frame, labels)
        The training frames with their scribbles, in training order.
    n_unlabelled : int
        Pixels to draw in total, split evenly over the frames.
    rng : numpy.random.Generator

    Examples
    --------
    >>> import numpy as np
    >>> labels = np.zeros((64, 64), np.uint8); labels[0, :2] = 1, 2
    >>> pixels = UnlabelledPixels([(np.zeros((64, 64)), labels)], 100, np.random.default_rng(0))
    >>> ys, xs = pixels.coordinates[0]
    >>> len(ys) <= 100 and not labels[ys, xs].any()
    True
    """

    def __init__(self, pairs, n_unlabelled, rng):
        per_frame = -(-n_unlabelled // len(pairs))
        self.coordinates = [jittered_grid(lab, per_frame, rng) for _, lab in pairs]
        self._rows = []

    def gathering(self, compute_levels):
        """Wrap ``compute_levels(frame)`` to also gather the unlabelled pixels' features.

        Training computes each frame's features once; the wrapper reads the
        unlabelled pixels from them then. Frames must come in the order of ``pairs``.
        """
        def compute_and_gather(frame):
            levels = compute_levels(frame)
            ys, xs = self.coordinates[len(self._rows)]
            self._rows.append(levels.gather(ys, xs))
            return levels

        return compute_and_gather

    def training_set(self, X, y, sample_weight, cost_weight, n_classes, n_neighbors,
                     laplacian_regularization, exact_hessian, rng):
        """The rows of `msclassify.pixel.training_set` plus the unlabelled ones, and the objective.

        Returns
        -------
        X, y, sample_weight, cost_weight : ndarray
            The input rows followed by the unlabelled pixels (``y`` 0, loss weight
            1, cost weight 0).
        objective : callable
            ``f(raw, y) -> (grad, hess)`` for `msclassify.cegb.train`.
        """
        if len(self._rows) != len(self.coordinates):
            raise RuntimeError("the features of some training frames were never computed")
        unlabelled = np.concatenate(self._rows)
        n_free = unlabelled.shape[0]
        labelled = np.flatnonzero(sample_weight > 0)
        # The graph holds at most as many scribbled pixels as unlabelled ones: thousands of
        # scribbles need no propagation, and the kNN search grows with the square of its size.
        in_graph = np.sort(rng.choice(labelled, min(labelled.size, n_free), replace=False))
        n_graph = in_graph.size + n_free
        if n_neighbors >= n_graph:
            raise ValueError(f"n_neighbors={n_neighbors} needs more than {n_neighbors} graph "
                             f"pixels, got {n_graph} (scribbled and unlabelled); lower "
                             "n_neighbors or raise n_unlabelled")
        graph_features = standardise(np.concatenate([X[in_graph], unlabelled]))
        encoded = y[in_graph].astype(np.int64)
        graph = regularised_gradients(knn_laplacian(graph_features, n_neighbors),
                                      class_targets(encoded, n_classes), laplacian_regularization,
                                      exact_hessian)
        n_rows = X.shape[0]
        graph_rows = np.concatenate([in_graph, np.arange(n_rows, n_rows + n_free)])
        off_graph = np.setdiff1d(labelled, in_graph)
        off_target = class_targets(y[off_graph].astype(np.int64), n_classes)

        def objective(raw, _):
            grad = np.zeros_like(raw)
            hess = np.ones_like(raw)    # rows of no graph nor scribble carry no loss weight
            grad[graph_rows], hess[graph_rows] = graph(raw[graph_rows], None)
            if off_graph.size:
                p = output_probabilities(raw[off_graph])
                grad[off_graph] = p - off_target
                hess[off_graph] = np.maximum(p * (1.0 - p), MIN_HESSIAN)
            return grad, hess

        return (np.concatenate([X, unlabelled.astype(X.dtype, copy=False)]),
                np.concatenate([y, np.zeros(n_free)]),
                np.concatenate([sample_weight, np.ones(n_free)]),
                np.concatenate([cost_weight, np.zeros(n_free)]),
                objective)


def jittered_grid(labels, n, rng):
    """About ``n`` unscribbled pixels of ``labels``' frame: one random pixel per grid cell.

    Returns
    -------
    ys, xs : ndarray of intp
    """
    height, width = labels.shape
    step = max(1, int(np.sqrt(height * width / n)))
    top = np.arange(0, height, step)
    left = np.arange(0, width, step)
    top, left = (a.ravel() for a in np.meshgrid(top, left, indexing="ij"))
    ys = top + (rng.random(top.size) * np.minimum(step, height - top)).astype(np.intp)
    xs = left + (rng.random(left.size) * np.minimum(step, width - left)).astype(np.intp)
    keep = labels[ys, xs] == 0
    ys, xs = ys[keep], xs[keep]
    if ys.size > n:
        chosen = np.sort(rng.choice(ys.size, n, replace=False))
        ys, xs = ys[chosen], xs[chosen]
    return ys, xs


def standardise(X):
    """Columns scaled to mean 0 and variance 1 (constant columns to 0), as float64."""
    X = np.asarray(X, dtype=np.float64)
    std = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(std > 0, std, 1.0)
