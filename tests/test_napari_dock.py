"""The docks that import the classifier (`msclassify_napari._dock`), in a real napari window:
docked as the plugin's first action, the import runs in a worker thread, the window keeps
drawing, and the widget appears in the dock when it is done.

Run: ``xvfb-run -a python -m pytest tests/test_napari_dock.py``.
"""

import sys
import time

import pytest

from benchmarks.napari_session import EventLoopMonitor
from msclassify_napari import _preload
from msclassify_napari._dock import LoadingDock, PixelClassifierDock

pytestmark = pytest.mark.gui

SLOW_IMPORT_S = 1.0
SLOW_MODULE = f'''
import time
time.sleep({SLOW_IMPORT_S})          # a heavy import, as long as the GUI thread must not wait
from qtpy.QtWidgets import QLabel


class Probe(QLabel):
    def __init__(self, viewer):
        super().__init__("the real widget")
        self.viewer = viewer
'''


@pytest.fixture
def probe_module(tmp_path, monkeypatch):
    (tmp_path / "slow_dock_probe.py").write_text(SLOW_MODULE)
    (tmp_path / "broken_dock_probe.py").write_text("raise ImportError('no module named heavy')")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(_preload, "_loaded", ["done"])       # the classifier: loaded already
    yield
    for name in ("slow_dock_probe", "broken_dock_probe"):
        sys.modules.pop(name, None)


class ProbeDock(LoadingDock):
    MODULE, NAME = "slow_dock_probe", "Probe"


class BrokenDock(LoadingDock):
    MODULE, NAME = "broken_dock_probe", "Probe"


def test_a_dock_imports_its_module_in_a_thread_and_the_window_keeps_drawing(
        make_napari_viewer, qtbot, probe_module):
    viewer = make_napari_viewer(show=True)
    monitor = EventLoopMonitor()
    qtbot.wait(100)
    monitor.mark()
    begin = time.perf_counter()
    dock = ProbeDock(viewer)
    viewer.window.add_dock_widget(dock, name="probe")
    assert time.perf_counter() - begin < SLOW_IMPORT_S / 2     # it did not wait for the import
    assert dock.widget is None and "Loading" in dock.status.text()
    qtbot.waitUntil(lambda: dock.widget is not None, timeout=10_000)
    assert dock.widget.text() == "the real widget" and dock.widget.viewer is viewer
    qtbot.waitUntil(dock.widget.isVisible, timeout=1000)    # (Qt shows it in the next turn)
    assert not dock.status.isVisible()
    qtbot.waitUntil(lambda: dock.widget.height() == dock.height(), timeout=1000)   # all of it
    assert dock.height() > 300                       # (napari adds no stretch under it)
    # the window drew all along (the import alone would have stalled it SLOW_IMPORT_S)
    assert monitor.longest_gap()[0] < SLOW_IMPORT_S / 2
    monitor.stop()
    # once imported, the next dock holds its widget at once
    again = ProbeDock(viewer)
    assert again.widget is not None and again.widget.text() == "the real widget"


def test_a_module_that_fails_to_import_is_said_in_the_dock(make_napari_viewer, qtbot,
                                                             probe_module):
    viewer = make_napari_viewer()
    dock = BrokenDock(viewer)
    qtbot.waitUntil(lambda: "could not be loaded" in dock.status.text(), timeout=10_000)
    assert dock.widget is None
    assert "no module named heavy" in dock.status.text() and "\n" not in dock.status.text()


def test_the_manifest_docks_the_pixel_classifier_through_a_loading_dock(make_napari_viewer):
    from npe2 import PluginManager, PluginManifest
    from msclassify_napari._widget import PixelClassifierWidget
    from tests.test_napari_plugin import MANIFEST
    manager = PluginManager.instance()
    if "msclassify" not in manager:
        manager.register(PluginManifest.from_file(MANIFEST))
    viewer = make_napari_viewer()
    _, dock = viewer.window.add_plugin_dock_widget("msclassify", "Pixel classifier")
    assert isinstance(dock, PixelClassifierDock)
    assert isinstance(dock.widget, PixelClassifierWidget)      # imported already: at once
