"""The "Tabular (cost vs accuracy)" dock widget.

Loads a Yahoo! LTR style svmlight file (with its ``.query`` groups), a
MiniBooNE file or a CSV file plus an optional feature-cost file, runs
`msclassify.tabular.cost_sweep` (plain GB and CEGB for a sweep of mu) in a
worker thread, and plots the score against the mean prediction cost with
matplotlib inside the dock. The widget only collects inputs and draws; the
sweep is library code the CLI shares.

The dock opens at once: `msclassify.tabular` (scikit-learn, SciPy) and
matplotlib took ~3.5 s to import on the GUI thread, so they are imported in a
worker thread while the user picks files (`TOOLS`), and the plot is created
with the first result.
"""

import importlib
from pathlib import Path

from napari.qt.threading import create_worker
from qtpy.QtCore import Qt, Signal
from qtpy.QtWidgets import (QComboBox, QDoubleSpinBox, QFileDialog, QFormLayout, QGroupBox,
                            QHBoxLayout, QHeaderView, QLabel, QLineEdit, QProgressBar,
                            QPushButton, QSpinBox, QTableWidget, QTableWidgetItem, QVBoxLayout,
                            QWidget)

from ._notify import notify_error

__all__ = ["TOOLS", "TabularWidget"]

# Modules the sweep and its plot need, imported in a worker thread (seconds on the GUI thread).
TOOLS = ("msclassify.tabular", "matplotlib.figure", "matplotlib.backends.backend_qtagg")


def _import_tools():
    """Import `TOOLS` (worker thread); returns `msclassify.tabular`."""
    for name in TOOLS:
        importlib.import_module(name)
    return importlib.import_module("msclassify.tabular")


def _tabular():
    """`msclassify.tabular` (imported already, or waiting for the worker thread importing it)."""
    return importlib.import_module("msclassify.tabular")

_FORMATS = {"auto": "auto (by content)", "svmlight": "svmlight / LETOR (Yahoo! LTR)",
            "miniboone": "MiniBooNE", "csv": "CSV with header"}


def _run_sweep(paths, options, sweep_options):
    """What the worker thread runs: load, then sweep."""
    tabular = _tabular()
    train, test, costs = tabular.load_train_test(*paths, **options)
    return tabular.cost_sweep(train, test, costs, **sweep_options)


