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
