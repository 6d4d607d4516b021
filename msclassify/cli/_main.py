"""The ``msclassify`` parser and entry point: one line per error, exit status 1 (130 on Ctrl-C)."""

import argparse
import os
import sys
import warnings

from ..io import FrameReadError, FrameWriteError
from ..modelfile import ModelFileError
from ._common import EXIT_ERROR, EXIT_INTERRUPTED, PROG, CommandError
from ._demo import add_demo_command
from ._evaluate import add_evaluate_command
from ._info import add_info_command
from ._predict import add_predict_command
from ._tabular import add_tabular_commands
from ._train import add_train_command


def build_parser():
    """The argparse parser of the ``msclassify`` command."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Pixel classifiers that are accurate and cheap to run "
                               "(cost-efficient gradient boosting).")
    parser.add_argument("--traceback", action="store_true",
                        help="show the Python traceback of an error instead of one line")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    quiet = argparse.ArgumentParser(add_help=False)
    quiet.add_argument("-q", "--quiet", action="store_true",
                       help="print no progress bars or summaries")

    for add_command in (add_demo_command, add_train_command, add_predict_command,
                        add_evaluate_command, add_tabular_commands, add_info_command):
        add_command(commands, quiet)
    return parser


# What the library's messages call a parameter, and the command-line option that sets it.
_OPTION_NAMES = {"overwrite=True": "--overwrite", "cost_tradeoff='auto'": "--cost-tradeoff auto",
                 "semi_supervised=True": "--semi-supervised",
                 "cost_tradeoff=": "--cost-tradeoff "}


def _one_line(exc):
    text = " ".join(str(exc).split()) or type(exc).__name__
    for parameter, option in _OPTION_NAMES.items():
        text = text.replace(parameter, option)
    return text


def _warning_printer(command):
    """``warnings.showwarning`` that prints one line: ``msclassify CMD: warning: ...``."""
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"{PROG} {command}: warning: {_one_line(message)}", file=file or sys.stderr,
              flush=True)
    return show


def _quiet_stdout():
    """Point stdout at /dev/null: its reader is gone (``| head``), and Python would
    complain once more when it flushes stdout at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def main(argv=None):
    """Run ``msclassify`` with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    Errors print one line (``msclassify CMD: error: ...``) and give status 1,
    warnings one line each (``msclassify CMD: warning: ...``); Ctrl-C gives
    status 130 and a closed output pipe (``| head``) status 0, both without a
    traceback.

    Examples
    --------
    >>> import contextlib, io
    >>> with contextlib.redirect_stderr(io.StringIO()) as stderr:
    ...     status = main(["info", "missing.msc"])
    >>> status, stderr.getvalue().strip()
    (1, 'msclassify info: error: model file missing.msc does not exist; check the path')
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    if getattr(args, "format", None) == "tif":
        args.format = "tiff"
    with warnings.catch_warnings():
        warnings.showwarning = _warning_printer(args.command)
        try:
            status = args.run(args)
            sys.stdout.flush()  # a closed pipe shows here, not at exit
            return status
        except KeyboardInterrupt:
            print(f"{PROG} {args.command}: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        except BrokenPipeError:
            _quiet_stdout()
            return 0
        except (CommandError, FrameReadError, FrameWriteError, ModelFileError) as exc:
            if args.traceback:
                raise
            print(f"{PROG} {args.command}: error: {_one_line(exc)}", file=sys.stderr)
            return EXIT_ERROR
        except (ValueError, TypeError, OSError, MemoryError) as exc:
            # Raised by the library for bad input (e.g. labels of one class only); the
            # message says what was wrong, --traceback says where.
            if args.traceback:
                raise
            print(f"{PROG} {args.command}: error: {_one_line(exc)} (run with --traceback for "
                  "details)", file=sys.stderr)
            return EXIT_ERROR
