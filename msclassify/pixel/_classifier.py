"""PixelClassifier: a feature bank joined to cost-efficient gradient boosting.

Training reads the features of the labelled (scribbled) pixels only; prediction
computes only the features the model uses and evaluates the trees coarse to
fine on pyramid blocks (`msclassify.pixel.predict_multiscale`), so the cost the model was
trained to save is the time it actually saves.
"""

import functools
import itertools
import warnings
from typing import NamedTuple

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ..cegb import Booster, class_probabilities, most_probable_class, train
from ..checks import as_seed, check_int, check_number
from ..features import (FeatureBank, FeatureCache, FeatureSpec, PyramidImage, PyramidVolume,
                        check_spacing)
from ..graph import check_graph_params
from ..modelfile import (ModelFileError, build_model, estimator_params, model_classes,
                         model_number, open_model_file, read_model, write_model)
from ._apply import most_probable
from ._balance import (class_balanced_weights, predicted_shares, scribbled_plane_rows,
                       under_scribbled_weights)
from ._distill import DISTILL_BAND, TEACHERS, fit_teacher, teacher_pixels, teacher_rounds
from ._intensity import IntensityRange
from ._memory import check_frame_memory, frame_bytes
from ._multiscale import predict_multiscale
from ._semi_supervised import UnlabelledPixels
from ._teacher_context import context_features, interpolated
from ._progress import ProgressTracker, stage_weights
from ._tradeoff import MAX_PATH_FITS, auto_tradeoff, read_tradeoff_record, tradeoff_record

__all__ = ["ImageCost", "PixelClassifier", "check_channels", "load_pixel_model", "training_set"]

_MODEL_KIND = "pixel_classifier"
# Features of the training frames kept during one fit (when no feature_cache is given), so
# that distillation does not compute them twice: one 1024x1024 frame takes ~126 MB.
_FIT_CACHE_BYTES = 512 << 20
# The models of the cost_tradeoff="auto" path train on 1 in this many of the rows that are
# not scribbles (teacher-labelled pixels, cost samples); the refit uses all.
_PATH_ROW_SHARE = 4
# ... and grow 1 in this many of its trees.
_PATH_TREE_SHARE = 4
# Share of the features each tree draws when colsample is None and there are more than two
# classes (one tree per class and round: half the features keeps a 4-class round at the cost
# of a 2-class one).
MULTICLASS_COLSAMPLE = 0.5
_STRATEGIES = ("multiscale", "per_pixel")
_FEW_PIXELS = 10  # labelled pixels of a class below which fit warns
# Per-feature costs come from the feature bank, so the CEGB parameters that take
# arrays (feature_costs, feature_batch_costs, feature_share) are not parameters here.
_CEGB_PARAMS = ("n_estimators", "learning_rate", "max_leaves", "max_depth", "min_samples_leaf",
                "min_hessian_leaf", "l2_regularization", "max_bins", "subsample", "colsample",
                "random_state", "cost_tradeoff", "split_cost", "share_mode", "growth", "hessian",
                "feature_cost_mode", "evaluation_cost_mode")


# class_weight -> power of the balancing factor (`class_balanced_weights`).
_CLASS_WEIGHT_POWER = {"balanced": 1.0, "sqrt": 0.5}


class ImageCost(NamedTuple):
    """What predicting one image costs a `PixelClassifier` (see `PixelClassifier.prediction_cost`).

    Attributes
    ----------
    evaluation : float
        Tree evaluation cost of the whole image: ``split_cost`` times the
        pixel-weighted number of node evaluations (``sum of cost_map``).
    features : float
        Modelled operations to compute the model's features on the whole image
        (``sum of batch_cost`` over the features used, times the pixel count).
    n_node_evaluations : int
        Block-node evaluations the multi-scale predictor performs.
    """

    evaluation: float
    features: float
    n_node_evaluations: int

    @property
    def total(self):
        """``evaluation + features``, in modelled operations per image."""
        return self.evaluation + self.features


