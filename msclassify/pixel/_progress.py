"""Training progress that means something: the stage, its steps, the fraction done and an ETA.

`PixelClassifier.fit` runs in stages: ``"features"`` (one step per frame),
``"teacher"`` (the distillation teacher, one step per boosting iteration),
``"distillation"`` (the teacher labels pixels, one step per frame) and
``"model"`` (one step per iteration); with ``cost_tradeoff="auto"`` the model
stage is ``"μ path 1/5"`` ... ``"μ path 5/5"`` (up to four path models and the refit).
`ProgressTracker` turns those steps into `TrainingProgress` reports: the overall
fraction weighs each stage by its expected time (`stage_weights`, a cost model
fitted to ``benchmarks/bench_training.py``) and the ETA extrapolates the time
spent so far over the fraction still to go.
"""

import time
from typing import NamedTuple, Optional

__all__ = ["ProgressTracker", "TrainingProgress", "stage_weights"]


class TrainingProgress(NamedTuple):
    """One progress report of `PixelClassifier.fit` (its ``progress=`` callable receives them).

    Attributes
    ----------
    stage : str
        ``"features"``, ``"teacher"``, ``"distillation"``, ``"model"``, ``"μ path 3/5"``
        (with ``cost_tradeoff="auto"``) or ``"done"``.
    step, n_steps : int
        Steps of the stage done (frames or boosting iterations) and its total.
    fraction : float
        Share of the whole fit done, 0 to 1 (stages weighted by expected time).
    eta_s : float or None
        Seconds still to go, extrapolated from the time spent; None before any
        stage has made progress.
    elapsed_s : float
        Seconds since the fit started.

    Examples
    --------
    >>> p = TrainingProgress("model", 10, 50, 0.6, 4.0, 6.0)
    >>> f"{p.stage} {p.step}/{p.n_steps}, {p.fraction:.0%}, {p.eta_s:.0f} s left"
    'model 10/50, 60%, 4 s left'
    """

    stage: str
    step: int
    n_steps: int
    fraction: float
    eta_s: Optional[float]
    elapsed_s: float


def stage_weights(n_pixels, n_channels, n_scribbled, n_teacher_features, n_rows, n_features,
                  n_estimators, n_outputs, distill, n_fits, path_rows=1.0, teacher_stride=1,
                  teacher_fits=1, path_trees=0.5, teacher_rounds=None):
    """Expected time of each stage of a fit, in arbitrary units: ``[(stage, weight), ...]``.

    A linear cost model (coefficients fitted to ``benchmarks/bench_training.py``
    on 1024x1024 fly frames and an RGB photo): features cost per pixel and
    channel, a boosting iteration per row-feature of its training set and per
    tree, the teacher's labelling per pixel it predicts (one in ``teacher_stride**2`` and
    about 5% more where its coarse-to-fine class map is refined; the coefficient was fitted
    with every 4th pixel predicted) and per tree. With ``n_fits > 1``
    (``cost_tradeoff="auto"``) the first ``n_fits - 1`` fits train the share
    ``path_trees`` of the trees on the share ``path_rows`` of the rows (the path search
    may fit fewer: its fraction then jumps to the last fit). ``teacher_fits=2``
    (``class_weight="auto"``) counts the teacher's refit, made when a class is scribbled
    less than the teacher finds it; ``teacher_rounds`` are its boosting rounds (None:
    ``n_estimators``).
    """
    trees = n_estimators * n_outputs
    teacher_trees = trees if teacher_rounds is None else teacher_rounds * n_outputs
    plan = [("features", 1.0 * n_pixels * n_channels / 1e6)]
    if distill:
        plan.append(("teacher", teacher_fits * teacher_trees
                     * (3e-3 + 2e-9 * n_scribbled * n_teacher_features)))
        plan.append(("distillation", 0.3 * n_pixels / 1e6
                     * (0.2 + teacher_trees / 50 * 4 * (1 / teacher_stride ** 2 + 0.05))))
    per_fit = trees * (8e-3 + 1.2e-9 * n_rows * n_features)
    if n_fits == 1:
        plan.append(("model", per_fit))
    else:
        path_fit = trees * path_trees * (8e-3 + 1.2e-9 * n_rows * path_rows * n_features)
        plan += [(f"μ path {k}/{n_fits}", path_fit) for k in range(1, n_fits)]
        plan.append((f"μ path {n_fits}/{n_fits}", per_fit))
    return plan


class ProgressTracker:
    """Reports `TrainingProgress` to ``report`` as the stages of ``plan`` advance.

    Parameters
    ----------
    report : callable or None
        Receives every `TrainingProgress`; None reports nothing.
    plan : list of (str, float)
        The stages in order with their expected time (`stage_weights`).
    clock : callable, optional
        Seconds (tests pass a fake clock).

    Examples
    --------
    >>> import itertools
    >>> seen, seconds = [], itertools.count()        # a clock that ticks 1 s per reading
    >>> tracker = ProgressTracker(seen.append, [("features", 1.0), ("model", 3.0)],
    ...                           clock=lambda: float(next(seconds)))
    >>> tracker.start("features", 1); tracker.step(1); tracker.start("model", 3)
    >>> tracker.step(1); tracker.done()
    >>> [(p.stage, p.step, round(p.fraction, 2), p.eta_s) for p in seen]
    [('features', 0, 0.0, None), ('features', 1, 0.25, 6.0), ('model', 0, 0.25, 9.0), \
('model', 1, 0.5, 4.0), ('done', 1, 1.0, 0.0)]
    """

    def __init__(self, report, plan, clock=time.perf_counter):
        self.report, self.clock = report, clock
        self.names = [name for name, _ in plan]
        total = sum(weight for _, weight in plan) or 1.0
        self.weights = [weight / total for _, weight in plan]
        self.start_time = clock()
        self.stage_index, self.stage_name, self.n_steps = -1, None, 1

    def start(self, stage, n_steps):
        """Begin ``stage`` (a name of the plan, in order) of ``n_steps`` steps."""
        if stage in self.names[self.stage_index + 1:]:
            self.stage_index = self.names.index(stage, self.stage_index + 1)
        self.stage_name, self.n_steps = stage, max(int(n_steps), 1)
        self.step(0)

    def step(self, step):
        """``step`` steps of the current stage are done."""
        if self.report is None:
            return
        done = sum(self.weights[:max(self.stage_index, 0)])
        if self.stage_index >= 0:
            done += self.weights[self.stage_index] * min(step, self.n_steps) / self.n_steps
        # the weights' sum may round above 1 at the last stage
        self._emit(self.stage_name, step, self.n_steps, min(done, 1.0))

    def done(self):
        """The fit is over."""
        if self.report is not None:
            self._emit("done", 1, 1, 1.0)

    def _emit(self, stage, step, n_steps, fraction):
        elapsed = self.clock() - self.start_time
        eta = elapsed * (1 - fraction) / fraction if fraction > 0 else None
        self.report(TrainingProgress(stage, int(step), int(n_steps), float(fraction), eta,
                                     float(elapsed)))
