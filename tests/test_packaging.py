"""What pyproject.toml declares matches what the code imports.

Every third-party module imported by the package (msclassify/, plugins/) comes from a declared
dependency: the core's from ``dependencies``, or from an extra when the import is optional (inside
a function or a ``try``, so that the rest works without it); the plugin's from the core or the
``napari`` extra; the tests' and benchmarks' from the core or ``dev``. And every declared runtime
dependency is imported somewhere (no dead declarations).
"""

import ast
import functools
import importlib.metadata
import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: tomli, declared in the dev extra
    import tomli as tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
# distributions that are used without being imported by name
NOT_IMPORTED = {
    "pyqt5",          # napari[pyqt5]: the Qt binding behind qtpy
    "pytest-qt",      # pytest plugins, loaded by pytest
    "pytest-xvfb",
}


class Import:
    """One ``import`` statement: the top-level module, where, and whether it is optional."""

    def __init__(self, module, path, line, optional):
        self.module, self.path, self.line, self.optional = module, path, line, optional

    def __repr__(self):
        return f"{self.path.relative_to(REPO)}:{self.line} imports {self.module}"


def _imports(folder):
    """Third-party imports of every .py file under `folder` (stdlib and own modules left out)."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        _visit(tree, path, optional=False, found=found)
    own = {"msclassify", "msclassify_napari", "benchmarks", "tests"}
    return [i for i in found if i.module not in sys.stdlib_module_names and i.module not in own
            and not (i.path.parent / f"{i.module}.py").exists()]


def _visit(node, path, optional, found):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import):
            found.extend(Import(a.name.split(".")[0], path, child.lineno, optional)
                         for a in child.names)
        elif isinstance(child, ast.ImportFrom) and child.level == 0:
            found.append(Import(child.module.split(".")[0], path, child.lineno, optional))
        # an import inside a function, or in a try that catches ImportError, does not break
        # importing the module
        inner = optional or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) or (
            isinstance(child, ast.Try) and any(_catches_import_error(h) for h in child.handlers))
        _visit(child, path, inner, found)


def _catches_import_error(handler):
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError")
               for n in names)


@functools.cache
def _providers():
    return importlib.metadata.packages_distributions()


def _distributions(module):
    """Canonical names of the installed distributions that provide top-level `module`."""
    provided = _providers().get(module, [module])
    return {canonicalize_name(name) for name in provided}


def _declared(requirements):
    """Canonical names the requirements bring in: each one, plus what its extras add."""
    names = set()
    for text in requirements:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        if name == "msclassify":  # dev = msclassify[dask,napari] + ...
            for extra in requirement.extras:
                names |= _declared(PYPROJECT["optional-dependencies"][extra])
            continue
        names.add(name)
        for extra in requirement.extras:  # e.g. dask[distributed] -> distributed
            for needed in importlib.metadata.requires(requirement.name) or []:
                needed = Requirement(needed)
                if "extra" in str(needed.marker) and needed.marker.evaluate({"extra": extra}):
                    names.add(canonicalize_name(needed.name))
    return names


CORE = _declared(PYPROJECT["dependencies"])
EXTRAS = {extra: _declared(requirements)
          for extra, requirements in PYPROJECT["optional-dependencies"].items()}


def _undeclared(imports, allowed):
    return [i for i in imports if not _distributions(i.module) & allowed]


def test_the_core_imports_only_declared_dependencies_and_extras_only_where_optional():
    imports = _imports(REPO / "msclassify")
    assert imports  # the scan sees the imports
    assert _undeclared(imports, CORE | EXTRAS["dask"]) == []
    assert [i for i in imports if not i.optional and not _distributions(i.module) & CORE] == []


def test_the_plugin_imports_only_the_core_and_the_napari_extra():
    imports = _imports(REPO / "plugins")
    assert {"napari", "qtpy", "pandas"} <= {i.module for i in imports}
    assert _undeclared(imports, CORE | EXTRAS["napari"]) == []


def test_tests_and_benchmarks_import_only_what_dev_declares():
    imports = _imports(REPO / "tests") + _imports(REPO / "benchmarks")
    assert _undeclared(imports, CORE | EXTRAS["dev"]) == []


def test_every_declared_dependency_is_imported():
    imported = set()
    for folder in ("msclassify", "plugins", "tests", "benchmarks"):
        for found in _imports(REPO / folder):
            imported |= _distributions(found.module)
    declared = {canonicalize_name(Requirement(text).name)
                for text in PYPROJECT["dependencies"] + [
                    text for extra in PYPROJECT["optional-dependencies"].values()
                    for text in extra]}
    dead = declared - imported - NOT_IMPORTED - {"msclassify"}
    assert dead == set()


# The layers, top to bottom: a module imports only from lower layers. This is their one
# definition; docs/design.md ("Layers") draws it, and a test below checks that it does.
LAYERS = [
    {"__main__"},
    {"_warmup", "cli"},
    {"models"},
    {"pixel", "baselines", "plotting"},
    {"tabular", "graph"},
    {"features", "cegb"},
    {"budget", "modelfile", "metrics", "datasets"},
    {"io"},
    {"checks"},
]


def _unit_imports():
    """(importing unit, imported unit, where) for imports between msclassify's top-level units."""
    found = []
    for path in sorted((REPO / "msclassify").rglob("*.py")):
        inside = path.relative_to(REPO / "msclassify").parts
        unit = inside[0].removesuffix(".py")
        if unit == "__init__":
            continue  # the package's front door re-exports from every layer
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                package = list(inside[:-1])[:len(inside) - node.level]
                target = (package + (node.module or "").split("."))[0] or None
                targets = [target] if target else [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("msclassify."):
                targets = [node.module.split(".")[1]]
            else:
                continue
            found.extend((unit, t, f"{path.relative_to(REPO)}:{node.lineno}") for t in targets
                         if t and t != unit)
    return found


def test_layers_import_only_downwards():
    layer = {unit: depth for depth, units in enumerate(LAYERS) for unit in units}
    edges = _unit_imports()
    assert {unit for unit, _, _ in edges} | {target for _, target, _ in edges} <= set(layer)
    assert len(edges) > 20
    assert [edge for edge in edges if layer[edge[1]] <= layer[edge[0]]] == []
    # the core knows nothing of images, the feature bank nothing of trees
    assert not [edge for edge in edges if edge[0] == "cegb" and edge[1] in ("features", "pixel")]
    assert not [edge for edge in edges if edge[0] == "features" and edge[1] != "checks"]


def test_the_design_doc_draws_the_layers_of_the_table():
    text = (REPO / "docs" / "design.md").read_text()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| ")]
    drawn = [set(re.findall(r"`([A-Za-z_]+)`", cells[2])) for cells in rows[1:]]
    assert drawn == LAYERS
