"""What the tests that run `sam build` share: finding the SAM CLI and a Python 3.12 (a
python3.12 build without Docker runs pip under it), running a command, and reading the
built template.
"""

from __future__ import annotations

import glob
import os
import platform
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def sam_command() -> str | None:
    local = ROOT / ".venv-sam" / "bin" / "sam"
    return str(local) if local.exists() else shutil.which("sam")


def python312() -> str | None:
    candidates = [
        shutil.which("python3.12"),
        *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12"))),
    ]
    for candidate in filter(None, candidates):
        probe = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 12))"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.stdout.strip() == "True":
            return candidate
    return None


def sam_and_python312() -> tuple[str, str]:
    """Both tools, or the test skips saying which is missing."""
    sam, py312 = sam_command(), python312()
    if sam is None:
        pytest.skip("aws-sam-cli is not installed (.ci/run installs it into .venv-sam)")
    if py312 is None:
        pytest.skip("no python3.12 interpreter: sam build for the python3.12 runtime needs one")
    return sam, py312


def sam_environment(py312: str) -> dict[str, str]:
    """The environment `sam build` runs in: python3.12 first on PATH, no telemetry."""
    return {
        **os.environ,
        "PATH": f"{Path(py312).parent}{os.pathsep}{os.environ['PATH']}",
        "SAM_CLI_TELEMETRY": "0",
        "AWS_DEFAULT_REGION": "us-east-1",
    }


def host_architecture(template: str) -> str:
    """The template built for this machine's architecture (no cross-building)."""
    arch = "arm64" if platform.machine() in ("aarch64", "arm64") else "x86_64"
    return template.replace("arm64", arch)


def run(command: list[str], cwd: Path, env: dict[str, str], timeout: int = 900) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


class Loader(yaml.SafeLoader):
    """Reads CloudFormation's short tags (!Ref, !Sub...) as plain values."""


Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
