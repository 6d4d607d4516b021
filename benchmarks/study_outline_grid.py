"""How much the default model's fly outlines follow the 8x8 block grid, per class weighting and
teacher stride: the measure of ``tests/test_real_fly_outlines.py`` on its real fly crop.

For ``class_weight`` None / "balanced", the first grid of the distillation teacher's
coarse-to-fine class map (``teacher_stride`` 1, 2, 4) and ``random_state`` 0 and 1: the share of the predicted outline's class changes
that lie on the 8x8 grid (the real mask: 0.13; the test allows 0.35) and the share of wrong
pixels within 2 px of the real outline. Writes ``benchmarks/results/outline_grid.json``.

    python benchmarks/study_outline_grid.py
    python benchmarks/study_outline_grid.py --class-weights none sqrt balanced --strides 4 \
        --seeds 0 1 2 3 --out outline_grid_class_weight
    python benchmarks/study_outline_grid.py --class-weights auto --strides 4 \
        --variant 'default={}' --variant 'context={"teacher_context": true}' --out outline_context

``--variant NAME=JSON`` (repeatable) adds `PixelClassifier` parameters to every row.
"""

import argparse
import itertools
import sys
import time

from _common import REPO, print_table, write_results
from study_clicks import parse_variant

sys.path.insert(0, str(REPO / "tests"))  # conftest, which the test module imports

from tests.test_real_fly_outlines import (FLY, fly_frames, grid_transition_share,  # noqa: E402
                                          outline_error)

from msclassify.pixel import PixelClassifier  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--class-weights", nargs="+", default=["none", "balanced"],
                        choices=["none", "auto", "sqrt", "balanced"])
    parser.add_argument("--strides", nargs="+", type=int, default=[1, 2, 4])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--variant", type=parse_variant, action="append", default=[],
                        metavar="NAME=JSON")
    parser.add_argument("--out", default="outline_grid")
    args = parser.parse_args()
    image, scribbles, test, mask = fly_frames.__wrapped__()
    rows = []
    variants = args.variant or [("", {})]
    for (name, params), class_weight, stride, seed in itertools.product(
            variants, [None if w == "none" else w for w in args.class_weights], args.strides,
            args.seeds):
        start = time.perf_counter()
        model = PixelClassifier(**dict(dict(random_state=seed, class_weight=class_weight,
                                            teacher_stride=stride), **params))
        fly = model.fit(image, scribbles).predict(test) == FLY
        rows.append({**({"variant": name} if name else {}),
                     "class_weight": str(class_weight), "teacher_stride": stride,
                     "random_state": seed,
                     "grid share": round(grid_transition_share(fly), 3),
                     "outline error": round(outline_error(fly, mask), 3),
                     "seconds": round(time.perf_counter() - start, 1)})
        print(rows[-1], flush=True)
    print_table(rows, list(rows[0]))
    write_results(args.out, rows)


if __name__ == "__main__":
    main()
