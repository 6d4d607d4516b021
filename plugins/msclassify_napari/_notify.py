"""Telling the user what went wrong, shared by the dock widgets.

Kept apart from the widgets so that a widget module can import it without
importing the other widget's dependencies.
"""

from napari.utils.notifications import notification_manager, show_error

__all__ = ["USER_ERRORS", "notify_error"]

# Errors that mean "bad input": shown as a one-line message. Anything else is a bug and
# goes to napari's notification with its traceback.
USER_ERRORS = (ValueError, TypeError, OSError)


def notify_error(exc, status_label=None):
    """Tell the user what went wrong: the message in ``status_label`` and a napari notification."""
    message = str(exc) or type(exc).__name__
    if status_label is not None:
        status_label.setText(f"⚠ {message}")
    if isinstance(exc, USER_ERRORS):
        show_error(message)
    else:
        notification_manager.receive_error(type(exc), exc, exc.__traceback__)
