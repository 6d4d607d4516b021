"""One way for the plugin's docks to show a result layer: update it in place, or add it.

Updating in place keeps the user's display settings (opacity, visibility, position in the
layer list) and costs napari far less than removing and adding a layer: adding one takes
0.1-0.5 s of the GUI thread, removing one 0.1-0.5 s more (napari runs ``gc.collect()`` on each
removal), replacing a Labels layer's data by one of another shape about what one bare repaint
does (`benchmarks/study_layer_add.py`). No split of napari's insert itself into several
event-loop turns (added hidden and shown a turn later, a 1-pixel placeholder) brings its
longest turn down by more than the noise (the same study): the docks add each layer in a turn
of its own (`in_turns`), its layer object made a turn before where they can (`make_layer`:
``Labels.__init__``, 12-44 ms under cProfile, out of the insert's turn), and otherwise update
layers in place.

What does split an add is holding the window's repaint: napari's insert (its Python: the
layer's visual and overlays, the Qt layer controls) and Qt repainting the window after it
(the canvas and every widget, in software under Xvfb) ran in one event-loop turn, because Qt
handles the repaint's posted events before its timers and input. `repaint_next_turn` turns the
window's updates off for the turn of the add and back on in the next one: the add's stall is
then two, the insert and the repaint (docs/napari.md, "A layer add in two turns").
"""

from functools import partial

import numpy as np

from napari.layers import Image, Labels, Tracks

__all__ = ["PLACEMENT", "in_turns", "insert_unselected", "make_layer", "made_from",
           "repaint_next_turn", "same_colormap", "update_or_add_layer"]

_KINDS = {"image": Image, "labels": Labels, "tracks": Tracks}
# Layer properties that follow the result when a layer is updated in place.
PLACEMENT = ("scale", "translate", "contrast_limits")


def update_or_add_layer(viewer, layer_type, data, name, parent=None, above=None,
                        keep_selection=False, made=None, **kwargs):
    """Put ``data`` in the layer called ``name``: in place if it is a ``layer_type`` layer of
    the same shape and dtype (a Labels layer: of the same number of dimensions), else in a new
    one (``viewer.add_<layer_type>(data, name=name, **kwargs)``, replacing a layer of that
    name; with a layer ``above``, the new one goes right above it instead of on top, so that
    no move follows; with ``keep_selection``, the selected layer stays selected, see
    `insert_unselected`; ``made``: the new layer object, built beforehand, e.g. a turn earlier
    with `make_layer`, used if it is still what these arguments make, `made_from`). With
    ``multiscale=True`` in ``kwargs``, ``data`` is the list of levels and only a multiscale
    layer is updated in place. With a Qt widget ``parent`` (the dock), the window repaints an
    added layer in the next event-loop turn (`repaint_next_turn`).

    Returns
    -------
    layer, added : napari layer, bool
        ``added`` is True when a new layer was made (then callers set what ``add_*`` does not
        take, e.g. a colormap, and place it in the layer list).
    """
    layers = viewer.layers
    if name in layers:
        layer = layers[name]
        multiscale = bool(kwargs.get("multiscale", False))
        first = data[0] if multiscale else data          # level 0 of a multiscale list
        same = layer.data.shape == first.shape and layer.data.dtype == first.dtype
        if layer_type == "labels":            # napari re-slices a Labels layer of a new shape
            same = layer.data.ndim == first.ndim
        if isinstance(layer, _KINDS[layer_type]) and same and layer.multiscale == multiscale:
            for key in PLACEMENT:
                if key in kwargs and tuple(getattr(layer, key)) != tuple(kwargs[key]):
                    setattr(layer, key, kwargs[key])
            layer.data = data
            return layer, False
        layers.remove(layer)
    if parent is not None:
        repaint_next_turn(parent)
    if above is None and not keep_selection and made is None:
        return getattr(viewer, f"add_{layer_type}")(data, name=name, **kwargs), True
    # what add_* does, placed
    if made is None or not made_from(made, data, name, **kwargs):
        made = make_layer(layer_type, data, name, **kwargs)
    layer = made
    index = layers.index(above) + 1 if above is not None and above in layers else len(layers)
    if keep_selection:
        insert_unselected(layers, index, layer)
    else:
        layers.insert(index, layer)
    return layer, True


def make_layer(layer_type, data, name, **kwargs):
    """The napari layer object ``viewer.add_<layer_type>(data, name=name, **kwargs)`` would
    insert (not inserted): building it (``Labels.__init__``: 10-55 ms) can then take a turn
    of the event loop of its own before napari's insert (`update_or_add_layer`'s ``made``)."""
    return _KINDS[layer_type](data, name=name, **kwargs)


