"""Object classes at a cost: fly vs debris on fly_masks_dev, accuracy against feature cost.

Run: ``python benchmarks/bench_object_classes.py [--model PATH]``. Writes
benchmarks/results/object_classes.json and docs/object_classes_cost.png.

The default pixel model trained on fly_masks_dev's scribbles (``--model``
reuses a saved one) segments the 10 test frames of fly_masks_dev; their
objects of at least 20 px (split where they touch, `ObjectSplitter("intensity")`)
are labelled from the frames' masks: an object touching a fly of the masks is
a fly, any other is debris. `ObjectClassifier` learns from the objects of 5
frames and is scored on those of the other 5 (balanced accuracy), for a range of
``cost_tradeoff``; the cost of each feature group is measured in the fit
(seconds per object, best of 3 passes) and the cost of a model is the sum over
the groups its trees use. The two halves swap and the two scores are averaged.
"""

import argparse

import numpy as np

from _common import REPO, cpu_model, print_table, write_results

PLOT = REPO / "docs" / "object_classes_cost.png"
TRADEOFFS = (0.0, 0.001, 0.01, 0.05, 0.2, 1.0)


def labelled_objects(model):
    from _real_data import load_fly_masks_dev
    from msclassify.objects import ObjectSplitter, find_objects
    data = load_fly_masks_dev()
    splitter = ObjectSplitter("intensity", min_size=500)
    samples, labels = [], []
    for image, mask in zip(data["test_images"], data["test_masks"]):
        objects = find_objects(model.predict(image), 2, min_size=20, split=splitter, image=image)
        fly = set(np.unique(objects[mask > 0]).tolist()) - {0}
        labels.append({int(k): "fly" if k in fly else "debris" for k in np.unique(objects) if k})
        samples.append((objects, image))
    return samples, labels


def balanced_accuracy(clf, samples, labels):
    truth, found = [], []
    for (objects, image), y in zip(samples, labels):
        predicted = clf.predict(objects, image)
        numbers = np.unique(objects[objects > 0])
        truth += [y[int(k)] for k in numbers]
        found += predicted.tolist()
    truth, found = np.array(truth), np.array(found)
    return float(np.mean([np.mean(found[truth == c] == c) for c in np.unique(truth)]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a saved pixel model instead of training one")
    args = parser.parse_args()
    from bench_tracks import load_or_train_model
    from msclassify.objects import ObjectClassifier
    model = load_or_train_model(args.model)
    samples, labels = labelled_objects(model)
    counts = {c: sum(list(y.values()).count(c) for y in labels) for c in ("fly", "debris")}
    halves = [(slice(0, 5), slice(5, 10)), (slice(5, 10), slice(0, 5))]
    rows = []
    for tradeoff in TRADEOFFS:
        scores, costs, groups = [], [], []
        for train, test in halves:
            clf = ObjectClassifier(cost_tradeoff=tradeoff, random_state=0).fit(samples[train],
                                                                              labels[train])
            scores.append(balanced_accuracy(clf, samples[test], labels[test]))
            costs.append(clf.cost_per_object() * 1e6)
            groups.append("+".join(clf.groups_used_) or "none")
        rows.append({"cost_tradeoff": tradeoff, "balanced accuracy": float(np.mean(scores)),
                     "cost us/object": float(np.mean(costs)), "groups used": " / ".join(groups),
                     "group costs us/object": {g: c * 1e6 for g, c in clf.group_costs_.items()}})
    print(f"{counts['fly']} fly and {counts['debris']} debris objects in 10 frames; CPU "
          f"{cpu_model()}")
    print_table(rows, ["cost_tradeoff", "balanced accuracy", "cost us/object", "groups used"])
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.5), dpi=110)
    ax.plot([r["cost us/object"] for r in rows], [r["balanced accuracy"] for r in rows], "o-")
    for r in rows:
        ax.annotate(f"mu={r['cost_tradeoff']:g}", (r["cost us/object"], r["balanced accuracy"]),
                    fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("measured feature cost (us per object)")
    ax.set_ylabel("balanced accuracy, fly vs debris")
    ax.set_title("object classes: accuracy against cost", fontsize=9)
    fig.tight_layout()
    fig.savefig(PLOT)
    path = write_results("object_classes", {"objects": counts, "rows": rows})
    print(f"wrote {path} and {PLOT}")


if __name__ == "__main__":
    main()
