"""Training parameters of the CEGB core and their validation."""

from dataclasses import asdict, dataclass, fields

import numpy as np

from ..checks import check_int, check_number, check_per_feature

_CHOICES = {
    "share_mode": ("path", "feature"),
    "growth": ("best_first", "breadth_first"),
    "hessian": ("exact", "unit"),
    "feature_cost_mode": ("lazy", "coupled"),
    "evaluation_cost_mode": ("leaf", "tree"),
}


@dataclass
class CEGBParams:
    """Hyper-parameters of cost-efficient gradient boosting.

    The cost parameters follow docs/design.md (*CEGB, exactly*): splitting leaf
    ``p`` on feature ``m`` is penalised by ``cost_tradeoff * dPsi(p, m)`` with

    ``dPsi = split_cost * W_p / share + feature_batch_costs[m] * (m unused)
    + feature_costs[m] * (cost weight of samples in p that have not paid m)``.

    With ``cost_tradeoff=0`` training is plain second-order gradient boosting.
    Per-feature arrays default to zeros (costs) and ones (shares).
    """

    n_estimators: int = 100
    learning_rate: float = 0.1
    max_leaves: int = 31
    max_depth: int | None = None
    min_samples_leaf: int = 20
    min_hessian_leaf: float = 1e-3
    l2_regularization: float = 1.0
    max_bins: int = 255
    subsample: float = 1.0
    colsample: float = 1.0
    random_state: int | None = None
    cost_tradeoff: float = 0.0
    split_cost: float = 0.0
    feature_costs: object = None
    feature_batch_costs: object = None
    feature_share: object = None
    share_mode: str = "path"
    growth: str = "best_first"
    hessian: str = "exact"
    feature_cost_mode: str = "lazy"
    evaluation_cost_mode: str = "leaf"

    @classmethod
    def from_any(cls, params):
        """Build from ``None``, a dict or an instance (unknown keys are an error)."""
        if params is None:
            return cls()
        if isinstance(params, cls):
            return cls(**asdict(params))
        if isinstance(params, dict):
            known = {f.name for f in fields(cls)}
            unknown = sorted(set(params) - known)
            if unknown:
                raise ValueError(f"unknown CEGB parameter(s) {unknown}; valid names: {sorted(known)}")
            return cls(**params)
        raise TypeError(f"params must be a dict or CEGBParams, got {type(params).__name__}")

    def validate(self, n_features):
        """Check ranges and return the per-feature cost arrays.

        Returns
        -------
        beta, gamma, share : ndarray of float64, shape (n_features,)
        """
        check_int(self.n_estimators, "n_estimators")
        check_int(self.max_leaves, "max_leaves", 2)
        check_int(self.min_samples_leaf, "min_samples_leaf")
        if self.max_depth is not None:
            check_int(self.max_depth, "max_depth")
        if not 2 <= int(self.max_bins) <= 255:
            raise ValueError(f"max_bins must be in [2, 255], got {self.max_bins!r}")
        check_number(self.learning_rate, "learning_rate", strict=True)
        for name in ("min_hessian_leaf", "l2_regularization", "cost_tradeoff", "split_cost"):
            check_number(getattr(self, name), name)
        for name in ("subsample", "colsample"):
            value = getattr(self, name)
            if not (0 < value <= 1):
                raise ValueError(f"{name} must be in (0, 1], got {value!r}")
        for name, allowed in _CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        beta = check_per_feature("feature_costs", self.feature_costs, n_features, 0.0)
        gamma = check_per_feature("feature_batch_costs", self.feature_batch_costs, n_features, 0.0)
        share = check_per_feature("feature_share", self.feature_share, n_features, 1.0)
        if np.any(share < 1):
            raise ValueError("feature_share values must be >= 1 (the number of pixels sharing a value)")
        if self.share_mode == "path":
            ordered = np.unique(share)
            if np.any(ordered[1:] % ordered[:-1] != 0):
                raise ValueError(
                    "share_mode='path' needs nested shares (each divides the next, e.g. 1, 4, 16, 64); "
                    f"got {ordered.tolist()}. Use share_mode='feature' for arbitrary shares.")
        return beta, gamma, share

    def to_dict(self):
        """JSON-able dict (cost arrays as lists)."""
        out = asdict(self)
        for name, value in out.items():
            if name in ("feature_costs", "feature_batch_costs", "feature_share") and value is not None:
                out[name] = np.asarray(value, dtype=float).tolist()
            elif isinstance(value, np.generic):
                out[name] = value.item()
        return out
