"""Can a fit tell from its own rows where a larger cost_tradeoff costs no accuracy?

For every draw of the picked sets x styles of ``bench_accuracy.py``, fits the default
`PixelClassifier` (μ = 1e-3) and, on the very same rows (same features, teacher,
distillation pixels, seed), the student at ``--mu`` (3e-3): the final
``msclassify.cegb.train`` call is repeated with only ``cost_tradeoff`` changed, which is the
model ``PixelClassifier(cost_tradeoff=MU)`` trains. Both are scored on the set's test
images (``TARGET_METRIC``) and on candidate signals measured on the fit's rows:

* ``distill``: balanced agreement with the distillation teacher on the pixels it labelled
  (most within 3 px of its outlines);
* ``scribbles``: balanced accuracy on the scribbled pixels (in-sample);
* ``sure``: balanced agreement with the teacher on the cost samples (pixels drawn uniformly)
  where the teacher's probability is at least 0.9;
* ``loss``: the weighted log-loss over all loss rows;
* and, per fit, the teacher's mean confidence on the cost samples, the feature share of the
  default's modelled cost and whether ``class_weight="auto"`` raised a class.

``--sets crop`` is the fly crop of ``tests/test_real_fly_outlines.py`` (the outline guard;
its "test" is the grid share, which must stay <= 0.35).
Writes ``benchmarks/results/<--out>.json`` and prints one row per draw.

    python benchmarks/study_mu_rule.py --sets isbi2012_em --styles thin clicks --draws 2
"""

import argparse
import sys
import time

import numpy as np
from _common import REPO, write_results
from bench_accuracy import SETS, TARGET_METRIC

import msclassify.pixel._classifier as classifier
from msclassify.cegb import class_probabilities, most_probable_class
from msclassify.pixel import PixelClassifier
from msclassify.pixel._tradeoff import TEACHER_CONFIDENCE, balanced_accuracy

CAPTURED = {}
_train, _fit_teacher, _teacher_pixels = (classifier.train, classifier.fit_teacher,
                                         classifier.teacher_pixels)


def _capture_train(X, y, objective, params, **kwargs):
    CAPTURED["train"] = (X, y, objective, params, kwargs)
    return _train(X, y, objective, params, **kwargs)


def _capture_teacher(X, y, sample_weight, params, feature_indices, *args, **kwargs):
    CAPTURED["teacher"] = (_fit_teacher(X, y, sample_weight, params, feature_indices, *args,
                                        **kwargs), feature_indices)
    CAPTURED["teacher_weight"] = sample_weight
    return CAPTURED["teacher"][0]


def _capture_pixels(*args, **kwargs):
    found = _teacher_pixels(*args, **kwargs)
    CAPTURED["n_teacher_rows"] = found[1].size
    return found


classifier.train = _capture_train
classifier.fit_teacher = _capture_teacher
classifier.teacher_pixels = _capture_pixels


def log_loss(raw, y, weight):
    proba = class_probabilities(raw)
    picked = proba[np.arange(y.size), y.astype(np.int64)]
    return float(np.average(-np.log(np.clip(picked, 1e-12, 1)), weights=weight))


def signals(booster, X, y, weight, cost_weight, n_teacher, teacher_sure, teacher_class, k):
    raw = booster.predict_raw(X)
    cls = most_probable_class(raw)
    y = y.astype(np.int64)
    distill = slice(X.shape[0] - n_teacher, None)
    scribbled = np.zeros(y.size, bool)
    scribbled[:X.shape[0] - n_teacher] = weight[:X.shape[0] - n_teacher] > 0
    cost = cost_weight > 0
    loss = weight > 0
    return {"distill": balanced_accuracy(y[distill], cls[distill], k),
            "scribbles": balanced_accuracy(y[scribbled], cls[scribbled], k),
            "sure": balanced_accuracy(teacher_class[teacher_sure], cls[cost][teacher_sure], k),
            "loss": log_loss(raw[loss], y[loss], weight[loss])}


def crop_data():
    """The fly crop of ``tests/test_real_fly_outlines.py`` as a set: one train, one test image."""
    sys.path.insert(0, str(REPO / "tests"))
    from tests.test_real_fly_outlines import fly_frames
    image, scribbles, test, mask = fly_frames.__wrapped__()
    return {"train_images": [image], "train_labels": [scribbles], "test_images": [test],
            "mask": mask}


