"""Model files fuzzed (hypothesis): damaged files are refused in one line, never misread.

Three properties, each over 30 generated files (deterministic: derandomized):

* **Bytes** (truncation, flipped and deleted bytes anywhere in the zip): loading
  raises `ModelFileError` with a one-line message, or the model predicts exactly
  what the original does (the zip's checksums leave no other way: a change
  outside the entries' content, e.g. in a timestamp, changes nothing).
* **Content** (a valid zip whose model.json values or arrays were changed: values,
  dtypes, shapes, headers, entries): loading raises `ModelFileError`, or the model
  predicts what the *changed content* says, computed by an independent reference
  that walks the trees from the raw JSON and arrays. A changed but finite leaf value
  legitimately changes predictions, so the reference, not the original, is the
  yardstick; the reference refuses NaN, out-of-range feature ids and looping links,
  so a loader that let those through fails the property.
* **Must-detect** changes (NaN/inf leaf values and thresholds, feature ids out of
  range, backward links, an unknown objective, classes that do not fit their dtype,
  a pixel model's channel count) are always refused.

No example may allocate more than `PEAK_BYTES` while loading (traced with
tracemalloc, which sees numpy's allocations): sizes are checked before allocating.
"""

import io
import json
import tracemalloc
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from msclassify import CEGBClassifier, load_model
from msclassify.modelfile import ModelFileError
from msclassify.pixel import PixelClassifier

PEAK_BYTES = 64 * 2**20
FUZZ = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@pytest.fixture(scope="module")
def cegb(tmp_path_factory):
    """A small binary CEGB classifier file, test rows (with NaNs) and its predictions."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = np.where(X[:, 0] + 0.5 * X[:, 2] > 0, "fly", "floor")
    model = CEGBClassifier(n_estimators=6, max_leaves=5, min_samples_leaf=5).fit(X, y)
    path = tmp_path_factory.mktemp("fuzz") / "cegb.msc"
    model.save(path)
    X_test = rng.normal(size=(60, 4))
    X_test[::7, 1] = np.nan
    return path.read_bytes(), X_test, model.predict(X_test)


@pytest.fixture(scope="module")
def pixel(tmp_path_factory):
    rng = np.random.default_rng(1)
    image = rng.integers(10, 40, (32, 32)).astype(np.uint8)
    image[8:24, 8:24] += 150
    labels = np.zeros((32, 32), np.uint8)
    labels[:2] = 1
    labels[12:20, 12:20] = 2
    model = PixelClassifier(features="fast", n_estimators=4, random_state=0).fit(image, labels)
    path = tmp_path_factory.mktemp("fuzz") / "pixel.msc"
    model.save(path)
    return path.read_bytes(), image, model.predict(image)


def load(data, tmp_path):
    """``load_model`` of ``data``: (model or None, the ModelFileError or None); any other
    exception, or a peak allocation above PEAK_BYTES, fails the test."""
    path = tmp_path / "fuzzed.msc"
    path.write_bytes(data)
    tracemalloc.start()
    try:
        model, error = load_model(path), None
    except ModelFileError as exc:
        model, error = None, exc
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < PEAK_BYTES, f"loading allocated {peak / 2**20:.0f} MiB"
    if error is not None:
        message = str(error)
        assert "\n" not in message and str(path) in message and len(message) < 600, message
    return model, error


# -- bytes ----------------------------------------------------------------------------------

byte_damage = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("flip"), st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255)),
                                        min_size=1, max_size=8)),
    st.tuples(st.just("delete"), st.tuples(st.floats(0, 1), st.integers(1, 64))),
)


def damage(data, how):
    kind, detail = how
    if kind == "truncate":
        return data[:int(detail * len(data))]
    if kind == "delete":
        at = int(detail[0] * len(data))
        return data[:at] + data[at + detail[1]:]
    data = bytearray(data)
    for position, mask in detail:
        data[min(int(position * len(data)), len(data) - 1)] ^= mask
    return bytes(data)


@pytest.mark.parametrize("kind", ["cegb", "pixel"])
@FUZZ
@given(how=byte_damage)
def test_damaged_bytes_are_refused_or_change_nothing(request, kind, tmp_path, how):
    data, inputs, expected = request.getfixturevalue(kind)
    model, error = load(damage(data, how), tmp_path)
    event("loaded" if error is None else "refused")
    if error is None:
        np.testing.assert_array_equal(model.predict(inputs), expected)


# -- content --------------------------------------------------------------------------------

def unpack(data):
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        entries = {name: zf.read(name) for name in zf.namelist()}
    header = json.loads(entries.pop("model.json"))
    return header, entries


def pack(header, entries):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("model.json", json.dumps(header))
        for name, content in entries.items():
            zf.writestr(name, content)
    return buffer.getvalue()


def npy(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def json_paths(value, prefix=()):
    """Every path into a JSON document (containers and leaves)."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from json_paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value[:4]):
            yield from json_paths(item, prefix + (index,))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=6)
    | st.sampled_from(["binary", "multiclass", "regression", "custom", "<i8", "|O", "<U5",
                       "|b1", "<f4", "fly", "floor", 0, 1, 2, -1, 10**12]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4),
                                                                       children, max_size=3),
    max_leaves=6)

