"""Write the synthetic tabular samples that ship in the package (deterministic; numpy only).

    python -m msclassify.datasets._generate_tables            # rewrite data/tabular/ here
    python -m msclassify.datasets._generate_tables --out DIR  # write them elsewhere

Every set has cheap features that are weakly informative and expensive ones
that are strongly informative, so a cost-aware learner has a real trade-off to
make. See ``data/tabular/README.md`` beside this module for the files and formats.
"""

import argparse
from pathlib import Path

import numpy as np

OUT_DIR = Path(__file__).resolve().parent / "data" / "tabular"
SEED = 20150706  # fixed: the committed files must be reproducible byte for byte

# Histogram of Yahoo! LTR feature costs in Feng Nan's yahoo_cs_cost (519 lines; see
# shared/data/PROVENANCE.md): cost -> number of features with that cost.
YAHOO_COST_HISTOGRAM = {1: 123, 5: 31, 20: 191, 50: 125, 100: 16, 150: 32, 200: 1}


def _strength(costs, weakest, strongest):
    """Informativeness growing with log cost: cost 1 -> weakest, cost 200 -> strongest."""
    share = np.log(costs) / np.log(200.0)
    return weakest + (strongest - weakest) * share


def _costs_like_yahoo(rng, n_features):
    """Costs in proportion to the real histogram (largest remainder), in random feature order."""
    values = np.array(sorted(YAHOO_COST_HISTOGRAM), dtype=np.float64)
    quota = np.array([YAHOO_COST_HISTOGRAM[v] for v in sorted(YAHOO_COST_HISTOGRAM)], float)
    quota *= n_features / quota.sum()
    counts = np.floor(quota).astype(int)
    counts[np.argsort(counts - quota)[:n_features - counts.sum()]] += 1
    return rng.permutation(np.repeat(values, counts))


def _write_yahoo_style(out, rng, n_features=30):
    costs = _costs_like_yahoo(rng, n_features)
    strength = _strength(costs, 0.25, 2.0)
    for split, n_queries in (("train", 60), ("test", 30)):
        lines, sizes = [], []
        for _ in range(n_queries):
            n_docs = int(rng.integers(4, 20))
            quality = rng.normal(0.0, 0.5) + rng.normal(size=n_docs)
            grade = np.digitize(quality, [-0.8, 0.5, 1.4, 2.1])  # ~ Yahoo's 0-4 mix
            signal = strength[None, :] * quality[:, None] + rng.normal(size=(n_docs, n_features))
            feature_values = np.round(1.0 / (1.0 + np.exp(-signal)), 2)
            present = rng.random((n_docs, n_features)) < 0.85
            for doc in range(n_docs):
                fields = [f"{j + 1}:{feature_values[doc, j]:.2f}" for j in range(n_features)
                          if present[doc, j]]
                lines.append(" ".join([str(grade[doc])] + fields))
            sizes.append(n_docs)
        (out / f"yahoo_style.{split}").write_text("\n".join(lines) + "\n")
        (out / f"yahoo_style.{split}.query").write_text("\n".join(map(str, sizes)) + "\n")
    (out / "yahoo_style.cost").write_text("".join(f"{c:.6f}\n" for c in costs))


def _fortran_e(value):
    """UCI MiniBooNE's number format: mantissa in [0.1, 1), e.g. 0.283624E+01."""
    if value == 0:
        return "0.000000E+00"
    exponent = int(np.floor(np.log10(abs(value)))) + 1
    mantissa = value / 10.0**exponent
    if abs(round(mantissa, 6)) >= 1.0:  # rounding carried into the next decade
        mantissa, exponent = mantissa / 10.0, exponent + 1
    return f"{mantissa:.6f}E{exponent:+03d}"


def _write_miniboone_style(out, rng, n_signal=260, n_background=540):
    costs = np.array([1, 1, 1, 1, 5, 5, 5, 5, 20, 20, 50, 50], dtype=np.float64)
    shift = _strength(costs, 0.15, 1.6)
    scale = 10.0 ** rng.uniform(-1, 3, size=costs.size)  # MiniBooNE's features span many scales
    offset = rng.normal(0, 2, size=costs.size) * scale
    labels = np.r_[np.ones(n_signal), np.zeros(n_background)]
    rows = (rng.normal(size=(labels.size, costs.size)) + labels[:, None] * shift) * scale + offset
    rows[rng.random(labels.size) < 0.01] = -999.0  # UCI marks unreconstructed events like this
    text = [f"{n_signal:>8d}{n_background:>8d}"]
    text += [" " + " ".join(f"{_fortran_e(v):>13s}" for v in row) for row in rows]
    (out / "miniboone_style.txt").write_text("\n".join(text) + "\n")
    (out / "miniboone_style.cost").write_text("".join(f"{c:g}\n" for c in costs))


def _write_csv_style(out, rng, n_rows=600):
    names = ["cheap_a", "cheap_b", "cheap_c", "mid_a", "mid_b", "expensive_a", "expensive_b"]
    costs = np.array([1, 1, 1, 10, 10, 100, 100], dtype=np.float64)
    weight = _strength(costs, 0.2, 1.5)
    latent = rng.normal(size=n_rows)
    label = (latent + 0.3 * rng.normal(size=n_rows) > 0).astype(int)
    X = weight * latent[:, None] + rng.normal(size=(n_rows, costs.size))
    missing = rng.random(X.shape) < 0.02
    lines = [",".join(names + ["label"])]
    for row, row_missing, y in zip(X, missing, label):
        cells = ["" if gone else f"{v:.4f}" for v, gone in zip(row, row_missing)]
        lines.append(",".join(cells + [str(y)]))
    (out / "csv_style.csv").write_text("\n".join(lines) + "\n")
    (out / "csv_style.cost").write_text("".join(f"{c:g}\n" for c in costs))


def generate(out):
    """Write all sample files into folder ``out`` (created if needed)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    _write_yahoo_style(out, rng)
    _write_miniboone_style(out, rng)
    _write_csv_style(out, rng)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=OUT_DIR, type=Path,
                        help=f"output folder (default: {OUT_DIR})")
    generate(parser.parse_args().out)
