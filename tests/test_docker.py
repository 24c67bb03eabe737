"""The images cannot be built here (no Docker engine), so they are linted and cross-checked."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from tests.helpers import REPO

DOCKERFILES = sorted((REPO / "docker").glob("Dockerfile.*"))


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfiles_pass_hadolint(dockerfile):
    hadolint = shutil.which("hadolint") or str(REPO / ".venv" / "bin" / "hadolint")
    result = subprocess.run([hadolint, str(dockerfile)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_builds_the_images_that_exist_and_wires_vllm():
    compose = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())
    services = compose["services"]
    for service in services.values():
        if "build" in service:
            assert (
                REPO / "docker" / service["build"]["context"] / service["build"]["dockerfile"]
            ).is_file()
    assert services["mmrag-gpu"]["environment"]["MMRAG_ENGINE_URL"] == "http://vllm:8001/v1"
    assert services["mmrag-gpu"]["depends_on"]["vllm"]["condition"] == "service_healthy"
    assert len(DOCKERFILES) == 2


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_images_copy_every_package_and_never_put_torchvision_on_cpu(dockerfile):
    text = dockerfile.read_text()
    for package in ("indexes", "retrieval", "generation", "service", "evaluation"):
        assert f"COPY {package}/ {package}/" in text
    assert "torch==2.13.0" in text
    installs = [line for line in text.splitlines() if "pip install" in line]
    if dockerfile.name.endswith("cpu"):
        assert "whl/cpu" in text
        assert not any("torchvision" in line for line in installs)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_images_copy_every_package_folder(dockerfile):
    """A folder left out of the image installs an `mmrag` without it."""
    import tomllib

    folders = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ].values()
    text = dockerfile.read_text()
    assert all(f"COPY {folder}/ {folder}/" in text for folder in folders)