class TabularWidget(QWidget):
    """Train CEGB for a sweep of mu and plain GB on tabular data; plot cost vs accuracy.

    Signals
    -------
    sweep_done()
        The sweep finished, failed or was cancelled.
    """

    sweep_done = Signal()
    _progress = Signal(int, int)

    def __init__(self, napari_viewer=None, parent=None):
        super().__init__(parent)
        self.viewer = napari_viewer
        self.sweep = None
        self._worker = None
        self._cancelled = False
        self.figure = self.canvas = self.axes = None     # created with the first result
        self._build_ui()
        worker = create_worker(_import_tools, _ignore_errors=True)
        worker.returned.connect(self._on_tools_imported)
        worker.start()

    def _build_ui(self):
        layout = QVBoxLayout(self)
        files = QGroupBox("Data")
        form = QFormLayout(files)
        self.format_combo = QComboBox()
        for key, text in _FORMATS.items():
            self.format_combo.addItem(text, key)
        form.addRow("Format", self.format_combo)
        self.train_edit = self._file_row(form, "Training file", "svmlight with <file>.query, "
                                         "MiniBooNE_PID.txt layout, or CSV")
        self.test_edit = self._file_row(form, "Test file", "optional: without it a random 30% "
                                        "(whole queries for ranking data) is held out")
        self.cost_edit = self._file_row(form, "Feature costs", "optional: one cost per line, in "
                                        "feature order (default 1 per feature)")
        self.label_edit = QLineEdit("label")
        self.label_edit.setToolTip("Name of the label column of a CSV file")
        form.addRow("CSV label column", self.label_edit)
        layout.addWidget(files)

        model = QGroupBox("Sweep")
        form = QFormLayout(model)
        self.mu_edit = QLineEdit()         # the default is filled in once it is imported
        self.mu_edit.setToolTip("CEGB cost tradeoffs mu to train (plain GB, mu = 0, is always "
                                "trained too)")
        form.addRow("Cost tradeoffs μ", self.mu_edit)
        self.alpha_spin = QDoubleSpinBox()
        self.alpha_spin.setRange(0.0, 1e4)
        self.alpha_spin.setToolTip("Split cost α: cost of evaluating one split, in feature-cost "
                                   "units (0: only feature acquisition costs)")
        form.addRow("Split cost α", self.alpha_spin)
        self.trees_spin = QSpinBox()
        self.trees_spin.setRange(1, 5000)
        self.trees_spin.setValue(100)
        form.addRow("Trees", self.trees_spin)
        self.leaves_spin = QSpinBox()
        self.leaves_spin.setRange(2, 1024)
        self.leaves_spin.setValue(15)
        form.addRow("Leaves per tree", self.leaves_spin)
        row = QHBoxLayout()
        self.run_button = QPushButton("Run sweep")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        row.addWidget(self.run_button)
        row.addWidget(self.cancel_button)
        form.addRow(row)
        self.progress = QProgressBar()
        form.addRow(self.progress)
        self.status_label = QLabel("Choose a training file, then Run sweep.")
        self.status_label.setWordWrap(True)
        form.addRow(self.status_label)
        layout.addWidget(model)

        self.plot_placeholder = QLabel("Score against mean prediction cost: plotted here after "
                                       "a sweep.")
        self.plot_placeholder.setAlignment(Qt.AlignCenter)
        self.plot_placeholder.setMinimumHeight(240)
        self.plot_placeholder.setWordWrap(True)
        layout.addWidget(self.plot_placeholder, 1)
        self.table = QTableWidget(0, 5)
        self.table.setHorizontalHeaderLabels(["model", "mean cost", "score", "# features",
                                              "features used"])
        self.table.horizontalHeader().setSectionResizeMode(4, QHeaderView.Stretch)
        self.table.verticalHeader().setVisible(False)
        layout.addWidget(self.table, 1)

        self.run_button.clicked.connect(self.run)
        self.cancel_button.clicked.connect(self.cancel)
        self._progress.connect(self._show_progress)

    def _on_tools_imported(self, tabular):
        if not self.mu_edit.text().strip():
            self.mu_edit.setText(self._default_tradeoffs(tabular))

    @staticmethod
    def _default_tradeoffs(tabular):
        return ", ".join(f"{mu:g}" for mu in tabular.DEFAULT_COST_TRADEOFFS)

    def _file_row(self, form, label, tooltip):
        row = QHBoxLayout()
        edit = QLineEdit()
        edit.setToolTip(tooltip)
        button = QPushButton("…")
        button.setMaximumWidth(30)
        button.clicked.connect(lambda: self._browse(edit, label))
        row.addWidget(edit, 1)
        row.addWidget(button)
        form.addRow(label, row)
        return edit

    def _browse(self, edit, title):
        path, _ = QFileDialog.getOpenFileName(self, title, str(Path(edit.text()).parent))
        if path:
            edit.setText(path)

    def set_files(self, train, test=None, costs=None, file_format="auto", label_column="label"):
        """Fill in the file fields (what the Browse buttons do)."""
        self.train_edit.setText(str(train))
        self.test_edit.setText(str(test) if test else "")
        self.cost_edit.setText(str(costs) if costs else "")
        self.format_combo.setCurrentIndex(list(_FORMATS).index(file_format))
        self.label_edit.setText(label_column)

    def run(self):
        """Load the files and run the sweep in a worker thread."""
        try:
            if not self.train_edit.text().strip():
                raise ValueError("choose a training file first")
            tabular = _tabular()
            text = self.mu_edit.text().strip() or self._default_tradeoffs(tabular)
            tradeoffs = tabular.parse_cost_tradeoffs(text)
        except ValueError as exc:
            self._report_error(exc)
            self.sweep_done.emit()
            return None
        paths = (self.train_edit.text().strip(), self.test_edit.text().strip() or None,
                 self.cost_edit.text().strip() or None)
        options = {"file_format": self.format_combo.currentData(),
                   "label_column": self.label_edit.text().strip() or "label",
                   "test_fraction": 0.3}
        sweep_options = {"cost_tradeoffs": tradeoffs, "split_cost": self.alpha_spin.value(),
                         "n_estimators": self.trees_spin.value(),
                         "max_leaves": self.leaves_spin.value(),
                         "callback": self._on_step}
        self._cancelled = False
        self.progress.setValue(0)
        self.status_label.setText("Training…")
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        worker = create_worker(_run_sweep, paths, options, sweep_options, _ignore_errors=True)
        worker.returned.connect(self._show_sweep)
        worker.errored.connect(self._report_error)
        worker.finished.connect(self._on_finished)
        self._worker = worker
        worker.start()
        return worker

    def _on_step(self, step, n_steps):
        """Sweep callback (worker thread): report progress, tell the sweep to stop if asked."""
        self._progress.emit(step, n_steps)
        return self._cancelled

    def _show_progress(self, step, n_steps):
        self.progress.setMaximum(n_steps)
        self.progress.setValue(step)

    def cancel(self):
        """Stop after the current boosting round; finished models are still shown."""
        self._cancelled = True

    def _on_finished(self):
        self._worker = None
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        self.sweep_done.emit()

    def _show_sweep(self, sweep):
        self.sweep = sweep
        self._plot(sweep)
        self._fill_table(sweep)
        what = "Sweep finished" if sweep.completed else "Sweep cancelled"
        self.status_label.setText(f"{what}: {len(sweep.points)} models, {sweep.task} "
                                  f"({sweep.metric}).")

    def _plot(self, sweep):
        if self.canvas is None:
            self._create_plot()
        self.axes.clear()
        _tabular().plot_cost_sweep(sweep, self.axes)
        self.canvas.draw_idle()

    def _create_plot(self):
        from matplotlib.backends.backend_qtagg import FigureCanvasQTAgg
        from matplotlib.figure import Figure

        self.figure = Figure(figsize=(4, 3), tight_layout=True)
        self.canvas = FigureCanvasQTAgg(self.figure)
        self.canvas.setMinimumHeight(240)
        self.axes = self.figure.add_subplot(111)
        self.layout().replaceWidget(self.plot_placeholder, self.canvas)
        self.plot_placeholder.deleteLater()
        self.plot_placeholder = None

    def _fill_table(self, sweep):
        self.table.setRowCount(len(sweep.points))
        for row, point in enumerate(sweep.points):
            cells = (point.name, f"{point.mean_cost:.4g}", f"{point.scores[sweep.metric]:.4f}",
                     str(len(point.features_used)), ", ".join(point.features_used))
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if column == 4:
                    item.setToolTip("\n".join(point.features_used))
                self.table.setItem(row, column, item)
        for column in range(4):
            self.table.resizeColumnToContents(column)

    def _report_error(self, exc):
        notify_error(exc, self.status_label)
