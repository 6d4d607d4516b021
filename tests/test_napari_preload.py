"""The plugin's background load of the classifier: the garbage collector is paused while it
loads, frozen objects after, back on afterwards (and after GC_PAUSE_LIMIT_S at the latest)."""

import gc
import importlib
import time

import pytest

from msclassify_napari import _preload


@pytest.fixture(autouse=True)
def _no_load_in_flight():
    """Wait for a background load an earlier test's dock started: it holds the lock while the
    collector is paused, and gives it back only with the collector on again."""
    with _preload._lock:
        pass


def test_loads_once_with_the_collector_paused_then_frozen_and_back_on(monkeypatch):
    seen = []
    monkeypatch.setattr(_preload, "_loaded", [])
    monkeypatch.setattr(_preload, "_fit_tiny", lambda: seen.append(gc.isenabled()))
    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    presets = _preload.preload_classifier()
    assert seen == [False]                       # paused while loading
    assert gc.isenabled()                        # back on
    assert gc.get_freeze_count() >= frozen       # what was loaded is frozen
    assert "default" in presets and _preload.preloaded() == presets
    assert _preload.preload_classifier() == presets and seen == [False]      # once


def test_the_collector_comes_back_on_after_the_limit_even_while_loading(monkeypatch):
    seen = []

    def slow():                                  # a cold Numba cache compiling
        seen.append(gc.isenabled())
        time.sleep(0.5)
        seen.append(gc.isenabled())

    monkeypatch.setattr(_preload, "_loaded", [])
    monkeypatch.setattr(_preload, "_fit_tiny", slow)
    monkeypatch.setattr(_preload, "GC_PAUSE_LIMIT_S", 0.1)
    _preload.preload_classifier()
    assert seen == [False, True] and gc.isenabled()


def test_a_collector_the_caller_turned_off_stays_off(monkeypatch):
    monkeypatch.setattr(_preload, "_loaded", [])
    monkeypatch.setattr(_preload, "_fit_tiny", lambda: None)
    gc.disable()
    try:
        _preload.preload_classifier()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_background_load_fills_preloaded(monkeypatch):
    monkeypatch.setattr(_preload, "_loaded", [])
    monkeypatch.setattr(_preload, "_fit_tiny", lambda: None)
    _preload.preload_in_background(delay=0.05)
    assert _preload.preloaded() is None          # not before the delay
    deadline = time.perf_counter() + 10
    while _preload.preloaded() is None and time.perf_counter() < deadline:
        time.sleep(0.01)
    assert "default" in _preload.preloaded()


def test_a_load_started_in_a_turn_of_the_event_loop_waits_for_the_turn_to_end(monkeypatch,
                                                                             qapp):
    """napari reads a file and adds its layer in one turn of the GUI thread; the reader's
    background load counts its delay from the end of that turn, not from inside it."""
    monkeypatch.setattr(_preload, "_loaded", [])
    monkeypatch.setattr(_preload, "_fit_tiny", lambda: None)
    importlib.import_module("msclassify.features")   # the load itself takes no time here
    _preload.preload_in_background(delay=0.01, after_this_turn=True)
    time.sleep(0.3)                              # the turn goes on: no event processed
    assert _preload.preloaded() is None
    deadline = time.perf_counter() + 10
    while _preload.preloaded() is None and time.perf_counter() < deadline:
        qapp.processEvents()                     # the turn has ended
        time.sleep(0.01)
    assert "default" in _preload.preloaded()

def test_import_quietly_imports_with_the_collector_paused(monkeypatch, tmp_path):
    (tmp_path / "quiet_probe.py").write_text("import gc\nCOLLECTING = gc.isenabled()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(_preload, "_loaded", ["done"])           # the classifier: loaded
    module = _preload.import_quietly("quiet_probe")
    assert module.COLLECTING is False and gc.isenabled()
