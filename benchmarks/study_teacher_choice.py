"""Could held-out scribbles choose the distillation teacher per fit? Held-out loss per candidate.

For every draw of a scribble style on one real set of ``bench_accuracy.py`` (or,
with ``--fly-crop``, the real fly crop of ``tests/test_real_fly_outlines.py``,
whose outline guard the forest and context teachers fail), the scribbles are
split into 3 folds by connected component (a click or a stroke of one class,
8-connected; components dealt to folds in a seeded random order), and each
candidate teacher is fitted on two folds and scored on the third:

- ``boost``: the default teacher (plain boosting on the bank's level-0 features);
- ``forest``: ``teacher="forest"`` (extra trees, depth 10);
- ``mean``: ``teacher="mean"``;
- ``boost+ctx``: the boosted teacher with ``teacher_context=True``'s columns.

Printed per draw: the class-balanced held-out log loss and error of each. A
rule "take the candidate with the lower held-out loss (or error)" is useful
only if it picks the forest / context on the EM clicks draws and the boosted
teacher where those blur outlines (every fly cell): docs/scribbles.md, section 19.
One thread. Writes ``benchmarks/results/<--out>.json``.

    python benchmarks/study_teacher_choice.py --set isbi2012_em --style clicks --draws 8
    python benchmarks/study_teacher_choice.py --fly-crop
"""

import json
import sys
import time

import numpy as np
from _common import REPO, print_table, write_results
from bench_accuracy import SETS
from scipy import ndimage as ndi
from study_clicks import draw_parser

from msclassify.cegb import class_probabilities
from msclassify.features import FeatureBank
from msclassify.pixel import PixelClassifier
from msclassify.pixel._classifier import _CEGB_PARAMS
from msclassify.pixel._distill import fit_teacher
from msclassify.pixel._teacher_context import context_features, interpolated

CANDIDATES = {"boost": ("boost", False), "forest": ("forest", False), "mean": ("mean", False),
              "boost+ctx": ("boost", True)}
N_FOLDS = 3


def scribble_rows(images, labels):
    """Level-0 and context columns of the scribbled pixels, class index, component id."""
    n_channels = 1 if np.ndim(images[0]) == 2 else np.shape(images[0])[-1]
    bank = FeatureBank("default", n_channels=n_channels)
    level0, context = np.flatnonzero(bank.shares() == 1), context_features(bank)
    classes = np.unique(np.concatenate([np.unique(lab[lab > 0]) for lab in labels]))
    X, y, component, n_components = [], [], [], 0
    for image, lab in zip(images, labels):
        lab = np.asarray(lab)
        if not lab.any():
            continue
        levels = bank.compute_levels(np.asarray(image, np.float32))
        ids = np.zeros(lab.shape, np.int64)
        for c in classes:
            found, n = ndi.label(lab == c, np.ones((3, 3)))
            ids[found > 0] = found[found > 0] + n_components
            n_components += n
        ys, xs = np.nonzero(lab)
        X.append(np.hstack([levels.gather(ys, xs)[:, level0],
                            interpolated(levels, context, ys, xs)]))
        y.append(np.searchsorted(classes, lab[ys, xs]))
        component.append(ids[ys, xs])
    return (np.concatenate(X), np.concatenate(y).astype(np.float64), np.concatenate(component),
            level0.size, classes.size)


def held_out(X, y, component, n_level0, n_classes):
    """Candidate -> class-balanced held-out log loss and error, and CPU seconds."""
    defaults = PixelClassifier()
    params = {name: getattr(defaults, name) for name in _CEGB_PARAMS}
    params.update(random_state=0, colsample=1.0, feature_batch_costs=None, feature_costs=None)
    ids = np.unique(component)
    fold_of = dict(zip(ids[np.random.default_rng(0).permutation(ids.size)],
                       np.arange(ids.size) % N_FOLDS))
    folds = np.array([fold_of[c] for c in component])
    multi = n_classes > 2
    out = {}
    for name, (kind, context) in CANDIDATES.items():
        columns = X.shape[1] if context else n_level0
        loss, wrong, truth = [], [], []
        start = time.process_time()
        for fold in range(N_FOLDS):
            train, test = folds != fold, folds == fold
            teacher = fit_teacher(X[train][:, :columns], y[train], np.ones(train.sum()),
                                  dict(params, feature_share=np.ones(columns)),
                                  np.arange(columns), "multiclass" if multi else "binary",
                                  n_classes if multi else None, kind=kind)
            raw = teacher.predict_raw(np.ascontiguousarray(X[test][:, :columns]))
            if multi:
                prob = class_probabilities(raw)
            else:
                p1 = 1 / (1 + np.exp(-raw.reshape(-1)))
                prob = np.column_stack([1 - p1, p1])
            target = y[test].astype(int)
            loss.append(-np.log(np.clip(prob[np.arange(target.size), target], 1e-6, 1)))
            wrong.append(prob.argmax(axis=1) != target)
            truth.append(target)
        loss, wrong, truth = (np.concatenate(a) for a in (loss, wrong, truth))
        out[f"{name} loss"] = float(np.mean([loss[truth == c].mean() for c in range(n_classes)]))
        out[f"{name} error"] = float(np.mean([wrong[truth == c].mean()
                                              for c in range(n_classes)]))
        out[f"{name} cpu s"] = time.process_time() - start
    return out


def main():
    parser = draw_parser(__doc__.splitlines()[0])
    parser.add_argument("--fly-crop", action="store_true",
                        help="the real fly crop of tests/test_real_fly_outlines.py (one draw)")
    parser.add_argument("--out", default=None, help="results name (default teacher_choice_<set>)")
    args = parser.parse_args()
    rows = []
    draws = [0] if args.fly_crop else range(args.first_draw, args.first_draw + args.draws)
    for draw in draws:
        if args.fly_crop:
            sys.path.insert(0, str(REPO / "tests"))
            from tests.test_real_fly_outlines import fly_frames
            image, scribbles, _, _ = fly_frames.__wrapped__()
            images, labels = [image], [scribbles]
        else:
            data = SETS[args.set]["load"](args.style, None, draw=draw)
            images, labels = data["train_images"], data["train_labels"]
        X, y, component, n_level0, n_classes = scribble_rows(images, labels)
        row = {"draw": draw, "labelled px": int(y.size),
               "components": int(np.unique(component).size),
               **held_out(X, y, component, n_level0, n_classes)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    name = "fly crop" if args.fly_crop else f"{args.set}/{args.style}"
    print(f"\n{name}, held-out class-balanced log loss / error per candidate")
    print_table([{"draw": r["draw"], "labelled px": r["labelled px"],
                  **{c: f"{r[c + ' loss']:.3f} / {r[c + ' error']:.3f}" for c in CANDIDATES}}
                 for r in rows], ["draw", "labelled px", *CANDIDATES])
    out = args.out or ("teacher_choice_fly_crop" if args.fly_crop
                       else f"teacher_choice_{args.set}_{args.style}")
    print(f"wrote {write_results(out, {'set': name, 'rows': rows})}")


if __name__ == "__main__":
    main()
