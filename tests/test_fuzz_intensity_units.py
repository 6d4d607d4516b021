"""Intensity units fuzzed (hypothesis): frame dtype x value range x the units a model was trained in.

A pixel model records the dtype and value range of its training frames (issue 22). For
every pair of dtypes, a frame is either read in the model's units or refused with one
line naming the frame's dtype and values; never labelled in the wrong units:

* **Same values, any dtype**: the training values stored in any dtype that holds them
  exactly (uint8 values as int16, uint32, float32, ...) give exactly the prediction of
  the training dtype.
* **Another bit depth**: the training values multiplied or divided by 16 or more (16-bit
  frames for a 12-bit model, 12- or 8-bit frames for a 16-bit one) are refused; only an
  8-bit model's frames may be that much darker (they are dark, in the same units).
* **0-1 floats vs raw units**: floats or bools within 0-1 for a model trained on raw values,
  and raw values for a model trained on 0-1 floats, are refused.
* Nothing but ValueError, and its message is one line.

Examples are few and derandomized; the models are tiny and trained once per module.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msclassify.pixel import IntensityRange, PixelClassifier

FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
SIZE = 32

# Model units: (name, training dtype, factor applied to 8-bit-like values 10..230).
UNITS = [("uint8", np.uint8, 1), ("uint16 of 8-bit values", np.uint16, 1),
         ("12-bit in uint16", np.uint16, 16), ("16-bit", np.uint16, 257),
         ("int16", np.int16, 1), ("int32 16-bit", np.int32, 257),
         ("float32 raw 0-255", np.float32, 1), ("float64 0-1", np.float64, 1 / 255),
         ("float32 16-bit raw", np.float32, 257)]
DTYPES = [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.int64, np.float16,
          np.float32, np.float64, np.bool_]


def base_frame(seed=0):
    """8-bit-like values 10..230: a dark noisy background and a bright square."""
    rng = np.random.default_rng(seed)
    frame = rng.integers(10, 60, (SIZE, SIZE)).astype(np.float64)
    frame[8:20, 8:20] += 170
    return frame


def in_units(values, dtype):
    return np.asarray(values, dtype=np.float64).astype(dtype)


def holds_exactly(values, dtype):
    """Whether ``dtype`` stores every one of ``values`` exactly."""
    if np.dtype(dtype) == np.bool_:
        return False
    with np.errstate(over="ignore", invalid="ignore"):
        return np.array_equal(in_units(values, dtype).astype(np.float64), values)


@pytest.fixture(scope="module")
def models():
    labels = np.zeros((SIZE, SIZE), np.uint8)
    labels[:3] = 1
    labels[10:18, 10:18] = 2
    trained = {}
    for name, dtype, factor in UNITS:
        frame = in_units(base_frame() * factor, dtype)
        trained[name] = (PixelClassifier(features="fast", n_estimators=4, random_state=0)
                         .fit(frame, labels), dtype, factor)
    return trained


def one_line_value_error(call):
    with pytest.raises(ValueError) as error:
        call()
    message = str(error.value)
    assert "\n" not in message and "the frame holds" in message
    return message


@FUZZ
@given(unit=st.sampled_from([name for name, _, _ in UNITS]),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 5))
def test_the_training_values_in_any_exact_dtype_predict_the_same(models, unit, dtype, seed):
    model, train_dtype, factor = models[unit]
    values = in_units(base_frame(seed) * factor, train_dtype).astype(np.float64)
    if not holds_exactly(values, dtype):
        return
    expected = model.predict(in_units(values, train_dtype))
    np.testing.assert_array_equal(model.predict(in_units(values, dtype)), expected)


@FUZZ
@given(unit=st.sampled_from([name for name, _, _ in UNITS]),
       dtype=st.sampled_from(DTYPES), power=st.integers(4, 9), up=st.booleans(),
       seed=st.integers(0, 5))
def test_another_bit_depth_is_refused(models, unit, dtype, power, up, seed):
    model, train_dtype, factor = models[unit]
    values = in_units(base_frame(seed) * factor, train_dtype).astype(np.float64)
    units = model.intensity_
    if units.high < 2:          # 0-1 floats: fractions of full scale, no bit depth
        return
    frame_values = values * 2.0 ** power if up else np.floor(values / 2.0 ** power)
    if not holds_exactly(frame_values, dtype) or frame_values.max() == frame_values.min():
        return
    if not up and values.max() <= 255:
        return   # an 8-bit model's frame, 16x darker: dark, but in the same units
    message = one_line_value_error(lambda: model.predict(in_units(frame_values, dtype)))
    assert np.dtype(dtype).name in message


@FUZZ
@given(unit=st.sampled_from([name for name, _, _ in UNITS]),
       dtype=st.sampled_from([np.float16, np.float32, np.float64, np.bool_]),
       seed=st.integers(0, 5))
def test_fractions_of_full_scale_for_a_raw_model_are_refused(models, unit, dtype, seed):
    model, train_dtype, factor = models[unit]
    if model.intensity_.high < 2:
        return
    values = base_frame(seed) / 255
    frame = values > 0.5 if dtype == np.bool_ else in_units(values, dtype)
    one_line_value_error(lambda: model.predict(frame))


@FUZZ
@given(dtype=st.sampled_from([np.float16, np.float32, np.float64]), scale=st.sampled_from(
    [255, 4095, 65535]), seed=st.integers(0, 5))
def test_raw_values_for_a_model_of_fractions_are_refused(models, dtype, scale, seed):
    model, _, _ = models["float64 0-1"]
    values = base_frame(seed) / 255 * scale
    if not np.isfinite(in_units(values, dtype)).all():
        return
    one_line_value_error(lambda: model.predict(in_units(values, dtype)))


@FUZZ
@given(train_dtype=st.sampled_from(DTYPES[:-1]), frame_dtype=st.sampled_from(DTYPES),
       low=st.floats(-1e5, 1e5), span=st.floats(0, 1e5), frame_low=st.floats(-1e6, 1e6),
       frame_span=st.floats(0, 1e6))
def test_any_dtype_and_range_pair_gives_a_scale_or_a_one_line_value_error(
        train_dtype, frame_dtype, low, span, frame_low, frame_span):
    kind = np.dtype(train_dtype)
    if kind.kind in "iu":
        info = np.iinfo(kind)
        low = float(np.clip(np.round(low), info.min, info.max))
        high = float(np.clip(np.round(low + span), low, info.max))
    else:
        high = low + span
    units = IntensityRange(kind, low, high)
    frame = np.array([frame_low, frame_low + frame_span])
    with np.errstate(over="ignore", invalid="ignore"):
        frame = frame.astype(frame_dtype)
    if frame.dtype.kind == "f" and not np.isfinite(frame).all():
        return
    try:
        scale = units.scale_for(frame)
    except ValueError as error:
        assert "\n" not in str(error) and np.dtype(frame_dtype).name in str(error)
        return
    assert np.isfinite(scale) and scale > 0
