"""Compile and cache every Numba kernel by running each code path once on tiny data.

``python -m msclassify._warmup`` takes a while once per install (Numba writes its
cache next to the sources); afterwards imports and first calls are fast.
"""

import time

import numpy as np


def warm_up(verbose=True):
    start = time.perf_counter()
    from .cegb import train
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    X[::17, 1] = np.nan
    y = (X[:, 0] > 0).astype(float)
    for X_typed in (X, X.astype(np.float32)):
        booster = train(X_typed, y, "binary", dict(n_estimators=2, subsample=0.8, cost_tradeoff=1e-3,
                                                   feature_costs=[1, 1, 1, 1], split_cost=0.1))
        booster.predict_raw(X_typed)
        booster.apply(X_typed)
        booster.cost_curve(X_typed)
    # Leaves this large (rows x features >= PARALLEL_LEAF_WORK at the root, twice that at a
    # split) run the parallel twins of the root and split kernels: compile those too.
    wide = rng.normal(size=(2100, 256))
    train(wide, (wide[:, 0] > 0).astype(float), "binary", dict(n_estimators=1, max_leaves=2))
    # the softmax gradients of a multiclass fit
    train(X, np.digitize(X[:, 0], [-0.5, 0.5]).astype(float), "multiclass",
          dict(n_estimators=1, max_leaves=2), n_classes=3)

    from .baselines import BudgetRFClassifier
    from .pixel import PixelClassifier, most_probable, predict_chunks, predict_frame
    complete = np.nan_to_num(X)
    BudgetRFClassifier(n_estimators=2, random_state=0).fit(complete, y).predict(complete)
    image = rng.random((40, 56))
    labels = np.zeros(image.shape, dtype=np.uint8)
    labels[:8], labels[-8:] = 1, 2
    for features in ("fast", "default", ["L0:intensity:c0", "L2up:gauss:s1.0:c0",
                                         "L3:hessian_max:s1.0:c0"]):
        pixel = PixelClassifier(features=features, n_estimators=3, random_state=0).fit(image, labels)
        pixel.predict(image)        # rows inside the image: the walk by lists (_walk_row)
        pixel.predict_proba(image)
        pixel.predict_proba(image, strategy="per_pixel")
        pixel.cost_map(image)       # with a cost map: the general walk
    predict_frame(pixel, image, probabilities=True)     # labels and uncertainty in one pass
    for dtype in (np.float32, np.float64):
        most_probable(np.ones((2, 2, 3), dtype=dtype))
    # volumes: the 3D pyramid (1x2x2 and 2x2x2 steps), 3x3 eigenvalues, the 3D walk
    volume = rng.random((5, 24, 28)).astype(np.float32)
    volume_labels = np.zeros(volume.shape, dtype=np.uint8)
    volume_labels[2, :4], volume_labels[2, -4:] = 1, 2
    for spacing in ((2, 1, 1), (1, 1, 1)):
        pixel = PixelClassifier(features="fast", n_estimators=3, random_state=0,
                                spacing=spacing).fit(volume, volume_labels)
        pixel.predict(volume)
        pixel.predict_proba(volume)
        pixel.cost_map(volume)
        predict_chunks(pixel, volume, volume.shape, ("class", "proba"))   # one walk, both
    if verbose:
        print(f"msclassify: numba kernels compiled and cached in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    warm_up()
