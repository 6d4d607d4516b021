"""msclassify.checks, property-based: what each check accepts and what it turns away."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from msclassify.checks import as_seed, check_int, check_number, check_per_feature, is_int

INTEGER_TYPES = st.sampled_from([int, np.int8, np.int16, np.int32, np.int64, np.uint8])


@given(st.integers(-100, 100), st.integers(-5, 5), INTEGER_TYPES)
def test_check_int_accepts_exactly_the_integers_at_least_the_minimum(value, minimum, kind):
    if kind is np.uint8 and value < 0:
        value = -value
    value = kind(value)
    if value >= minimum:
        result = check_int(value, "n", minimum=minimum)
        assert type(result) is int and result == value
    else:
        with pytest.raises(ValueError, match=f"^n must be an integer >= {minimum}, got"):
            check_int(value, "n", minimum=minimum)


@given(st.one_of(st.booleans(), st.floats(allow_nan=True), st.text(max_size=3), st.none(),
                 st.sampled_from([np.bool_(True), np.float64(2.0), 2.0])))
def test_check_int_turns_away_bools_floats_and_other_types(value):
    assert not is_int(value)
    with pytest.raises(ValueError, match="must be an integer >= 1"):
        check_int(value, "n")


@given(st.floats(allow_nan=True, allow_infinity=True), st.booleans())
def test_check_number_accepts_finite_non_negative_reals(value, strict):
    if math.isfinite(value) and (value > 0 or (value == 0 and not strict)):
        assert check_number(value, "x", strict=strict) == value
    else:
        relation = ">" if strict else ">="
        with pytest.raises(ValueError, match=f"x must be a finite number {relation} 0"):
            check_number(value, "x", strict=strict)


@given(st.lists(st.floats(0, 1e6), min_size=1, max_size=6), st.integers(1, 6))
def test_check_per_feature_wants_one_value_per_feature(values, n_features):
    if len(values) == n_features:
        result = check_per_feature("costs", values, n_features, default=1.0)
        assert result.dtype == np.float64 and result.tolist() == values
    else:
        with pytest.raises(ValueError, match=f"X has {n_features} feature"):
            check_per_feature("costs", values, n_features, default=1.0)


@given(st.integers(1, 6), st.data())
def test_check_per_feature_turns_away_negative_and_non_finite_values(n_features, data):
    bad = data.draw(st.sampled_from([-1e-9, -5.0, math.nan, math.inf]))
    values = [1.0] * n_features
    values[data.draw(st.integers(0, n_features - 1))] = bad
    with pytest.raises(ValueError, match="^costs must be finite and >= 0$"):
        check_per_feature("costs", values, n_features, default=1.0)
    assert check_per_feature("costs", None, n_features, default=2.5).tolist() == \
        [2.5] * n_features


@given(st.integers(0, 2**31 - 1))
def test_as_seed_passes_ints_on_and_draws_from_a_random_state(seed):
    assert as_seed(seed) == seed and as_seed(None) is None
    state, reference = np.random.RandomState(seed), np.random.RandomState(seed)
    assert [as_seed(state), as_seed(state)] == [reference.randint(2**31), reference.randint(2**31)]
    with pytest.raises(TypeError, match="random_state must be None"):
        as_seed(float(seed))