ARRAY_DTYPES = ["<f8", ">f8", "<f4", "<f2", "<i8", "<i4", "|i1", "<u8", "|u1", "|b1", "<c16"]

array_change = st.one_of(
    st.tuples(st.just("set"), st.floats(0, 1),
              st.one_of(st.floats(), st.integers(-2**40, 2**40), st.sampled_from([-1, 0, 1]))),
    st.tuples(st.just("dtype"), st.sampled_from(ARRAY_DTYPES)),
    st.tuples(st.just("resize"), st.integers(-3, 3)),
    st.tuples(st.just("reshape"), st.none()),
    st.tuples(st.just("header"), st.lists(st.integers(0, 2**45), max_size=3)),
    st.tuples(st.just("drop"), st.none()),
)


def parse_npy(content):
    """The array of ``.npy`` bytes; ValueError (before allocating) if the header's shape and
    dtype do not match the bytes that follow it."""
    fh = io.BytesIO(content)
    major, _ = np.lib.format.read_magic(fh)
    read_header = (np.lib.format.read_array_header_1_0 if major == 1
                   else np.lib.format.read_array_header_2_0)
    shape, _, dtype = read_header(fh)
    if dtype.hasobject or int(np.prod(shape, dtype=object)) * dtype.itemsize != \
            len(content) - fh.tell():
        raise ValueError("the header does not match the data")
    return np.load(io.BytesIO(content))


def change_array(entries, name, change):
    kind, *detail = change
    try:
        array = parse_npy(entries[name])
    except (KeyError, ValueError, EOFError, OSError):  # dropped or damaged by an earlier change
        return
    if kind == "set" and array.size:
        position, value = detail
        index = min(int(position * array.size), array.size - 1)
        flat = array.reshape(-1).copy()
        try:
            flat[index] = value
        except (OverflowError, ValueError, TypeError):
            return
        entries[name] = npy(flat.reshape(array.shape))
    elif kind == "dtype":
        with np.errstate(all="ignore"):
            entries[name] = npy(array.astype(detail[0]))
    elif kind == "resize":
        size = max(0, array.shape[0] + detail[0]) if array.ndim else 0
        entries[name] = npy(np.resize(array, (size,) + array.shape[1:]))
    elif kind == "reshape":
        entries[name] = npy(array.reshape(1, -1))
    elif kind == "header":
        text = repr({"descr": array.dtype.str, "fortran_order": False,
                     "shape": tuple(detail[0])}).encode("latin1")
        text += b" " * (-(len(text) + 11) % 64) + b"\n"
        entries[name] = (b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text
                         + array.tobytes())
    elif kind == "drop":
        del entries[name]


class Invalid(Exception):
    """The reference cannot compute a prediction from this content."""


