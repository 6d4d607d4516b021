"""Picture of a real fly frame's outlines: ours (defaults) vs the real mask, zoomed on flies.

Run: ``python benchmarks/plot_fly_outline.py``. Trains ``PixelClassifier(random_state=0)``
with its defaults, and the same without distillation (``distill_weight=0``), on
the scribbles of fly_masks_dev's train frames (``_real_data``), segments test
frame 150 and draws, on crops around two of its flies, the outline of the
reference mask (green) and of each model's fly class (red), with the 8x8 block
grid faint in the background. Saves docs/fly_outline.png.
"""

import numpy as np
from scipy import ndimage as ndi

from _common import REPO
from _real_data import FLY, load_fly_masks_dev

from msclassify.pixel import PixelClassifier

TEST_INDEX = 0                       # test frame 150
CROPS = ((slice(500, 596), slice(836, 932)), (slice(624, 720), slice(248, 344)))


def outline(mask):
    return mask & ~ndi.binary_erosion(mask)


def main():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    data = load_fly_masks_dev()
    image = data["test_images"][TEST_INDEX]
    reference = data["test_masks"][TEST_INDEX] > 0
    models = {"ours, defaults (distilled)": PixelClassifier(random_state=0),
              "ours without distillation (distill_weight=0)":
                  PixelClassifier(random_state=0, distill_weight=0)}
    predictions = {}
    for name, model in models.items():
        model.fit(data["train_images"], data["train_labels"])
        predictions[name] = model.predict(image) == FLY
        print(f"{name}: features {model.features_used_}")
    fig, axes = plt.subplots(len(CROPS), len(models), figsize=(4.2 * len(models),
                                                                4.2 * len(CROPS)),
                             constrained_layout=True, squeeze=False)
    for row, crop in enumerate(CROPS):
        for col, (name, fly) in enumerate(predictions.items()):
            ax = axes[row][col]
            rgb = np.repeat((image[crop] / 255.0)[:, :, None], 3, axis=2) * 0.8
            for y0 in range(-crop[0].start % 8, rgb.shape[0], 8):
                rgb[y0, :, :] = rgb[y0, :, :] * 0.85 + 0.15
            for x0 in range(-crop[1].start % 8, rgb.shape[1], 8):
                rgb[:, x0, :] = rgb[:, x0, :] * 0.85 + 0.15
            rgb[outline(reference[crop])] = (0.1, 0.9, 0.1)
            rgb[outline(fly[crop])] = (1.0, 0.15, 0.1)
            both = outline(reference[crop]) & outline(fly[crop])
            rgb[both] = (1.0, 0.9, 0.1)
            wrong = (fly[crop] != reference[crop]).sum()
            ax.imshow(rgb, interpolation="nearest")
            ax.set_title(f"{name}\n{wrong} wrong px in this crop", fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
    fig.suptitle(f"fly_masks_dev test frame {data['test_ids'][TEST_INDEX]}: outline of the mask "
                 "(green), of the model (red), both (yellow); faint lines: 8x8 blocks",
                 fontsize=10)
    path = REPO / "docs" / "fly_outline.png"
    fig.savefig(path, dpi=90)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