class PixelClassifier(BaseEstimator):
    """Pixel classifier trained from scribbles: an image feature bank + CEGB.

    Parameters
    ----------
    features : str, FeatureBank or sequence of str / FeatureSpec, optional
        The candidate features: a preset name of `msclassify.features.FeatureBank`
        (``"fast"``, ``"default"``, ``"fine"``, ``"pyramid"``, ``"rich"``;
        repeated for every channel of the training images), a bank, or a list
        of feature ids/specs. Each feature's share (``4**level``) and
        whole-image cost (``batch_cost``) come from the bank.
    cost_tradeoff : float or "auto", optional
        How much prediction cost the model trades for accuracy: the reduction of
        the training loss *per labelled pixel* that is worth one modelled
        operation *per image pixel*. 0 gives plain gradient boosting. See Notes.
        ``"auto"`` chooses it from the data: part of the scribbles is held out
        (every 4th labelled frame; with one frame, or when a class would be
        missing, every 4th stroke of each class, and the last quarter of a class's
        only stroke), models are fitted on the rest along the path
        ``0, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3``, and the cheapest (modelled cost per
        image pixel, as `prediction_cost` counts it) whose held-out score is
        within ``tolerance`` of the best is refitted on all scribbles. The path
        is bisected: 0 first, then the others halving the values left, for the
        largest value within ``tolerance`` of the best score so far (at most 4
        path models). The score
        is class-balanced and sees outlines: the lower of the balanced accuracy
        on the held-out scribbles and the balanced agreement with the
        ``cost_tradeoff=0`` model on uniformly drawn pixels it is sure of
        (probability >= 0.9). Training computes the features once and fits 4 or
        5 models; those of the path grow a quarter of the trees on every scribbled
        pixel and a quarter of the other rows (teacher-labelled pixels, cost
        samples); with 0 chosen, the refit continues that path model's trees
        (``benchmarks/bench_training.py``, docs/scribbles.md sections 15 and 20
        for the time against a fixed fit). ``cost_tradeoff_``, ``tradeoff_path_`` and
        ``tradeoff_reason_`` say what was chosen and why; the model file keeps them.
    tolerance : float, optional
        With ``cost_tradeoff="auto"``: held-out score (a balanced accuracy, 0-1)
        a cheaper model may lose against the best one and still be chosen.
    split_cost : float, optional
        Cost of one tree-node evaluation (alpha), in the units of the feature cost
        model (modelled operations per pixel, see `msclassify.features`). A
        modelling choice, tuned together with ``cost_tradeoff`` (Notes); in time a
        node evaluation is dearer than one filter operation (the fly benchmark
        measures both), so raise it to weigh tree depth more against features.
    n_estimators, learning_rate, max_leaves, max_depth, min_samples_leaf, \
min_hessian_leaf, l2_regularization, max_bins, subsample, random_state, \
share_mode, growth, hessian, feature_cost_mode, evaluation_cost_mode
        As in `msclassify.cegb.CEGBParams`. ``random_state`` also seeds the
        choice of cost samples.
    colsample : float or None, optional
        Fraction of the candidate features drawn for each tree, as in
        `msclassify.cegb.CEGBParams` (a number applies to the distillation
        teacher too). None (default): all of them with two classes; with more,
        `MULTICLASS_COLSAMPLE` (half) for the model's trees and all for the
        teacher's. A boosting round grows one tree per class, so with 4 classes
        a round costs twice a 2-class one; half the features per tree cuts the CPU
        time of 4-class fits by a seventh to a third (1.16x-1.43x) at the same accuracy
        on 4-class maps of real frames (docs/scribbles.md, section 8).
    n_cost_samples : int, optional
        Pixels drawn uniformly from the labelled frames to represent the whole
        image in the cost terms (see Notes).
    distill_weight : float, optional
        Distillation (see Notes): the weight of the pixels labelled by a
        full-resolution teacher, relative to the labelled pixels (their total
        loss weight is ``distill_weight`` times the labelled pixels' count). 0
        turns it off; it also stays off with ``semi_supervised`` and for a bank
        without both full-resolution and coarser features.
    n_distill_pixels : int, optional
        Teacher-labelled pixels drawn per labelled frame, three quarters of them
        within 3 px of the teacher's class changes (`msclassify.pixel._distill`).
    teacher_stride : int, optional
        The teacher's class map, from which its outlines are found, is predicted
        on every ``teacher_stride``-th pixel in y and x first and refined down to
        every pixel where a grid cell's corners differ or the teacher is unsure
        (`msclassify.pixel._distill.teacher_classes`): 4, the default, makes
        about 6-14% of the predictions of 1 (every pixel) and the same class map
        but for a few pixels (docs/scribbles.md).
    teacher : {"blend", "boost", "forest", "mean"}, optional
        The distillation teacher's learner, on the same full-resolution
        features. ``"blend"`` (default): the boosted teacher near the scribbles
        and a forest of 25 extremely randomised trees far from them (raw scores
        mixed with the boosted teacher's weight exp(-d / 30 px), d the distance
        to the nearest scribble; `msclassify.pixel._forest_teacher.BlendTeacher`):
        on EM clicks it gains most of the forest's gain (membrane F1 +0.006
        ± 0.006 against scikit-image's recipe over 16 draws; the boosted teacher
        -0.016 over 8) and keeps the fly crop's outlines and the fly tracks
        (docs/scribbles.md, sections 24-26 and 30). A frame scribbled so densely
        that the forest would outweigh the boosted teacher on less than half its
        pixels (d > 30 ln 2 = 21 px) is labelled by the boosted teacher alone,
        and the forest is fitted only if a frame needs it: such fits (a 4-class
        photo with dense strokes) are the ``"boost"`` model and cost what it
        costs (section 28).
        ``"boost"``: plain gradient boosting with the model's tree settings
        (the default before; a little cheaper to train on sparse scribbles).
        ``"forest"``: a forest of 50 extremely randomised trees of
        depth 10 (`msclassify.pixel._forest_teacher`); on a handful of clicks
        it varies less with which pixels were clicked (EM clicks: membrane F1
        +0.016, larvae clicks: larva F1 +0.073 over the draws), but it draws
        blurrier outlines (a real fly crop: outline error 0.31-0.35 instead of
        0.18-0.19). ``"mean"``: both, a pixel taking the class of the mean of
        their raw scores (`msclassify.pixel._forest_teacher.MeanTeacher`):
        the boosted teacher's outlines with part of the forest's gain on
        clicks (EM clicks +0.004, larvae clicks +0.011), for 6-18% more
        training time; the fly tracks' centroid median against SLEAP moves
        from 2.96 to 3.01 px (target 3). docs/scribbles.md, sections 14, 16
        and 24-27. The teacher only labels training pixels: prediction costs
        the same.
    teacher_estimators : int or None, optional
        Boosting rounds of the boosted teacher (``teacher="boost"``,
        ``"mean"`` or ``"blend"``). None (default): ``n_estimators`` with two classes; with
        K > 2 classes ``round(2 * n_estimators / K)``
        (`msclassify.pixel._distill.teacher_rounds`): a round grows one tree per
        class, and on 4-class scribbles of real frames half the rounds gave
        models as accurate within the draws' noise (mean differences −0.001 to
        +0.003, paired per draw) for 11-20 % less training CPU
        (docs/scribbles.md, section 18). A volume's teacher (``spacing``
        given) grows half of that: it labels the slices nobody scribbled, and
        with fewer rounds it draws fewer contacts between nuclei of
        different z-layers there (docs/volumes.md, *A volume's teacher of half
        the rounds*).
    teacher_context : bool or "snap", optional
        False (default): the teacher sees the bank's full-resolution features
        (sigma <= 3.5 px). True: also the bank's level-1 and level-2 gauss,
        hessian and gradmag filters at sigma 3.5 (about sigma 7 and 14 of the
        frame), read bilinearly at each pixel, as the bank's ``L<n>up`` features
        are (`msclassify.pixel._teacher_context`); no filter is computed twice.
        On EM clicks it lifts the model by +0.010 membrane F1 on the mean of 8
        draws (+0.016 with ``teacher="mean"``, which then meets the recipe), but
        it costs EM balanced strokes 0.011, and the teacher leans on the context
        where scribbles sit away from outlines: a real fly crop's outlines get
        blurrier and blockier (outline error 0.23-0.25, grid share 0.39-0.40;
        docs/scribbles.md, section 19). Opt-in. ``"snap"``: the teacher with
        context decides which regions there are, and a second, plain teacher
        where their outlines run: each stretch where the two class maps differ
        that both maps' outlines bound takes the plain class
        (`msclassify.pixel._distill.snap_outlines`). With ``teacher="mean"`` it
        keeps the fly crop's outlines (grid share 0.34, outline error
        0.18-0.20) and gains on EM clicks (-0.0095 against the recipe instead
        of -0.016, 8 draws), larvae clicks and EM balanced, but does not meet
        the recipe on EM clicks and fits four teacher models
        (docs/scribbles.md, section 22). Opt-in.
    class_weight : {"auto", None, "sqrt", "balanced"}, optional
        How much each class's scribbles weigh in the loss, for the distillation
        teacher and the model alike. With every labelled pixel weighing 1
        (None) the model learns the ratio of the strokes as a prior: right when
        the strokes over-represent a rare class (small flies on a large floor),
        wrong when they under-represent it (a 1-px brush along membranes labels
        ~7 interior pixels for each membrane pixel, and the model shrinks the
        membranes). ``"auto"`` (default) tells the two apart with the
        distillation teacher: after fitting it on the scribbles as they are, the
        share of each class in its class map of the cost samples (pixels drawn
        uniformly from the frames) is compared with the scribbled share, and a
        class scribbled less than both that share and an equal share (1/K) is
        raised to 1/K of the weight (the teacher is refit with the new weights;
        `msclassify.pixel._balance.under_scribbled_weights`). In a volume the
        share is taken on the slices that hold scribbles, the sample the
        scribbled share comes from (docs/volumes.md, "3D nuclei"). Otherwise the
        weights stay as scribbled, and so does the model. Without distillation
        (``distill_weight=0``) there is no teacher and ``"auto"`` is None.
        ``"sqrt"``: a partial balance, the labelled pixels of a class weigh in
        total the square root of how many were scribbled (7:1 strokes weigh
        2.6:1). ``"balanced"``: every class weighs the same in total. Measured
        per scribble style in docs/scribbles.md (section 10).
    semi_supervised : bool, optional
        Also learn from unlabelled pixels (GRBB, `msclassify.baselines.GRBBClassifier`):
        the gradients of the scribbled pixels are propagated over a kNN graph on
        the feature vectors of ``n_unlabelled`` pixels drawn from the labelled
        frames, so that a few scribbles reach the pixels that look like them.
        See `msclassify.pixel.UnlabelledPixels` for the exact rules.
    n_unlabelled : int, optional
        Unlabelled pixels drawn (on a jittered grid) from the labelled frames, in
        total, for ``semi_supervised``.
    n_neighbors : int, optional
        Neighbours per pixel in the kNN graph, for ``semi_supervised``.
    laplacian_regularization : float, optional
        Weight of the graph smoothness term in the scribbled pixels' gradient
        (lambda of the GRBB paper), for ``semi_supervised``. The propagation to
        unlabelled pixels does not need it; the default 0 segmented the
        synthetic flies best (``benchmarks/bench_semi_supervised.py``).
    spacing : tuple of 3 float, optional
        Classify **volumes**: the voxel size ``(z, y, x)`` (any unit, the same
        for all three). The model then takes volumes ``(Z, Y, X)`` or
        ``(Z, Y, X, C)`` with labels ``(Z, Y, X)`` (scribbles on any slices), or
        a time series of them (``(T, Z, Y, X[, C])`` with ``(T, Z, Y, X)``
        labels, or lists), and computes its features in 3D with sigma per axis
        in physical units on a pyramid of 1x2x2 or 2x2x2 blocks chosen from the
        spacing (`msclassify.features.VoxelGrid`; docs/volumes.md). Default
        None: 2D frames, and a ``(T, H, W)`` stack is a stack of frames (the
        per-slice mode for thin or very anisotropic stacks). With
        ``cost_tradeoff="auto"`` a volume's scribbles are held out by labelled
        slice (or by stroke on one). Volume models take no ``semi_supervised``.

    Attributes
    ----------
    classes_ : ndarray
        The label values used in training (sorted); `predict` returns them.
    n_channels_ : int
        Channels of the training images.
    bank_ : FeatureBank
        The candidate features; `booster_` indexes them.
    booster_ : msclassify.cegb.Booster
    features_used_ : list of str
        Ids of the features the model uses (the only ones computed to predict).
    feature_cost_per_pixel_ : float
        Modelled operations per image pixel to compute those features: the sum
        of their ``batch_cost`` (see `msclassify.features`).
    cost_tradeoff_ : float
        The cost_tradeoff the model was trained with (the one chosen, with "auto").
    tradeoff_path_ : list of dict or None
        With "auto", one entry per model fitted on the path (in path order; the
        values the search skipped are left out): ``cost_tradeoff``,
        ``score`` (the lower of ``scribble_score`` and ``teacher_agreement``),
        ``cost_per_pixel`` (``evaluation_per_pixel + features_per_pixel``,
        modelled operations) and ``features_used``; None for a given value.
    tradeoff_reason_ : str
        One sentence saying why ``cost_tradeoff_`` was chosen (or that it was given).
    intensity_ : IntensityRange or None
        The dtype and value range of the training frames: every frame is read in
        their units, and a frame that cannot be in them is refused (ValueError)
        instead of labelled wrongly (see `msclassify.pixel.IntensityRange`). None
        for models saved before it was recorded: frames are normalised by dtype.
    teacher_features_ : list of str or None
        Ids of the features the distillation teacher could use (the bank's
        full-resolution ones), or None if the model was not distilled.

    Notes
    -----
    **Cost per image, not per scribble.** A model is paid for by every pixel of
    every frame it segments, but it is trained on scribbles, which over-represent
    the rare classes: in the fly benchmarks a fly covers ~1% of a frame but gets
    ~15% of the scribbles. If the labelled pixels carried the cost, splits that
    only fly pixels reach would look ~15x too expensive, and splits that the
    background reaches slightly too cheap. So the labelled pixels carry the loss and no cost, and
    ``n_cost_samples`` pixels drawn uniformly from the labelled frames carry the
    cost and no loss (``sample_weight`` 0; the core routes them through every
    tree). Their ``cost_weight`` is scaled so that together they weigh as many
    pixels as one (average) image, so the evaluation penalty of a split,
    ``split_cost x pixels reaching it / share``, is its cost *per image*. The
    whole-image feature cost gamma_m is also per image: the bank's
    ``batch_cost`` (operations per pixel) times the pixel count. Per-sample
    feature costs are 0 (a computed feature map serves every pixel) and shares
    are charged along paths (``share_mode="path"``), which is what multi-scale
    prediction really does.

    **Scale of cost_tradeoff.** The gain of a split is a sum over labelled pixels
    and the penalty a per-image cost, so the core's mu is
    ``cost_tradeoff x n_labelled / pixels_per_image``: a split is taken when
    its loss reduction per labelled pixel exceeds ``cost_tradeoff`` times the
    operations per pixel it adds. This keeps the meaning of ``cost_tradeoff``
    independent of the image size and of how much the user scribbled.

    **Distillation.** Scribbles sit away from object boundaries, so on them
    alone a coarse 8x8-block decision looks as good as a full-resolution one
    and the cost penalty picks it: staircase outlines. So `fit` first trains a
    teacher on the bank's full-resolution features (by default plain boosting
    near the scribbles and a forest far from them: ``teacher``), and adds
    ``n_distill_pixels`` pixels per frame labelled by it, most of them within
    3 px of its outlines (weight ``distill_weight`` times the scribbles';
    `msclassify.pixel._distill`). The model then pays for coarse decisions
    only where the teacher agrees with them, and refines outlines at full
    resolution. Training takes longer: on one 832x512 fly crop 10 s instead
    of 2 s (loaded 2-core machine).

    **Defaults.** ``features="default"`` (every filter at sigma 0.7, 1.6, 3.5
    on all four levels), ``cost_tradeoff=1e-3``, ``split_cost=4``,
    ``distill_weight=3`` and 50 trees of up to 15 leaves at learning rate 0.2,
    chosen on the real sets of ``benchmarks/bench_accuracy.py`` (README,
    "Accuracy on the real sets"). Measured there (10 test frames each,
    scikit-image's ``multiscale_basic_features`` + RandomForest(50, depth 10)
    timed in the same run, quiet machine): on fly_masks_dev SEG 0.946 vs its
    0.935 at 12.6x its speed (5 features, 7 node evaluations per pixel, most
    trees decided on 8x8 blocks; 50 ms per 1024² frame); on isbi2012_em
    membrane F1 0.691 / pixel accuracy 0.824 vs 0.658 / 0.788 at 7.6x. Without
    distillation the same bank at ``cost_tradeoff=2e-4`` reached fly SEG 0.866
    (staircases). Plain boosting (``cost_tradeoff=0``) is 0.009 fly SEG better
    at 8x the time. Larger tradeoffs were faster but not kept: at 3e-3
    (15.8x / 13.8x in that run) fly SEG was 0.9425-0.9441 over random_state 0-4
    (1e-3: 0.9443-0.9474) and the outline of a real fly frame ran more along
    the 8x8 block grid (``tests/test_real_fly_outlines.py``: 0.40 of its class
    changes on the grid vs 0.28; the mask 0.13); 2e-3 was worse on both counts
    (SEG 0.9422-0.9434, grid share 0.46). For small objects (a few pixels
    across) lower ``cost_tradeoff``: the block decisions then cannot pay for
    themselves.

    Examples
    --------
    >>> import numpy as np
    >>> from msclassify import PixelClassifier
    >>> rng = np.random.default_rng(0)
    >>> image = rng.normal(0.2, 0.05, (64, 64)); image[20:40, 20:40] += 0.6
    >>> labels = np.zeros((64, 64), np.uint8); labels[2:8, 2:60] = 1; labels[25:35, 25:35] = 2
    >>> clf = PixelClassifier(n_estimators=20, random_state=0).fit(image, labels)
    >>> clf.predict(image)[30, 30], clf.predict(image)[5, 50]
    (np.uint8(2), np.uint8(1))
    >>> clf.predict_proba(image).shape
    (64, 64, 2)

    Let the data choose the cost tradeoff:

    >>> auto = PixelClassifier(cost_tradeoff="auto", n_estimators=20, random_state=0)
    >>> auto = auto.fit(image, labels)
    >>> [p["cost_tradeoff"] for p in auto.tradeoff_path_]    # bisected: the cheapest is as good
    [0.0, 0.0001, 0.001]
    >>> auto.cost_tradeoff_
    0.001
    >>> auto.predict(image)[30, 30], auto.predict(image)[5, 50]
    (np.uint8(2), np.uint8(1))
    """

    def __init__(self, features="default", *, cost_tradeoff=1e-3, tolerance=0.005, split_cost=4.0,
                 n_estimators=50, learning_rate=0.2, max_leaves=15, max_depth=None,
                 min_samples_leaf=20, min_hessian_leaf=1e-3, l2_regularization=1.0,
                 max_bins=255, subsample=1.0, colsample=None, random_state=None,
                 share_mode="path", growth="best_first", hessian="exact",
                 feature_cost_mode="lazy", evaluation_cost_mode="leaf", n_cost_samples=16384,
                 distill_weight=3.0, n_distill_pixels=25000, teacher_stride=4,
                 teacher="blend", teacher_estimators=None, teacher_context=False,
                 class_weight="auto", semi_supervised=False, n_unlabelled=4096, n_neighbors=9,
                 laplacian_regularization=0.0, spacing=None):
        self.features = features
        self.cost_tradeoff = cost_tradeoff
        self.tolerance = tolerance
        self.split_cost = split_cost
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_leaves = max_leaves
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.min_hessian_leaf = min_hessian_leaf
        self.l2_regularization = l2_regularization
        self.max_bins = max_bins
        self.subsample = subsample
        self.colsample = colsample
        self.random_state = random_state
        self.share_mode = share_mode
        self.growth = growth
        self.hessian = hessian
        self.feature_cost_mode = feature_cost_mode
        self.evaluation_cost_mode = evaluation_cost_mode
        self.n_cost_samples = n_cost_samples
        self.distill_weight = distill_weight
        self.n_distill_pixels = n_distill_pixels
        self.teacher_stride = teacher_stride
        self.teacher = teacher
        self.teacher_estimators = teacher_estimators
        self.teacher_context = teacher_context
        self.class_weight = class_weight
        self.semi_supervised = semi_supervised
        self.n_unlabelled = n_unlabelled
        self.n_neighbors = n_neighbors
        self.laplacian_regularization = laplacian_regularization
        self.spacing = spacing

    # -- training ------------------------------------------------------------------------------
    def fit(self, images, labels, callback=None, feature_cache=None, progress=None):
        """Train on labelled pixels of one or several frames.

        Parameters
        ----------
        images : array_like or sequence of array_like
            One frame ``(H, W)`` / ``(H, W, C)``, a stack ``(T, H, W)`` /
            ``(T, H, W, C)`` matching a label stack, or a list of frames (sizes may
            differ). Channels are last. With ``spacing``: one volume
            ``(Z, Y, X)`` / ``(Z, Y, X, C)``, a series ``(T, Z, Y, X[, C])`` or a
            list of volumes.
        labels : array_like of int or sequence of them
            ``(H, W)`` per frame (``(Z, Y, X)`` per volume): 0 = unlabelled,
            positive values = classes (at least two distinct ones in total).
            Frames without labels are skipped.
        callback : callable, optional
            ``callback(iteration, n_iterations)`` after every boosting iteration; a
            truthy return value stops training early (the trees so far are kept).
            With ``cost_tradeoff="auto"`` it counts over 5 fits, each as if it
            had ``n_estimators`` iterations (the path fits grow a quarter of them; the
            count jumps to the refit, the 5th, when the search fits 3 path models).
        feature_cache : msclassify.features.FeatureCache, optional
            Reuse the features of frames seen in earlier fits (interactive
            retraining after each stroke computes a frame's features once).
        progress : callable, optional
            ``progress(report)`` with a `msclassify.pixel.TrainingProgress` (stage,
            step, n_steps, fraction, eta_s, elapsed_s) as every stage advances:
            ``"features"`` per frame, ``"teacher"`` and the model (``"model"``, or
            ``"μ path k/5"`` with ``cost_tradeoff="auto"``) per iteration,
            ``"distillation"`` per frame, and ``"done"`` at the end.

        Returns
        -------
        self
        """
        for name, value in (("callback", callback), ("progress", progress)):
            if value is not None and not callable(value):
                raise TypeError(f"{name} must be callable or None, got {type(value).__name__}")
        if feature_cache is not None and not isinstance(feature_cache, FeatureCache):
            raise TypeError(f"feature_cache must be a msclassify.features.FeatureCache or None, "
                            f"got {type(feature_cache).__name__}")
        n_cost_samples = check_int(self.n_cost_samples, "n_cost_samples")
        self._check_semi_supervised_params()
        cost_tradeoff, tolerance = self._check_tradeoff_params()
        spacing = self._check_spacing()
        pairs = _training_pairs(images, labels, 2 if spacing is None else 3)
        classes = np.unique(np.concatenate([np.unique(lab[lab > 0]) for _, lab in pairs]))
        if classes.size < 2:
            found = "no labelled pixels" if classes.size == 0 else f"only class {classes[0]}"
            raise ValueError(f"labels hold {found}; scribble at least two classes (0 means "
                             "unlabelled, 1, 2, ... are classes)")
        n_channels = _frame_channels(pairs[0][0], pairs[0][1])
        if any(_frame_channels(frame, lab) != n_channels for frame, lab in pairs):
            raise ValueError("all training frames must have the same number of channels")
        intensity = IntensityRange.of_frames([frame for frame, _ in pairs])
        bank = _make_bank(self.features, n_channels, spacing)
        seed = as_seed(self.random_state)
        rng = np.random.default_rng(seed)
        own_cache = feature_cache is None
        if own_cache:                  # the teacher's pass reads the same features again
            feature_cache = FeatureCache(max_bytes=_FIT_CACHE_BYTES)
        frame_levels = functools.partial(feature_cache.levels, bank)
        teacher_features = self._teacher_features(bank)
        multi = classes.size > 2
        class_weight = self._check_class_weight()
        # with "auto" weights the teacher may be fit twice: its stage counts both fits
        teacher_fits = 2 if class_weight == "auto" else 1
        n_teacher = teacher_rounds(self.n_estimators, classes.size, self.teacher_estimators,
                                   volume=spacing is not None)
        tracker = self._progress_tracker(progress, pairs, bank, n_channels, n_cost_samples,
                                         teacher_features, classes.size if multi else 1,
                                         cost_tradeoff == "auto", teacher_fits, n_teacher)
        tracker.start("features", len(pairs))
        compute_levels = _counting(frame_levels, tracker.step)
        unlabelled = None
        if self.semi_supervised:
            unlabelled = UnlabelledPixels(pairs, self.n_unlabelled, rng)
            compute_levels = unlabelled.gathering(compute_levels)
        X, y, sample_weight, cost_weight, pixels_per_image, row_pixels = training_set(
            compute_levels, pairs, classes, n_cost_samples, rng, return_pixels=True)
        objective = "multiclass" if multi else "binary"
        params = {name: getattr(self, name) for name in _CEGB_PARAMS}
        params["random_state"] = seed
        params["colsample"] = _colsample(self.colsample, classes.size)
        params["feature_batch_costs"] = bank.batch_costs() * pixels_per_image
        params["feature_share"] = bank.shares()
        params["feature_costs"] = None
        scribbled_rows = np.flatnonzero(sample_weight > 0)   # before teacher-labelled rows
        if class_weight in _CLASS_WEIGHT_POWER:
            sample_weight = class_balanced_weights(y, sample_weight, classes.size,
                                                   _CLASS_WEIGHT_POWER[class_weight])
        context = self._teacher_context_features(bank)     # validated with or without a teacher
        context = None if teacher_features is None else context
        if teacher_features is not None:
            tracker.start("teacher", teacher_fits * n_teacher)
            # the teacher draws from all its features unless colsample is given: its class map
            # is the model's target near outlines (half of them lost 0.01 pixel accuracy on a
            # 4-class RGB photo)
            teacher_params = dict(params, colsample=_colsample(self.colsample, 2),
                                  n_estimators=n_teacher)
            plain_params = teacher_params
            teacher_X, teacher_columns = X, teacher_features
            if context is not None:     # the level-0 columns, then the context at the same pixels
                teacher_X = np.hstack([X[:, teacher_features], np.concatenate(
                    [interpolated(frame_levels(frame), context, *pixels)
                     for (frame, _), pixels in zip(pairs, row_pixels)])])
                teacher_columns = np.arange(teacher_X.shape[1])
                teacher_params = dict(teacher_params, feature_share=np.ones(teacher_X.shape[1]))
            teacher = fit_teacher(teacher_X, y, sample_weight, teacher_params, teacher_columns,
                                  objective, classes.size if multi else None,
                                  callback=lambda iteration, _: tracker.step(iteration),
                                  kind=self.teacher)
            if class_weight == "auto":
                # raise the classes scribbled less than the teacher finds them in the frames;
                # in a volume, on the slices scribbled (if any cost sample lies on them)
                cost_rows = cost_weight > 0
                on_planes = cost_rows & scribbled_plane_rows([lab for _, lab in pairs],
                                                             row_pixels)
                cost_rows = on_planes if on_planes.any() else cost_rows
                shares = predicted_shares(teacher, teacher_X[cost_rows][:, teacher_columns],
                                          cost_weight[cost_rows], classes.size)
                weighted = under_scribbled_weights(y, sample_weight, classes.size, shares)
                if weighted is not sample_weight:
                    sample_weight = weighted
                    teacher = fit_teacher(
                        teacher_X, y, sample_weight, teacher_params, teacher_columns, objective,
                        classes.size if multi else None,
                        callback=lambda iteration, _: tracker.step(n_teacher + iteration),
                        kind=self.teacher)
            outline_teacher = None
            if context is not None and self.teacher_context == "snap":
                # the plain teacher places the outlines the teacher with context draws nearby
                outline_teacher = fit_teacher(X, y, sample_weight, plain_params, teacher_features,
                                              objective, classes.size if multi else None,
                                              kind=self.teacher)
            tracker.start("distillation", len(pairs))
            X_t, y_t, weight_t = teacher_pixels(_counting(frame_levels, tracker.step), pairs,
                                                teacher, teacher_features,
                                                self.n_distill_pixels, DISTILL_BAND, rng,
                                                stride=int(self.teacher_stride),
                                                context_indices=context,
                                                outline_teacher=outline_teacher)
            weight_t *= float(self.distill_weight) * sample_weight.sum() / weight_t.sum()
            X, y = np.concatenate([X, X_t]), np.concatenate([y, y_t])
            sample_weight = np.concatenate([sample_weight, weight_t])
            cost_weight = np.concatenate([cost_weight, np.zeros(y_t.size)])
        if own_cache:      # every row is gathered: the models train without the features
            feature_cache.clear()
        if unlabelled is not None:
            X, y, sample_weight, cost_weight, graph_objective = unlabelled.training_set(
                X, y, sample_weight, cost_weight, classes.size, self.n_neighbors,
                self.laplacian_regularization, self.hessian == "exact", rng)
        self.bank_ = bank
        self.classes_ = classes
        self.n_channels_ = n_channels
        self.intensity_ = intensity
        self.teacher_features_ = None if teacher_features is None else \
            [bank.ids[i] for i in teacher_features] + \
            ([] if context is None else [bank.ids[i] for i in context])

        fits = itertools.count(1)      # path fits so far (a study may fit more than the search)
        light = None if cost_tradeoff != "auto" else \
            _path_rows(sample_weight, cost_weight, scribbled_rows, rng)
        path_bins = {}                 # the path models train on the same rows: bin them once

        def fit_core(cost_tradeoff, weights, callback, path=False, init=None):
            rows_X, rows_y, cost, fit_params = X, y, cost_weight, params
            if path:                # the path only ranks the values: fewer rows and trees
                rows, scale = light
                rows_X, rows_y, weights, cost = X[rows], y[rows], weights[rows] * scale, \
                    cost_weight[rows] * scale
                fit_params = dict(params, n_estimators=max(1, params["n_estimators"]
                                                           // _PATH_TREE_SHARE))
            fit_params["cost_tradeoff"] = float(cost_tradeoff) * float(weights.sum()) \
                / pixels_per_image
            n_trees = fit_params["n_estimators"]
            n_fits = MAX_PATH_FITS + 1         # the refit is the last, however many were fitted
            fit = min(next(fits), n_fits - 1) if path else n_fits
            tracker.start("model" if self.cost_tradeoff != "auto" else
                          f"μ path {fit}/{n_fits}", n_trees)

            def report(iteration, n_iterations):
                tracker.step(iteration)
                # callback counts a path fit as if it had the refit's n_estimators iterations
                full = params["n_estimators"]
                return callback is not None and callback(iteration * full // n_trees, full)
            booster = train(rows_X, rows_y, objective if unlabelled is None else graph_objective,
                            fit_params, n_classes=classes.size if multi else None,
                            sample_weight=weights, cost_weight=cost, callback=report,
                            bin_cache=path_bins if path else None, init_booster=init)
            # The graph objective is the logistic/softmax loss plus smoothing: same link.
            booster.objective = objective
            return booster

        if cost_tradeoff == "auto":
            # A volume's scribbles are held out by labelled slice (or by stroke within one):
            # its slices in z order hold its labelled voxels in the rows' order.
            label_frames = [lab for _, lab in pairs] if spacing is None else \
                [plane for _, lab in pairs for plane in lab if plane.any()]
            self.booster_, self.cost_tradeoff_, self.tradeoff_path_, self.tradeoff_reason_ = \
                auto_tradeoff(fit_core, label_frames, scribbled_rows, classes, X, y,
                              sample_weight, cost_weight, tolerance, bank.batch_costs(), bank.ids,
                              callback)
        else:
            self.booster_ = fit_core(cost_tradeoff, sample_weight, callback)
            self.cost_tradeoff_, self.tradeoff_path_ = cost_tradeoff, None
            self.tradeoff_reason_ = f"cost_tradeoff={cost_tradeoff:g} was given"
        self._prepare()
        _warn_if_trivial(self, pairs)
        tracker.done()
        return self

    def _progress_tracker(self, progress, pairs, bank, n_channels, n_cost_samples,
                          teacher_features, n_outputs, auto, teacher_fits, n_teacher):
        """A `ProgressTracker` for this fit, its stages weighted by `stage_weights`."""
        n_pixels = sum(lab.size for _, lab in pairs)
        n_scribbled = sum(int(np.count_nonzero(lab)) for _, lab in pairs)
        distill = teacher_features is not None
        n_rows = n_scribbled + n_cost_samples + (
            len(pairs) * int(self.n_distill_pixels) if distill else 0)
        plan = stage_weights(n_pixels, n_channels, n_scribbled,
                             0 if not distill else teacher_features.size, n_rows, len(bank),
                             int(self.n_estimators), n_outputs, distill,
                             MAX_PATH_FITS + 1 if auto else 1,
                             (n_scribbled + (n_rows - n_scribbled) / _PATH_ROW_SHARE) / n_rows,
                             int(self.teacher_stride), teacher_fits, 1 / _PATH_TREE_SHARE,
                             n_teacher)
        return ProgressTracker(progress, plan)

    def _teacher_features(self, bank):
        """Bank indices the distillation teacher uses (level 0), or None if there is none.

        Distillation runs when ``distill_weight > 0``, ``semi_supervised`` is off
        (a teacher trained on the scribbles alone would overrule the propagation
        to unlabelled pixels: with 2 scribbles per class it predicted the prior)
        and the bank has both full-resolution and coarser features.
        """
        weight = check_number(self.distill_weight, "distill_weight",
                              note="0 turns distillation off")
        check_int(self.n_distill_pixels, "n_distill_pixels", minimum=1)
        check_int(self.teacher_stride, "teacher_stride", minimum=1)
        if self.teacher_estimators is not None:
            check_int(self.teacher_estimators, "teacher_estimators", minimum=1)
        if self.teacher not in TEACHERS:
            raise ValueError(f"teacher must be one of {', '.join(map(repr, TEACHERS))}, "
                             f"got {self.teacher!r}")
        full_resolution = np.flatnonzero(bank.shares() == 1)
        if weight == 0 or self.semi_supervised or full_resolution.size in (0, len(bank)):
            return None
        return full_resolution

    def _teacher_context_features(self, bank):
        """Bank indices of the context the teacher reads bilinearly, or None (off, or none)."""
        if not (isinstance(self.teacher_context, (bool, np.bool_))
                or self.teacher_context == "snap"):
            raise ValueError(f"teacher_context must be True, False or 'snap', got "
                             f"{self.teacher_context!r}")
        context = context_features(bank) if self.teacher_context else np.empty(0)
        return context if context.size else None

    def _check_class_weight(self):
        if self.class_weight not in (None, "auto", *_CLASS_WEIGHT_POWER):
            raise ValueError(f"class_weight must be 'auto', 'balanced', 'sqrt' or None, got "
                             f"{self.class_weight!r}")
        return self.class_weight

    def _check_tradeoff_params(self):
        """``(cost_tradeoff, tolerance)``: "auto" or a float >= 0, and a float >= 0."""
        tolerance = check_number(self.tolerance, "tolerance",
                                 note="held-out balanced accuracy a cheaper model may lose")
        if isinstance(self.cost_tradeoff, str):
            if self.cost_tradeoff != "auto":
                raise ValueError(f"cost_tradeoff must be 'auto' or a number >= 0, got "
                                 f"{self.cost_tradeoff!r}")
            if self.semi_supervised:
                raise ValueError("cost_tradeoff='auto' does not combine with "
                                 "semi_supervised=True; give a number, e.g. cost_tradeoff=2e-4")
            return "auto", tolerance
        return check_number(self.cost_tradeoff, "cost_tradeoff", note="or 'auto'"), tolerance

    def _check_spacing(self):
        """None (2D frames) or the validated voxel spacing; what volumes do not support yet."""
        if self.spacing is None:
            return None
        spacing = check_spacing(self.spacing)
        if self.semi_supervised:
            raise ValueError("semi_supervised=True is for 2D frames; train a volume model "
                             "(spacing=...) without it")
        return spacing

    def _check_semi_supervised_params(self):
        if not isinstance(self.semi_supervised, (bool, np.bool_)):
            raise TypeError(f"semi_supervised must be True or False, got {self.semi_supervised!r}")
        check_int(self.n_unlabelled, "n_unlabelled")
        check_graph_params(self.n_neighbors, self.laplacian_regularization)

    def _prepare(self):
        """Index the features the model uses, for prediction."""
        used = self.booster_.features_used()
        self._used = used
        self.features_used_ = [self.bank_.ids[i] for i in used]
        self.feature_cost_per_pixel_ = float(self.bank_.batch_costs()[used].sum())
        self._per_pixel_booster = None

    # -- prediction ----------------------------------------------------------------------------
    def _check_frame(self, image):
        check_is_fitted(self, "booster_")
        shape = np.shape(image)
        grid = self.bank_.grid
        n_axes = 2 if grid is None else 3
        single = (len(shape) == n_axes and self.n_channels_ == 1) or (
            len(shape) == n_axes + 1 and shape[-1] == self.n_channels_)
        if not single:
            axes = "(H, W" if grid is None else "(Z, Y, X"
            expected = axes + (")" if self.n_channels_ == 1 else f", {self.n_channels_})")
            if grid is not None:
                raise ValueError(f"this is a volume model (voxel spacing {grid.spacing}): "
                                 f"expected one volume of shape {expected}, got shape {shape}; "
                                 "predict the volumes of a series one at a time, or train a 2D "
                                 "model (no spacing) for single frames")
            raise ValueError(f"expected one frame of shape {expected} like the training images, "
                             f"got shape {shape}; predict the frames of a stack one at a time"
                             + ("; if this is a volume, this 2D model predicts it slice by "
                                "slice (or train one with spacing=(z, y, x))"
                                if len(shape) == n_axes + 1 else ""))
        return image

    def _intensity_scale(self, image):
        """The factor that reads ``image`` in the units of the training frames
        (`intensity_`); None for a model saved before intensities were recorded (it
        normalises by dtype)."""
        return None if self.intensity_ is None else self.intensity_.scale_for(image)

    def _pyramid(self, image):
        """``image`` (checked by `_check_frame`) as a `PyramidImage` (`PyramidVolume`) in
        the units of the training frames."""
        scale = self._intensity_scale(image)
        if self.bank_.grid is not None:
            return PyramidVolume(image, self.bank_.grid, intensity_scale=scale)
        return PyramidImage(image, intensity_scale=scale)

    def _predict(self, image, strategy="multiscale", output="raw", cost_map=False):
        """Raw scores, probabilities or classes of one frame (see `predict_multiscale`)."""
        image = self._check_frame(image)
        spatial = np.shape(image)[:2 if self.bank_.grid is None else 3]
        pixels = int(np.prod(spatial, dtype=np.int64))
        shares = self.bank_.shares()[self._used] if strategy == "multiscale" else \
            np.ones(self._used.size)
        needed = frame_bytes(pixels, shares, self.booster_.n_outputs, self.classes_.size,
                             output == "proba") + 8 * pixels * bool(cost_map)
        check_frame_memory(needed, spatial)
        image = self._pyramid(image)
        if strategy not in _STRATEGIES:
            raise ValueError(f"strategy must be one of {_STRATEGIES}, got {strategy!r}")
        if strategy == "per_pixel":
            features = self.bank_.compute_full(image, self._used)
            n_used = features.shape[-1]
            raw = self._booster_on_used_features().predict_raw(features.reshape(-1, n_used))
            raw = raw.reshape(features.shape[:-1] + (-1,))
            if output == "proba":
                return class_probabilities(raw, np.float32), None
            if output == "class":
                return self.classes_[most_probable_class(raw)], None
            return raw, None
        levels = self.bank_.compute_levels(image, self._used)
        feature_level = np.full(self.booster_.n_features, -1, dtype=np.int64)
        feature_slot = np.zeros(self.booster_.n_features, dtype=np.int64)
        feature_level[levels.feature_indices] = levels.level
        feature_slot[levels.feature_indices] = levels.slot
        result = predict_multiscale(self.booster_, levels.arrays, feature_level, feature_slot,
                                    levels.shape, output=output, classes=self.classes_,
                                    cost_map=cost_map, blocks=levels.blocks)
        return result.values, result

    def prediction_bytes(self, shape, probabilities=False):
        """Upper estimate of the bytes `predict` allocates for one frame (or volume) of
        spatial ``shape`` (``probabilities``: `predict_proba`), besides the input itself.

        Examples
        --------
        >>> image = np.zeros((16, 16)); labels = np.zeros((16, 16), np.uint8)
        >>> labels[0], labels[8] = 1, 2
        >>> clf = PixelClassifier("fast", n_estimators=2).fit(image, labels)
        >>> clf.prediction_bytes((1000, 1000)) > 8 * 1000 * 1000
        True
        """
        check_is_fitted(self, "booster_")
        return frame_bytes(int(np.prod(shape, dtype=np.int64)), self.bank_.shares()[self._used],
                           self.booster_.n_outputs, self.classes_.size, probabilities)

    def _booster_on_used_features(self):
        """The model with its features renumbered to the used ones (per-pixel reference)."""
        if self._per_pixel_booster is None:
            b, used = self.booster_, self._used
            renumber = np.full(b.n_features, -1, dtype=np.int32)
            renumber[used] = np.arange(used.size, dtype=np.int32)
            trees = []
            for tree in b.trees:
                tree = dict(tree)
                tree["feature"] = np.where(tree["feature"] >= 0, renumber[tree["feature"]], -1)
                trees.append(tree)
            self._per_pixel_booster = Booster(
                trees, b.init_score, used.size, b.objective, b.split_cost, b.feature_costs[used],
                b.feature_batch_costs[used], b.feature_share[used], b.params)
        return self._per_pixel_booster

    def predict_proba(self, image, strategy="multiscale"):
        """Class probabilities of every pixel.

        Parameters
        ----------
        image : array_like
            One frame like the training frames, ``(H, W)`` or ``(H, W, C)``.
        strategy : {"multiscale", "per_pixel"}, optional
            ``"multiscale"`` evaluates the trees on pyramid blocks, coarse to fine;
            ``"per_pixel"`` computes every used feature at full resolution and
            evaluates every pixel on its own (the slow reference). Both give the
            same result up to floating-point rounding.

        Returns
        -------
        ndarray of float32, shape (H, W, n_classes)
            Columns in the order of ``classes_``.
        """
        return self._predict(image, strategy, "proba")[0]

    def predict(self, image, strategy="multiscale"):
        """Most probable class of every pixel: ``(H, W)`` array of ``classes_`` values."""
        return self._predict(image, strategy, "class")[0]

    def uncertainty(self, image):
        """``1 - max class probability`` of every pixel: float32 ``(H, W)``."""
        return most_probable(self.predict_proba(image))[1]

    def cost_map(self, image):
        """Per-pixel evaluation cost: ``split_cost / share`` summed over the visited nodes.

        A node evaluated once for a block of ``s`` pixels costs each of them
        ``split_cost / s``. Summed over the image this is `ImageCost.evaluation`.

        Returns
        -------
        ndarray of float32, shape (H, W)
        """
        _, result = self._predict(image, cost_map=True)
        return result.cost_map.astype(np.float32)

    def prediction_cost(self, image):
        """Modelled cost of predicting ``image``: tree evaluations and feature computation.

        Returns
        -------
        ImageCost
        """
        _, result = self._predict(image)
        pixels = np.prod(np.shape(image)[:2 if self.bank_.grid is None else 3])
        features = self.feature_cost_per_pixel_ * float(pixels)
        return ImageCost(self.booster_.split_cost * result.pixel_evaluations, features,
                         result.n_evaluations)

    # -- model files ---------------------------------------------------------------------------
    def save(self, path):
        """Save to a versioned model file (no pickle) holding the feature bank.

        Load it with `msclassify.load_model`.
        """
        check_is_fitted(self, "booster_")
        booster_meta, arrays = self.booster_.to_model_file()
        features = self.features if isinstance(self.features, str) else self.bank_.ids
        params = estimator_params(self, features=features)
        meta = {"params": params, "bank": self.bank_.to_dict(), "booster": booster_meta,
                "classes": self.classes_.tolist(), "classes_dtype": self.classes_.dtype.str,
                "n_channels": self.n_channels_, "teacher_features": self.teacher_features_,
                "tradeoff": tradeoff_record(self.cost_tradeoff_, self.tradeoff_path_,
                                            self.tradeoff_reason_)}
        if self.intensity_ is not None:
            meta["intensity"] = self.intensity_.to_dict()
        write_model(path, _MODEL_KIND, meta, arrays)

    @classmethod
    def _from_model_file(cls, meta, arrays):
        params = meta.get("params")
        if not isinstance(params, dict):
            raise ModelFileError("params must be a JSON object")
        clf = cls(**params)
        try:
            clf.bank_ = FeatureBank.from_dict(meta.get("bank"))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ModelFileError(f"it holds an unusable feature bank: {exc}") from None
        clf.booster_ = Booster.from_model_file(meta.get("booster"), arrays,
                                               ("binary", "multiclass"))
        if clf.booster_.n_features != len(clf.bank_):
            raise ModelFileError(f"the trees use {clf.booster_.n_features} features, the bank "
                                 f"has {len(clf.bank_)}")
        n_outputs = clf.booster_.n_outputs
        try:
            clf.classes_ = model_classes(meta, max(n_outputs, 2), positive_integers=True)
        except ModelFileError as exc:
            if isinstance(meta.get("classes"), list) and \
                    len(meta["classes"]) != max(n_outputs, 2):
                raise ModelFileError(f"{len(meta['classes'])} classes for {n_outputs} model "
                                     "output(s)") from None
            raise exc from None
        try:
            spacing = clf._check_spacing()
        except (TypeError, ValueError) as exc:
            raise ModelFileError(f"it holds an invalid voxel spacing: {exc}") from None
        grid = clf.bank_.grid
        if (spacing is None) != (grid is None) or (grid is not None
                                                   and grid.spacing != spacing):
            raise ModelFileError(f"its spacing parameter {clf.spacing!r} disagrees with its "
                                 f"feature bank ({'2D' if grid is None else grid.describe()})")
        clf.n_channels_ = model_number(meta, "n_channels", integer=True, low=1)
        if clf.n_channels_ != clf.bank_.n_channels:
            raise ModelFileError(f"n_channels is {clf.n_channels_} but the feature bank is for "
                                 f"{clf.bank_.n_channels}-channel images")
        clf.intensity_ = None  # saved before intensities were recorded: normalised by dtype
        if "intensity" in meta:
            try:
                clf.intensity_ = IntensityRange.from_dict(meta["intensity"])
            except ValueError as exc:
                raise ModelFileError(str(exc)) from None
        try:
            requested, _ = clf._check_tradeoff_params()
            clf.cost_tradeoff_, clf.tradeoff_path_, clf.tradeoff_reason_ = read_tradeoff_record(
                meta.get("tradeoff"), requested)
        except (TypeError, ValueError) as exc:
            raise ModelFileError(f"it holds an invalid cost tradeoff: {exc}") from None
        teacher = meta.get("teacher_features")        # absent in files of earlier versions
        if teacher is not None and not (isinstance(teacher, list)
                                        and set(teacher) <= set(clf.bank_.ids)):
            raise ModelFileError("teacher_features must be null or a list of ids of its "
                                 "feature bank")
        clf.teacher_features_ = teacher
        clf._prepare()
        return clf


def load_pixel_model(path, n_channels=None, frames="the frames"):
    """Load a saved `PixelClassifier`; with ``n_channels``, check that it fits such frames.

    Parameters
    ----------
    path : str, Path or msclassify.modelfile.ModelFile
        A model file written by `PixelClassifier.save`, or its bytes already read
        (`msclassify.modelfile.open_model_file`).
    n_channels : int, optional
        Channels of the frames the model is to predict (see `check_channels`).
    frames : str, optional
        What to call those frames in an error message (e.g. their file name).

    Raises
    ------
    ModelFileError
        If the file is missing, corrupt, or holds another kind of model.
    ValueError
        If the model was trained on frames of another number of channels.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> image = np.zeros((32, 32)); image[8:24, 8:24] = 1
    >>> labels = np.zeros((32, 32), np.uint8); labels[:2] = 1; labels[14:18, 14:18] = 2
    >>> path = os.path.join(tempfile.mkdtemp(), "m.msc")
    >>> PixelClassifier(n_estimators=2).fit(image, labels).save(path)
    >>> load_pixel_model(path, n_channels=3, frames="rgb.mp4")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: ...m.msc was trained on 1-channel images but rgb.mp4 has 3-channel frames; ...
    """
    model_file = open_model_file(path)
    kind, meta, arrays = read_model(model_file)
    if kind != _MODEL_KIND:
        raise ModelFileError(f"{model_file.path} holds a {kind} model, not a pixel classifier; "
                             "train one on images (msclassify train, the napari widget or "
                             "PixelClassifier.fit)")
    model = build_model(PixelClassifier, model_file.path, meta, arrays)
    if n_channels is not None:
        check_channels(model, n_channels, frames, model_file.path)
    return model


def check_channels(model, n_channels, frames="the frames", model_name="the model"):
    """ValueError unless the fitted ``model`` was trained on frames of ``n_channels`` channels.

    ``frames`` and ``model_name`` say in the message which frames and which model.
    """
    if model.n_channels_ != n_channels:
        raise ValueError(f"{model_name} was trained on {model.n_channels_}-channel images but "
                         f"{frames} has {n_channels}-channel frames; predict frames like the "
                         "training frames, or train a model on these")


def _make_bank(features, n_channels, spacing=None):
    if isinstance(features, str):
        return FeatureBank(features, n_channels=n_channels, spacing=spacing)
    if isinstance(features, FeatureBank):
        bank = features
        if spacing is not None:
            bank = FeatureBank(specs=bank.specs, n_channels=bank.n_channels, spacing=spacing)
        elif bank.grid is not None:
            raise ValueError("the feature bank is for volumes but the classifier has no "
                             "spacing; pass spacing=(z, y, x) to PixelClassifier")
    elif isinstance(features, (list, tuple)) and all(isinstance(f, (str, FeatureSpec))
                                                     for f in features):
        bank = FeatureBank(specs=list(features), n_channels=n_channels, spacing=spacing)
    else:
        raise TypeError("features must be a preset name ('fast', 'default', 'fine', 'pyramid', "
                        f"'rich'), a FeatureBank or a list of feature ids, got "
                        f"{type(features).__name__}")
    if bank.n_channels != n_channels:
        raise ValueError(f"the feature bank is for {bank.n_channels}-channel images but the "
                         f"training images have {n_channels} channel(s)")
    return bank


def _warn_if_trivial(model, pairs):
    """Warn when a fitted model cannot tell its classes apart, or a class has a few pixels."""
    counts = {int(value): sum(int(np.count_nonzero(lab == value)) for _, lab in pairs)
              for value in model.classes_}
    few = [f"class {value}: {count} pixel{'s' if count > 1 else ''}"
           for value, count in counts.items() if count < _FEW_PIXELS]
    scribble = "scribble more pixels of every class and train again"
    if not model.features_used_:
        warnings.warn("the model uses no feature, so it predicts the same class for every "
                      "pixel"
                      + (f" ({', '.join(few)} labelled)" if few else "") + f": {scribble}",
                      UserWarning, stacklevel=3)
    elif few:
        warnings.warn(f"{', '.join(few)} labelled, too few to learn from (at least "
                      f"{_FEW_PIXELS} each): {scribble}", UserWarning, stacklevel=3)


def _path_rows(sample_weight, cost_weight, scribbled_rows, rng):
    """Rows the models of the ``cost_tradeoff="auto"`` path train on, and their weight scale.

    Every scribbled row, and one in `_PATH_ROW_SHARE` of the other rows (teacher-labelled
    pixels, cost samples), drawn at random; the scale (1 for scribbles, the inverse share
    for the rest) keeps the total loss and cost weights of each kind.
    """
    others = np.setdiff1d(np.arange(sample_weight.size), scribbled_rows)
    keep = np.sort(rng.choice(others, int(np.ceil(others.size / _PATH_ROW_SHARE)), replace=False))
    rows = np.union1d(scribbled_rows, keep)
    scale = np.where(np.isin(rows, scribbled_rows), 1.0, others.size / max(keep.size, 1))
    return rows, scale


def _colsample(colsample, n_classes):
    """The colsample a fit of ``n_classes`` classes uses: ``colsample``, or for None 1.0 with
    two classes and `MULTICLASS_COLSAMPLE` with more.

    Examples
    --------
    >>> _colsample(None, 2), _colsample(None, 4), _colsample(0.8, 4)
    (1.0, 0.5, 0.8)
    """
    if colsample is None:
        return 1.0 if n_classes <= 2 else MULTICLASS_COLSAMPLE
    return colsample


def _counting(compute_levels, step):
    """``compute_levels`` that reports ``step(k)`` after the k-th frame it computed."""
    count = [0]

    def counted(frame):
        levels = compute_levels(frame)
        count[0] += 1
        step(count[0])
        return levels
    return counted


def _frame_channels(frame, labels):
    return 1 if frame.ndim == labels.ndim else frame.shape[-1]


def _check_labels(labels, name):
    labels = np.asarray(labels)
    if labels.dtype == bool:
        labels = labels.astype(np.uint8)
    if not np.issubdtype(labels.dtype, np.integer):
        raise TypeError(f"{name} must hold integers (0 = unlabelled, 1, 2, ... = classes), got "
                        f"dtype {labels.dtype}; convert with .astype(int)")
    if labels.size and labels.min() < 0:
        raise ValueError(f"{name} has negative values; use 0 for unlabelled and 1, 2, ... for "
                         "classes")
    return labels


def _training_pairs(images, labels, n_axes=2):
    """``[(frame, labels), ...]`` of the frames (volumes, ``n_axes=3``) with at least one
    labelled pixel; labels are ``(H, W)`` (``(Z, Y, X)``)."""
    one, axes = ("frame", "(H, W)") if n_axes == 2 else ("volume", "(Z, Y, X)")
    if isinstance(labels, (list, tuple)):
        if not isinstance(images, (list, tuple)) and np.ndim(images) < n_axes + 1:
            raise ValueError(f"labels is a list of {one}s, so images must be a matching list "
                             "or stack")
        frames, label_frames = list(images), [_check_labels(lab, "labels") for lab in labels]
    else:
        label_array = _check_labels(labels, "labels")
        if label_array.ndim == n_axes:
            frames, label_frames = [images], [label_array]
        elif label_array.ndim == n_axes + 1:
            frames, label_frames = list(images), list(label_array)
        elif n_axes == 2:
            raise ValueError(f"labels must be (H, W) for one frame or (T, H, W) for a stack, got "
                             f"shape {label_array.shape}")
        else:
            raise ValueError(f"labels must be (Z, Y, X) for one volume or (T, Z, Y, X) for a "
                             f"time series of volumes, got shape {label_array.shape}")
    if len(frames) != len(label_frames):
        raise ValueError(f"got {len(frames)} image {one}(s) but {len(label_frames)} label "
                         f"{one}(s)")
    pairs = []
    for t, (frame, lab) in enumerate(zip(frames, label_frames)):
        frame = np.asarray(frame)
        if lab.ndim != n_axes or frame.ndim not in (n_axes, n_axes + 1) \
                or frame.shape[:n_axes] != lab.shape:
            channels = axes[:-1] + ", C)"
            raise ValueError(f"{one} {t}: image of shape {frame.shape} and labels of shape "
                             f"{lab.shape} do not match; labels must be {axes} for an {axes} or "
                             f"{channels} image")
        if np.any(lab):
            pairs.append((frame, lab))
    if not pairs:
        where = "" if n_axes == 2 else " on any slice of the volumes"
        raise ValueError(f"labels hold no labelled pixels{where}; scribble at least two classes "
                         "(0 means unlabelled, 1, 2, ... are classes)")
    return pairs


def training_set(compute_levels, pairs, classes, n_cost_samples, rng, return_pixels=False):
    """The rows `PixelClassifier.fit` trains the core on: labelled pixels and cost samples.

    Labelled pixels carry the loss and no cost; ``n_cost_samples`` pixels drawn
    uniformly from the frames carry the cost and no loss, weighted so that together
    they weigh one average image (see `PixelClassifier`, Notes).

    Parameters
    ----------
    compute_levels : callable
        ``compute_levels(frame)`` gives every bank feature of a frame
        (`msclassify.features.FeatureLevels`), e.g. ``FeatureBank.compute_levels``.
    pairs : list of (frame, labels)
        Frames with their ``(H, W)`` label images (0 = unlabelled), or volumes
        with ``(Z, Y, X)`` labels.
    classes : ndarray
        Sorted label values; ``y`` holds their indices.
    n_cost_samples : int
        Cost samples in total, split evenly over the frames.
    rng : numpy.random.Generator
    return_pixels : bool, optional
        Also return where the rows are.

    Returns
    -------
    X, y, sample_weight, cost_weight : ndarray
        Rows for `msclassify.cegb.train` (``y`` is the class index).
    pixels_per_image : float
        The mean pixel count of the frames, which the cost weights sum to.
    pixels : list of tuple of ndarray
        With ``return_pixels``: per frame, the coordinates (``ys, xs``; a
        volume's ``zs, ys, xs``) of its rows, in their order.

    Examples
    --------
    >>> import numpy as np
    >>> from msclassify.features import FeatureBank
    >>> labels = np.zeros((16, 16), np.uint8); labels[0, :3] = 1; labels[9, 9] = 2
    >>> X, y, sample_weight, cost_weight, pixels = training_set(
    ...     FeatureBank("fast").compute_levels, [(np.zeros((16, 16)), labels)],
    ...     np.array([1, 2]), 10, np.random.default_rng(0))
    >>> X.shape[0], int(sample_weight.sum()), round(float(cost_weight.sum()), 6), pixels
    (14, 4, 256.0, 256.0)
    """
    pixels = np.array([lab.size for _, lab in pairs], dtype=np.float64)
    pixels_per_image = float(pixels.mean())
    per_frame = -(-n_cost_samples // len(pairs))
    blocks, where = [], []
    for (frame, lab), n_pixels in zip(pairs, pixels):
        levels = compute_levels(frame)
        labelled = np.nonzero(lab)
        n_labelled = labelled[0].size
        n_cost = int(min(per_frame, n_pixels))
        drawn = rng.choice(int(n_pixels), n_cost, replace=False)
        cost_pixels = np.unravel_index(drawn, lab.shape)
        rows = np.concatenate([levels.gather(*labelled), levels.gather(*cost_pixels)])
        y = np.concatenate([np.searchsorted(classes, lab[labelled]), np.zeros(n_cost, np.int64)])
        sample_weight = np.concatenate([np.ones(n_labelled), np.zeros(n_cost)])
        cost_weight = np.concatenate([np.zeros(n_labelled),
                                      np.full(n_cost, n_pixels / (len(pairs) * n_cost))])
        blocks.append((rows, y, sample_weight, cost_weight))
        where.append(tuple(np.concatenate(c) for c in zip(labelled, cost_pixels)))
    X, y, sample_weight, cost_weight = (np.concatenate(parts) for parts in zip(*blocks))
    found = (X, y.astype(np.float64), sample_weight, cost_weight, pixels_per_image)
    return found + (where,) if return_pixels else found
