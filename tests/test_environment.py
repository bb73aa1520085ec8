"""environment.yml must pin exactly what requirements.txt pins (CI installs from the latter)."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_environment_yml_pip_section_equals_requirements():
    reqs = [
        line.strip()
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_sections) == 1
    pins = [p for p in pip_sections[0] if p != "-e ."]
    assert pins == reqs
    assert all("==" in r for r in reqs), "every requirement must be pinned exactly"


def test_a_wheel_of_the_package_holds_every_package_folder(tmp_path):
    """A non-editable install (``pip install .``, a wheel) ships every folder of the package:
    pyproject.toml lists packages by hand, so a new subpackage must be added there."""
    import shutil
    import subprocess
    import sys
    import zipfile

    src = tmp_path / "src"  # setuptools writes build/ into the tree it builds: a copy
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "gtalib", "kernels"):
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy
        copy(ROOT / name, src / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                         if (ROOT / name).is_dir() else {}))
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "-q", "-w", str(tmp_path), str(src)],
        capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = tmp_path.glob("gtalib-*.whl")
    shipped = {n for n in zipfile.ZipFile(wheel).namelist() if n.endswith("/__init__.py")}
    expected = {f"{p.relative_to(ROOT).parent.as_posix()}/__init__.py"
                for p in (ROOT / "gtalib").rglob("__init__.py")} | {"gtalib/kernels/__init__.py"}
    assert expected - shipped == set(), "pyproject.toml [tool.setuptools] packages lacks them"