def crop_scores(predictions, mask):
    """The outline guard's grid share (<= 0.35) and outline error (< 0.25)."""
    from tests.test_real_fly_outlines import FLY, grid_transition_share, outline_error
    fly = predictions[0] == FLY
    return {"grid share": grid_transition_share(fly), "outline error": outline_error(fly, mask[0])}


def study(name, style, draw, mu):
    if name == "crop":
        data = crop_data()
        data["mask"] = [data["mask"]]
        spec = {"score": crop_scores, "truth": "mask"}
    else:
        data = SETS[name]["load"](style, None, draw=draw)
        spec = SETS[name]
    start = time.perf_counter()
    model = PixelClassifier(random_state=0).fit(data["train_images"], data["train_labels"])
    fit_s = time.perf_counter() - start
    X, y, objective, params, kwargs = CAPTURED["train"]
    teacher, columns = CAPTURED["teacher"]
    weight, cost_weight = kwargs["sample_weight"], kwargs["cost_weight"]
    kwargs = dict(kwargs, callback=None)
    k = model.classes_.size
    start = time.perf_counter()
    larger = _train(X, y, objective, dict(params, cost_tradeoff=params["cost_tradeoff"] * mu
                                          / model.cost_tradeoff_), **kwargs)
    larger_s = time.perf_counter() - start
    cost = cost_weight > 0
    proba = class_probabilities(teacher.predict_raw(np.ascontiguousarray(X[cost][:, columns])))
    sure = proba.max(axis=1) >= TEACHER_CONFIDENCE
    teacher_class = np.argmax(proba, axis=1)
    n_teacher = CAPTURED["n_teacher_rows"]
    out = {"set": name, "style": style, "draw": draw, "fit s": fit_s, "larger fit s": larger_s,
           "teacher confidence": float(np.average(proba.max(axis=1), weights=cost_weight[cost])),
           "teacher sure share": float(sure.mean()),
           "raised": bool(np.any(CAPTURED["teacher_weight"][CAPTURED["teacher_weight"] > 0]
                                 != 1)),
           "labelled per class": np.bincount(y[weight > 0][:X.shape[0] - n_teacher]
                                             .astype(np.int64)).tolist()}
    for label, booster in (("default", model.booster_), ("larger", larger)):
        model.booster_ = booster
        model._prepare()
        predictions = [model.predict(image) for image in data["test_images"]]
        scores = spec["score"](predictions, data[spec["truth"]])
        score = scores["grid share"] if name == "crop" else scores[TARGET_METRIC[name]]
        costs = [model.prediction_cost(image) for image in data["test_images"][:2]]
        pixels = sum(image.size for image in data["test_images"][:2])
        out[label] = dict(signals(booster, X, y, weight, cost_weight, n_teacher, sure,
                                  teacher_class, k), test=score,
                          scores=scores,
                          cost=sum(c.evaluation + c.features for c in costs) / pixels,
                          feature_share=sum(c.features for c in costs)
                          / sum(c.evaluation + c.features for c in costs))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS) + ["crop"])
    parser.add_argument("--styles", nargs="+", default=None)
    parser.add_argument("--draws", type=int, default=2)
    parser.add_argument("--first-draw", type=int, default=0)
    parser.add_argument("--mu", type=float, default=3e-3)
    parser.add_argument("--out", default="mu_rule")
    args = parser.parse_args()
    rows = []
    keys = ("distill", "scribbles", "sure", "loss", "test", "cost")
    print("set/style draw | Δ " + " Δ ".join(keys) + " | teacher conf | raised | fit s, +s")
    for name in args.sets:
        for style in ["user"] if name == "crop" else SETS[name]["styles"]:
            if args.styles is not None and style not in args.styles:
                continue
            draws = [0] if style == "user" else range(args.first_draw,
                                                      args.first_draw + args.draws)
            for draw in draws:
                row = study(name, style, draw, args.mu)
                rows.append(row)
                print(f"{name}/{style} {draw} | " + " ".join(
                    f"{row['larger'][key] - row['default'][key]:+.4f}" for key in keys)
                    + f" | {row['teacher confidence']:.3f} | {row['raised']} | "
                    f"{row['fit s']:.1f}, {row['larger fit s']:.1f} | default test "
                    f"{row['default']['test']:.4f} feat share "
                    f"{row['default']['feature_share']:.2f}", flush=True)
    command = "python benchmarks/study_mu_rule.py " + " ".join(sys.argv[1:])
    print(f"wrote {write_results(args.out, {'mu': args.mu, 'rows': rows}, command)}")


if __name__ == "__main__":
    main()
