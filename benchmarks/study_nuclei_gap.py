"""Why the scikit-image recipe beats the 3D default on the stardist nuclei at some scribble
placements.

For every model seed and placement of the three scribbled slices (as ``bench_volumes.py
--spread --grid``: slices 7/15/23 shifted by each of ``--slice-shifts``), this fits the default
``PixelClassifier`` (3D) and the recipe (``multiscale_basic_features`` in 3D + RandomForest) on
the same scribbles and splits their difference into its parts:

* pixel errors: false-positive / false-negative nucleus voxels, where they are (``gap``: a
  background voxel within 2 voxels of two different nuclei, i.e. between touching nuclei;
  ``border``: within 1 voxel of a nucleus; ``far``: elsewhere), and how far their slice is from
  the nearest scribbled slice; the predicted nucleus volume;
* the instance step, which is the same for both: the 6-connected components of the most
  probable class (``label_instances(volume=True)``) and 3D SEG. How many objects, how many of the
  51 nuclei are matched (IoU > 0.5);
* ``SEG at the recipe's volume``: ours thresholded (on its nucleus probability) so that it marks
  exactly as many nucleus voxels as the recipe does, and the recipe at ours' volume: what is left
  of the gap when both draw nuclei of the same total size;
* ``SEG watershed``: both methods' nucleus masks split by a distance-transform watershed
  (markers: h-maxima of height 1 of the distance to the background), the same for both: whether
  a different instance step would change the ranking.

Nothing here changes a model. Writes ``benchmarks/results/study_nuclei_gap.json``.

    python benchmarks/study_nuclei_gap.py --seeds 0 1 2 3 4 --slice-shifts 0 1
"""

import argparse

import numpy as np
from scipy import ndimage as ndi

from _common import print_table, write_results
from _real_data import nuclei_scribbles
from bench_volumes import NUCLEUS, Ours3D, SkimageRF, load_stardist

from msclassify.metrics import label_instances, seg_score


def regions(mask):
    """Boolean masks of the truth's regions: ``gap`` (background within 2 voxels of two
    different nuclei), ``border`` (other background within 1 voxel of a nucleus), ``far``."""
    fg = mask > 0
    other = np.where(fg, mask, mask.max() + 1)
    gap = ~fg & (ndi.maximum_filter(mask, size=5) != ndi.minimum_filter(other, size=5)) \
        & (ndi.minimum_filter(other, size=5) <= mask.max())
    border = ~fg & ~gap & (ndi.distance_transform_edt(~fg) <= 1)
    return {"gap": gap, "border": border, "far": ~fg & ~gap & ~border}


def instances_seg(mask, nucleus):
    objects = label_instances(nucleus.astype(np.uint8) + 1, foreground=2, volume=True)
    return float(seg_score(mask, objects, volume=True)), objects


def matched_nuclei(mask, objects):
    """How many nuclei one object overlaps with IoU > 0.5 (SEG's match)."""
    found = 0
    for label in np.unique(mask[mask > 0]):
        nucleus = mask == label
        hits = objects[nucleus]
        hits = hits[hits > 0]
        if hits.size:
            best = objects == np.bincount(hits).argmax()
            found += (nucleus & best).sum() / (nucleus | best).sum() > 0.5
    return int(found)


def watershed_seg(mask, nucleus):
    from skimage.morphology import h_maxima
    from skimage.segmentation import watershed
    distance = ndi.distance_transform_edt(nucleus)
    markers, _ = ndi.label(h_maxima(distance, 1) & nucleus)
    return float(seg_score(mask, watershed(-distance, markers, mask=nucleus), volume=True))


def at_volume(probability, n_voxels):
    """The ``n_voxels`` most probable nucleus voxels."""
    threshold = np.sort(probability.ravel())[::-1][n_voxels - 1]
    return probability >= threshold


def describe(mask, nucleus, zone, z_distance):
    fg = mask > 0
    fp, fn = nucleus & ~fg, ~nucleus & fg
    seg, objects = instances_seg(mask, nucleus)
    row = {"SEG": seg, "objects": int(objects.max()), "matched": matched_nuclei(mask, objects),
           "nucleus voxels": int(nucleus.sum()), "FP": int(fp.sum()), "FN": int(fn.sum()),
           "SEG watershed": watershed_seg(mask, nucleus)}
    for name, where in zone.items():
        row[f"FP {name}"] = int((fp & where).sum())
    row["gap FP by slice distance 0-4"] = [int((fp & zone["gap"])[z_distance == d].sum())
                                           for d in range(5)]
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--slice-shifts", type=int, nargs="+", default=[0, 1])
    args = parser.parse_args()
    data = load_stardist()
    image, mask = data["train"], data["truth"]
    zone = regions(mask)
    rows = []
    for shift in args.slice_shifts:
        slices = [z + shift for z in data["slices"]]
        labels = nuclei_scribbles(mask, slices)
        z_distance = np.min([np.abs(np.arange(mask.shape[0]) - s) for s in slices], axis=0)
        z_distance = np.broadcast_to(z_distance[:, None, None], mask.shape)
        for seed in args.seeds:
            ours, recipe = Ours3D(data["spacing"], seed), SkimageRF(per_slice=False, seed=seed)
            probability = {}
            for method in (ours, recipe):
                method.fit(image, labels)
                probability[method.name] = method.predict_proba(image)[..., NUCLEUS - 1]
            p_ours, p_recipe = probability[ours.name], probability[recipe.name]
            n_ours, n_recipe = int((p_ours > 0.5).sum()), int((p_recipe > 0.5).sum())
            for name, p, same_volume in ((ours.name, p_ours, at_volume(p_ours, n_recipe)),
                                         (recipe.name, p_recipe, at_volume(p_recipe, n_ours))):
                rows.append({"slices": " ".join(map(str, slices)), "seed": seed, "method": name,
                             **describe(mask, p > 0.5, zone, z_distance),
                             "SEG at the other's volume": instances_seg(mask, same_volume)[0]})
                print(f"[gap] {rows[-1]}", flush=True)
    summary = []
    for shift in args.slice_shifts:
        slices = " ".join(str(z + shift) for z in data["slices"])
        for name in ("ours 3D", "skimage 3D + RF"):
            own = [r for r in rows if r["slices"] == slices and r["method"] == name]
            summary.append({"slices": slices, "method": name, "n": len(own), **{
                key: float(np.mean([r[key] for r in own])) for key in (
                    "SEG", "SEG at the other's volume", "SEG watershed", "objects", "matched",
                    "nucleus voxels", "FP", "FN", "FP gap", "FP border", "FP far")}})
    print_table(summary, ["slices", "method", "n", "SEG", "SEG at the other's volume",
                          "SEG watershed", "objects", "matched", "nucleus voxels", "FP", "FN",
                          "FP gap", "FP border", "FP far"])
    print(write_results("study_nuclei_gap", {"rows": rows, "summary": summary}))


if __name__ == "__main__":
    main()