def made_from(layer, data, name, **kwargs):
    """Whether layer object ``layer`` is still what `make_layer` would make of these arguments
    (made turns before, they may have changed in between): its name, the data's shape and
    type, and those of scale, translate, features and colormap given (see `same_colormap`)."""
    same = {"scale": np.array_equal, "translate": np.array_equal,
            "features": lambda current, given: current.equals(given),
            "colormap": same_colormap}
    return layer.name == name and layer.data.shape == data.shape \
        and layer.data.dtype == data.dtype \
        and all(check(getattr(layer, key), kwargs[key]) for key, check in same.items()
                if key in kwargs)


def same_colormap(current, colormap):
    """Whether napari label colormap ``current`` draws as ``colormap`` (a
    `CyclicLabelColormap`: the same type, background value and colours)."""
    return isinstance(current, type(colormap)) \
        and current.background_value == colormap.background_value \
        and np.shape(current.colors) == np.shape(colormap.colors) \
        and np.allclose(current.colors, colormap.colors)


def insert_unselected(layers, index, layer):
    """Insert ``layer`` into napari's LayerList ``layers`` at ``index`` with the selected layer
    left selected.

    napari selects every layer it inserts: its layer controls, layer list, overlays and status
    switch to the new layer, and switching back to the layer the user paints on costs the
    same again (together 20-30 % of a Labels add's turn, docs/napari.md "The dock and New on
    a second image, taken apart"). Here the selection's events are held (napari's public
    ``EmitterGroup.blocker_all``) while napari inserts and the selection is set back, so
    nothing listening to the selection sees a change: there is none. With nothing selected,
    napari's own insert (the new layer selected).
    """
    selection = layers.selection
    active = selection.active
    if active is None:
        layers.insert(index, layer)
        return
    with selection.events.blocker_all():
        layers.insert(index, layer)
        selection.active = active


def repaint_next_turn(widget):
    """Hold the repaint of ``widget``'s window until the next turn of the event loop.

    Call it right before a napari layer add: Qt then repaints the window (the new layer's
    canvas, its row and controls) in a turn of its own instead of in the add's, so the
    window answers input and timers between the two. It only holds what Qt would paint at
    once; the window repaints whole a few milliseconds later (Qt's
    ``QWidget.setUpdatesEnabled``, which re-enabling follows with an ``update()``).
    A window already held (an add earlier in the same turn) stays held until that turn ends.
    """
    window = widget.window()
    if not window.updatesEnabled():
        return
    from qtpy.QtCore import QTimer
    window.setUpdatesEnabled(False)
    timer = QTimer(window, singleShot=True, interval=0)
    timer.timeout.connect(partial(_updates_back_on, timer))   # (no reference to the window:
    timer.start()                                             # a closed viewer is freed)


def _updates_back_on(timer):
    timer.parent().setUpdatesEnabled(True)
    timer.deleteLater()


def in_turns(steps, parent, delay_ms=20, now=True):
    """Run ``steps`` (callables, e.g. layer adds) one per turn of the event loop, the first now
    (or, with ``now=False``, later), each next one ``delay_ms`` after the event loop has come
    back from the one before: the window draws in between (a repaint held with
    `repaint_next_turn` too, however long the turn that held it), so each is one napari stall
    instead of one freeze for all of them. (Counted from the step's start, a delay shorter than
    the step and its repaint made the next step due at once: Qt ran it right after the
    repaint, in the same turn.)

    The timers are children of the Qt widget ``parent`` (the dock): the steps left stop when
    it is deleted, and when the window it was shown in is closed or it left that window.
    napari closes a dock by taking it out of the window (hidden) and deleting it only in a
    later garbage collection, which can come in the middle of a step (napari collects on each
    layer removal): the step then met a deleted widget ("wrapped C/C++ object deleted")."""
    _in_turns(list(steps), parent, delay_ms, now, shown=False)


def _in_turns(steps, parent, delay_ms, now, shown):
    window = _window(parent)
    if window is None or (shown and not window.isVisible()):
        return                                   # deleted, or its dock or window closed
    shown = shown or window.isVisible()
    if now:
        steps[0]()
        steps = steps[1:]
    if steps and _window(parent) is not None:
        # a 0 ms timer fires once the event loop is back; the delay is counted from there
        _after(parent, 0, lambda: _after(parent, delay_ms,
                                         lambda: _in_turns(steps, parent, delay_ms, True,
                                                           shown)))


def _window(widget):
    """``widget``'s window, or None when its C++ object has been deleted."""
    try:
        return widget.window()
    except RuntimeError:                  # (the wrapper outlived the widget)
        return None


def _after(parent, delay_ms, function):
    from qtpy.QtCore import QTimer
    timer = QTimer(parent, singleShot=True, interval=delay_ms)
    timer.timeout.connect(lambda: (timer.deleteLater(), function()))
    timer.start()