def reference_predict(header, entries, X):
    """Predictions of a binary or multi-class CEGB model file, from its raw content alone.

    Deliberately independent of msclassify: trees are walked in Python from the
    JSON and the .npy entries (``x <= threshold`` left, NaN by ``default_left``).
    Raises Invalid for anything that has no prediction (NaN, loops, bad ids, ...).
    """
    try:
        meta = header["meta"]
        arrays = {name[:-4]: parse_npy(content) for name, content in entries.items()
                  if name.endswith(".npy")}
        n_features, init = meta["n_features"], meta["init_score"]
        objective, n_trees = meta["objective"], meta["n_trees"]
        classes = np.asarray(meta["classes"], dtype=np.dtype(meta["classes_dtype"]))
        if header["kind"] != "cegb_classifier" or header["format_version"] != 1 or \
                objective not in ("binary", "multiclass") or \
                isinstance(n_features, bool) or not isinstance(n_features, int) or \
                not isinstance(init, list) or not init or \
                (objective == "binary") != (len(init) == 1) or \
                classes.size != max(2, len(init)) or n_trees != len(arrays["tree_sizes"]) or \
                classes.dtype.kind not in "biufU" or \
                list(classes) != sorted(set(classes.tolist())) or \
                [type(v) for v in classes.tolist()] != [type(v) for v in meta["classes"]] or \
                classes.tolist() != meta["classes"]:
            raise Invalid
        init = np.array(init, dtype=np.float64)
        get = {key: arrays[f"node_{key}"] for key in ("feature", "threshold", "default_left",
                                                      "left", "right", "value")}
        if any(a.ndim != 1 for a in get.values()) or arrays["tree_sizes"].ndim != 1 or \
                get["feature"].dtype.kind not in "iu" or get["left"].dtype.kind not in "iu" or \
                get["right"].dtype.kind not in "iu" or get["value"].dtype.kind not in "fiub" or \
                get["threshold"].dtype.kind not in "fiub" or \
                get["default_left"].dtype.kind not in "biu" or \
                arrays["tree_sizes"].dtype.kind not in "iu":
            raise Invalid
        raw = np.tile(init, (X.shape[0], 1))
        start = 0
        for t, size in enumerate(arrays["tree_sizes"].tolist()):
            if size < 1:
                raise Invalid
            for i, x in enumerate(X):
                node, steps = 0, 0
                while int(get["feature"][start + node]) >= 0:
                    f = int(get["feature"][start + node])
                    threshold = float(get["threshold"][start + node])
                    left, right = int(get["left"][start + node]), int(get["right"][start + node])
                    default = int(get["default_left"][start + node])
                    if f >= n_features or not np.isfinite(threshold) or default not in (0, 1) \
                            or not node < left < size or not node < right < size:
                        raise Invalid
                    v = x[f]
                    node = (left if default else right) if np.isnan(v) else \
                        left if v <= threshold else right
                    steps += 1
                value = float(get["value"][start + node])
                if not np.isfinite(value):
                    raise Invalid
                raw[i, t % init.size] += value
            start += size
        if start != get["feature"].size:
            raise Invalid
    except (KeyError, IndexError, TypeError, ValueError, OverflowError, AttributeError):
        raise Invalid from None
    winner = (raw[:, 0] > 0).astype(int) if init.size == 1 else np.argmax(raw, axis=1)
    return classes[winner]


def assert_refused_or_predicted_as_they_say(header, entries, X, tmp_path, what):
    """A changed model file is refused, or it predicts what its header and arrays say."""
    model, error = load(pack(header, entries), tmp_path)
    event("loaded" if error is None else "refused")
    if error is None:
        try:
            reference = reference_predict(header, entries, X)
        except Invalid:
            pytest.fail(f"{what} was loaded but has no prediction")
        np.testing.assert_array_equal(model.predict(X), reference)


@FUZZ
@given(data=st.data())
def test_changed_json_values_are_refused_or_predicted_as_they_say(cegb, tmp_path, data):
    original, X, _ = cegb
    header, entries = unpack(original)
    path = data.draw(st.sampled_from([p for p in json_paths(header) if p]))
    value = data.draw(json_values)
    target = header
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert_refused_or_predicted_as_they_say(header, entries, X, tmp_path, f"{path} = {value!r}")


@FUZZ
@given(data=st.data())
def test_changed_arrays_are_refused_or_predicted_as_they_say(cegb, tmp_path, data):
    original, X, _ = cegb
    header, entries = unpack(original)
    for _ in range(data.draw(st.integers(1, 3))):
        name = data.draw(st.sampled_from(sorted(n for n in entries if n.endswith(".npy"))))
        change_array(entries, name, data.draw(array_change))
    assert_refused_or_predicted_as_they_say(header, entries, X, tmp_path, "changed arrays")


