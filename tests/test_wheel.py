"""A wheel built from this checkout works where it is installed: ``msclassify demo`` from elsewhere.

How the install is isolated (the same offline, as on a developer's machine, and in CI):

* the wheel is built by ``pip wheel`` from a copy of the sources (pyproject.toml, README.md,
  msclassify/, plugins/), with the build backend in pip's isolated build environment;
* pip installs it into a new virtual environment made *without* the system site-packages, so
  neither the checkout, nor the editable install that points at it, nor any other installed
  package can be imported there;
* the only other distributions in that environment are the wheel's declared runtime
  dependencies (its ``Requires-Dist``, theirs, and so on): each is linked in from this
  interpreter's site-packages, distribution by distribution from its RECORD file, which needs
  no package index; ``pip check`` then confirms they satisfy what the wheel requires. A module
  the package imports but pyproject.toml does not declare is therefore missing in there;
* the demo runs with the environment's ``msclassify`` command from a temporary folder, with
  PYTHONPATH unset and an empty cache folder: the sample data must come from the wheel, not be
  rendered again.

The test takes about 1.5 minutes (building the wheel, and the demo compiling its Numba kernels
in the new environment); it is marked ``slow`` and runs in CI with the rest.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "msclassify", "plugins")
JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc", "*.egg-info", "build",
                              "dist")


def _run(command, **kwargs):
    result = subprocess.run([str(part) for part in command], capture_output=True, text=True,
                            **kwargs)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result


def _build_wheel(folder):
    source = folder / "source"
    source.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=JUNK)
        else:
            shutil.copy2(REPO / name, source / name)
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
          folder / "dist", source], env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
    (wheel,) = (folder / "dist").glob("msclassify-*.whl")
    return wheel


def _requirements(wheel):
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(name).decode())
    return metadata.get_all("Requires-Dist") or []


def _runtime_closure(requirements):
    """The installed distributions that `requirements` (without extras) need, recursively."""
    needed, todo, seen = {}, [(Requirement(text), frozenset({""})) for text in requirements], set()
    while todo:
        requirement, extras = todo.pop()
        if requirement.marker is not None and not any(
                requirement.marker.evaluate({"extra": extra}) for extra in extras):
            continue
        key = (canonicalize_name(requirement.name), frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            found = distribution(requirement.name)
        except PackageNotFoundError:
            pytest.fail(f"the wheel needs {requirement.name}, which is not installed here: "
                        "pip install -e '.[dev]'")
        needed[key[0]] = found
        todo.extend((Requirement(text), frozenset({""}) | key[1])
                    for text in found.requires or [])
    return needed


def _link_distributions(distributions, site_packages):
    """Make each distribution importable in `site_packages` by linking its top-level files."""
    for found in distributions.values():
        if found.files is None:
            pytest.fail(f"{found.metadata['Name']} has no RECORD; cannot link it")
        tops = {path.parts[0] for path in found.files if path.parts[0] not in ("..", "__pycache__")}
        for top in tops:
            target = site_packages / top
            if not target.exists():
                target.symlink_to(Path(found.locate_file(top)))


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(wheel, virtual environment's bin folder) after building and installing the wheel."""
    folder = tmp_path_factory.mktemp("wheel")
    wheel = _build_wheel(folder)
    venv = folder / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    site_packages = Path(_run([python, "-c", "import sysconfig; "
                               "print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    _link_distributions(_runtime_closure(_requirements(wheel)), site_packages)
    pip = [sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check"]
    _run(pip + ["install", "--quiet", "--no-index", "--no-deps", wheel])
    _run(pip + ["check"])
    return wheel, venv / "bin"


def _clean_environment(**extra):
    """This process's environment without anything that points Python or msclassify elsewhere."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYTHON", "MSCLASSIFY_", "VIRTUAL_ENV", "PIP_"))}
    return dict(env, **extra)


def test_the_wheel_holds_the_package_plugin_and_sample_data_only(installed):
    wheel, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    for shipped in ("msclassify/datasets/data/flies/frames.tif",
                    "msclassify/datasets/data/flies/masks.tif",
                    "msclassify/datasets/data/flies/scribbles.tif",
                    "msclassify/datasets/data/tabular/yahoo_style.train",
                    "msclassify/datasets/data/tabular/csv_style.cost",
                    "msclassify/datasets/_generate_flies.py",
                    "msclassify_napari/napari.yaml"):
        assert shipped in names
    assert {name.split("/")[0] for name in names if not name.startswith("msclassify-")} == {
        "msclassify", "msclassify_napari"}
    assert not [name for name in names if "__pycache__" in name or name.endswith(".nbi")]
    assert wheel.stat().st_size < 6e6
    requirements = {canonicalize_name(Requirement(text).name) for text in _requirements(wheel)
                    if "extra" not in text}
    assert "imageio-ffmpeg" not in requirements and {"numba", "threadpoolctl"} <= requirements


def test_the_installed_package_is_the_wheel_and_its_sample_data_and_napari_sample_work(
        installed, tmp_path):
    _, bin_folder = installed
    probe = """if True:
        import json, sys
        from importlib.metadata import entry_points
        import msclassify, msclassify_napari
        from msclassify.datasets import sample_data_path
        from msclassify_napari._sample_data import sample_flies  # what napari's Open Sample calls
        layers = sample_flies()
        manifests = [e.value for e in entry_points(group="napari.manifest") if e.name == "msclassify"]
        print(json.dumps({"files": [msclassify.__file__, msclassify_napari.__file__,
                                    str(sample_data_path())],
                          "path": sys.path, "manifests": manifests,
                          "layers": [(data.shape, meta["name"], kind) for data, meta, kind in layers],
                          "napari": "napari" in sys.modules}))
    """
    result = _run([bin_folder / "python", "-c", probe], cwd=tmp_path,
                  env=_clean_environment(MSCLASSIFY_CACHE=str(tmp_path / "cache")))
    found = json.loads(result.stdout)
    venv = bin_folder.parent
    for path in found["files"]:
        assert Path(path).is_relative_to(venv), path
    assert not [p for p in found["path"] if p and Path(p).resolve().is_relative_to(REPO)]
    assert not [p for p in found["path"] if "site-packages" in p
                and not Path(p).is_relative_to(venv)]
    assert found["manifests"] == ["msclassify_napari:napari.yaml"]
    assert [tuple(layer[1:]) for layer in found["layers"]] == [
        ("flies", "image"), ("fly masks (reference)", "labels"), ("scribbles", "labels")]
    assert all(layer[0] == [8, 1024, 1024] for layer in found["layers"])
    assert not found["napari"]  # napari is an extra: the sample needs only the core
    assert not (tmp_path / "cache").exists()  # read from the wheel, not rendered again


def test_msclassify_demo_runs_from_the_wheel_outside_the_checkout(installed, tmp_path):
    _, bin_folder = installed
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = _clean_environment(MSCLASSIFY_CACHE=str(tmp_path / "cache"),
                             PATH=f"{bin_folder}{os.pathsep}{os.environ['PATH']}")
    result = _run([shutil.which("msclassify", path=env["PATH"]), "demo"], cwd=work,
                  env=env, timeout=900)
    assert shutil.which("msclassify", path=env["PATH"]) == str(bin_folder / "msclassify")
    seg = float(re.search(r"SEG vs the exact masks: ([0-9.]+)", result.stdout).group(1))
    assert seg > 0.8, result.stdout
    for name in ("overlay.png", "cost_map.png", "model.msc"):
        assert (work / "msclassify-demo" / name).stat().st_size > 0
    assert not (tmp_path / "cache").exists()
