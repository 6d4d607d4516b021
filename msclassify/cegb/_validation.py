"""Input checks with messages that say what was wrong and how to fix it."""

import numpy as np


def check_features(X, n_features=None, allow_nan=True, name="X"):
    """Return ``X`` as a C-contiguous float32/float64 matrix, or raise ValueError.

    NaN means "missing" and is allowed; infinities are not (they have no bin and
    usually mean a bug upstream).
    """
    if hasattr(X, "toarray"):
        X = X.toarray()
    try:
        X = np.asarray(X)
    except Exception as exc:  # ragged lists and the like
        raise ValueError(f"{name} could not be read as a numeric matrix: {exc}") from None
    if X.dtype == object or not (np.issubdtype(X.dtype, np.number) or X.dtype == bool):
        try:
            X = X.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be numeric, got dtype {X.dtype}") from None
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features), got shape {X.shape}; "
                         "reshape a single sample with X.reshape(1, -1)")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {X.shape}); need at least one sample and feature")
    if X.dtype != np.float32:
        X = X.astype(np.float64, copy=False)
    X = np.ascontiguousarray(X)
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"{name} has {X.shape[1]} features but the model was trained with "
                         f"{n_features}; pass the same feature columns as in training")
    if np.isinf(X).any():
        raise ValueError(f"{name} contains infinite values; replace them (NaN is allowed and "
                         "treated as missing)")
    if not allow_nan and np.isnan(X).any():
        raise ValueError(f"{name} contains NaN")
    return X


def check_weights(weights, n_rows, name):
    """Non-negative finite per-sample weights, default ones."""
    if weights is None:
        return np.ones(n_rows)
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim != 1 or weights.shape[0] != n_rows:
        raise ValueError(f"{name} must have one value per sample ({n_rows}), got shape {weights.shape}")
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError(f"{name} must be finite and >= 0")
    return np.ascontiguousarray(weights)