@FUZZ
@given(data=st.data())
def test_changed_zip_structure_is_refused_or_changes_nothing(cegb, tmp_path, data):
    original, X, expected = cegb
    header, entries = unpack(original)
    action = data.draw(st.sampled_from(["drop", "duplicate", "extra", "rename", "empty"]))
    name = data.draw(st.sampled_from(sorted(entries)))
    if action == "drop":
        del entries[name]
    elif action == "extra":
        entries["unexpected.bin"] = data.draw(st.binary(max_size=64))
    elif action == "rename":
        entries[name.upper()] = entries.pop(name)
    elif action == "empty":
        entries[name] = b""
    blob = pack(header, entries)
    if action == "duplicate":  # the same entry name twice, the second one different
        buffer = io.BytesIO(blob)
        with zipfile.ZipFile(buffer, "a") as zf, pytest.warns(UserWarning, match="Duplicate"):
            zf.writestr(name, b"\x93NUMPY garbage")
        blob = buffer.getvalue()
    model, error = load(blob, tmp_path)
    event("loaded" if error is None else "refused")
    if error is None:
        np.testing.assert_array_equal(model.predict(X), expected)


# -- must be detected -------------------------------------------------------------------------

def set_node(name, value, split=True):
    def change(header, entries):
        array = np.load(io.BytesIO(entries[f"{name}.npy"])).copy()
        features = np.load(io.BytesIO(entries["node_feature.npy"]))
        nodes = np.flatnonzero((features >= 0) == split)
        array[nodes[len(nodes) // 2]] = value
        entries[f"{name}.npy"] = npy(array)
    return change


def set_json(key, value):
    def change(header, entries):
        header["meta"][key] = value
    return change


MUST_DETECT = {
    "nan leaf value": set_node("node_value", np.nan, split=False),
    "inf leaf value": set_node("node_value", -np.inf, split=False),
    "nan threshold": set_node("node_threshold", np.nan),
    "inf threshold": set_node("node_threshold", np.inf),
    "feature id = n_features": set_node("node_feature", 4),
    "feature id below -1": set_node("node_feature", -2),
    "left link to itself": set_node("node_left", 0),
    "right link past the tree": set_node("node_right", 10**6),
    "unknown objective": set_json("objective", "poisson"),
    "regression objective": set_json("objective", "regression"),
    "classes not fitting their dtype": set_json("classes_dtype", "|u1"),
    "object classes": set_json("classes_dtype", "|O"),
    "nan init score": set_json("init_score", [float("nan")]),
    "n_features 0": set_json("n_features", 0),
}


@pytest.mark.parametrize("change", MUST_DETECT, ids=list(MUST_DETECT))
def test_changes_that_alter_predictions_are_always_refused(cegb, tmp_path, change):
    original, _, _ = cegb
    header, entries = unpack(original)
    MUST_DETECT[change](header, entries)
    model, error = load(pack(header, entries), tmp_path)
    assert error is not None, f"{change}: loaded"


@FUZZ
@given(channels=st.one_of(st.integers(-5, 8), st.floats(), st.text(max_size=3), st.none()),
       classes=st.one_of(st.none(), st.lists(st.integers(-300, 300), min_size=0, max_size=4)),
       dtype=st.sampled_from([None, "|u1", "<u2", "<i8", "|i1", "|O", "<f8", "<U3", "bogus"]))
def test_pixel_model_channels_and_classes_are_refused_or_consistent(pixel, tmp_path, channels,
                                                                      classes, dtype):
    original, image, expected = pixel
    header, entries = unpack(original)
    meta = header["meta"]
    meta["n_channels"] = channels
    if classes is not None:
        meta["classes"] = classes
    if dtype is not None:
        meta["classes_dtype"] = dtype
    model, error = load(pack(header, entries), tmp_path)
    event("loaded" if error is None else "refused")
    if error is None:  # only a one-channel model of two classes >= 1 can be right
        assert channels == 1 and not isinstance(channels, bool)
        new = np.asarray(meta["classes"])
        assert new.size == 2 and new.min() >= 1 and np.all(np.diff(new) > 0)
        # labels are the same winners, named by the new classes
        np.testing.assert_array_equal(model.predict(image),
                                      new[np.searchsorted([1, 2], expected)])
