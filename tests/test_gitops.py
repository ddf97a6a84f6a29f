"""The copy-paste GitOps files under deploy/ and .pre-commit-hooks.yaml: they parse, every
`gpustack-render` invocation in them uses a real subcommand and real options (checked against its
`--help`), and the scripts do what they claim when run locally on the demo snapshot."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from gpustack_render.diff_report import HEADING

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
DEMO = REPO / "fixtures" / "demo"
PLUGIN = DEPLOY / "argocd" / "plugin.yaml"
APPLICATION = DEPLOY / "argocd" / "application.yaml"
WORKFLOW = DEPLOY / "github-actions" / "gpustack-render.yml"
FLUX = DEPLOY / "flux" / "kustomization.yaml"
HOOKS = REPO / ".pre-commit-hooks.yaml"
SHELL_STOP = {";", "&&", "||", "|", ">", ">>", "<", "then", "fi", "do", "done", ")", "("}
COMMAND_PREFIXES = {"exec", "else", "{"}


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def invocations(script: str) -> Iterator[list[str]]:
    """Every `gpustack-render ...` command in a shell script, cut at shell operators."""
    for line in script.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
        for i, token in enumerate(tokens):
            # Only where a command starts: `pip install gpustack-render` or a git user name is no call.
            if token == "gpustack-render" and (i == 0 or tokens[i - 1] in SHELL_STOP | COMMAND_PREFIXES):
                rest = tokens[i:]
                yield rest[:next((j for j, t in enumerate(rest) if t in SHELL_STOP), len(rest))]


def plugin_scripts() -> dict[str, str]:
    spec = load(PLUGIN)["spec"]
    return {stage: "\n".join(spec[stage]["args"]) for stage in ("init", "generate")}


def workflow_scripts() -> list[str]:
    return [step["run"] for job in load(WORKFLOW)["jobs"].values() for step in job["steps"] if "run" in step]


def hook_commands() -> list[list[str]]:
    return [shlex.split(hook["entry"]) + list(hook.get("args", [])) for hook in load(HOOKS)]


def all_invocations() -> list[tuple[str, list[str]]]:
    found = [(f"plugin.yaml {stage}", cmd) for stage, script in plugin_scripts().items()
             for cmd in invocations(script)]
    found += [("workflow", cmd) for script in workflow_scripts() for cmd in invocations(script)]
    found += [(".pre-commit-hooks.yaml", cmd) for cmd in hook_commands()]
    return found


@lru_cache(maxsize=None)
def help_text(subcommand: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "gpustack_render", subcommand, "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"`gpustack-render {subcommand} --help` exited {proc.returncode}: {proc.stderr}"
    return proc.stdout


def test_every_file_parses_as_what_it_claims() -> None:
    plugin = load(PLUGIN)
    assert (plugin["apiVersion"], plugin["kind"]) == ("argoproj.io/v1alpha1", "ConfigManagementPlugin")
    assert plugin["spec"]["generate"]["command"] == ["sh", "-c"]
    app = load(APPLICATION)
    assert app["spec"]["source"]["plugin"]["name"] == f"{plugin['metadata']['name']}-{plugin['spec']['version']}"
    flux = load(FLUX)
    assert (flux["apiVersion"], flux["kind"]) == ("kustomize.toolkit.fluxcd.io/v1", "Kustomization")
    workflow = load(WORKFLOW)
    assert flux["spec"]["path"] == "./" + workflow["env"]["RENDERED"]
    assert flux["spec"]["prune"] is True
    patch = flux["spec"]["patches"][0]
    assert patch["target"] == {"group": "worker.gpustack.ai", "kind": "InstanceType"}
    assert yaml.safe_load(patch["patch"])["metadata"]["annotations"] == {"kustomize.toolkit.fluxcd.io/prune": "disabled"}
    assert set(workflow["jobs"]) == {"snapshot", "render"}
    hooks = load(HOOKS)
    assert [h["id"] for h in hooks] == ["gpustack-render-validate", "gpustack-render-render"]
    for hook in hooks:
        assert {"id", "name", "entry", "language"} <= set(hook) and hook["language"] == "python"
        assert hook["pass_filenames"] is False
        re.compile(hook["files"])


def test_the_files_use_the_commands_they_document() -> None:
    used = {(where, cmd[1]) for where, cmd in all_invocations()}
    assert {("plugin.yaml generate", "render"), ("plugin.yaml init", "validate"),
            (".pre-commit-hooks.yaml", "validate"), (".pre-commit-hooks.yaml", "render")} <= used
    assert {"snapshot", "validate", "diff", "render"} <= {sub for where, sub in used if where == "workflow"}
    markdown = [cmd for where, cmd in all_invocations() if cmd[1] == "diff" and "--format" in cmd]
    assert markdown and all(cmd[cmd.index("--format") + 1] == "markdown" for cmd in markdown)
    script = next(step["with"]["script"] for step in load(WORKFLOW)["jobs"]["render"]["steps"]
                  if step.get("uses", "").startswith("actions/github-script"))
    assert f"'{HEADING}'" in script, "the comment marker must match the markdown heading diff prints"


@pytest.mark.parametrize("where, command", all_invocations(), ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_each_invocation_is_valid_cli(where: str, command: list[str]) -> None:
    assert command[0] == "gpustack-render"
    text = help_text(command[1])
    for token in command[2:]:
        option = token.split("=", 1)[0]
        if option.startswith("-"):
            assert re.search(rf"(^|[\s,/]){re.escape(option)}([\s,=/]|$)", text, re.M), \
                f"{where}: `{' '.join(command)}` uses {option}, which `{command[1]} --help` does not list"
    # And click itself accepts the arguments (choices, counts, types), without running the command.
    from gpustack_render.cli import main
    subcommand = main.commands[command[1]]
    context = subcommand.make_context(command[1], list(command[2:]))
    assert context.params, context


# --- the scripts, run locally ---------------------------------------------------------------------

def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    assert shutil.which("gpustack-render", path=env["PATH"]), "the gpustack-render console script is not installed"
    return env


def _sh(script: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", script], cwd=cwd, env=env or _env(), capture_output=True, text=True,
                          timeout=300)


def test_argocd_plugin_generate_prints_only_manifests(tmp_path: Path) -> None:
    shutil.copytree(DEMO, tmp_path / "snapshot")
    scripts = plugin_scripts()
    assert _sh(scripts["init"], tmp_path).returncode == 0
    proc = _sh(scripts["generate"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    expected = subprocess.run([sys.executable, "-m", "gpustack_render", "render", str(DEMO)], cwd=REPO,
                              capture_output=True, text=True, timeout=120).stdout
    assert proc.stdout == expected
    docs = list(yaml.safe_load_all(proc.stdout))
    assert docs and all({"apiVersion", "kind", "metadata"} <= set(d) for d in docs)
    # With a rules/ directory next to the snapshot, the plugin uses it.
    shutil.copytree(REPO / "rules", tmp_path / "rules")
    naming = tmp_path / "rules" / "naming.yaml"
    naming.write_text(naming.read_text(encoding="utf-8").replace('topology: "gpustack-{profile}"',
                                                                   'topology: "topo-{profile}"'), encoding="utf-8")
    proc = _sh(scripts["generate"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "name: topo-fnv64-" in proc.stdout
    # A broken snapshot fails the generate step (non-zero), with the error on stderr only.
    (tmp_path / "snapshot" / "broken.yaml").write_text("kind: [\n", encoding="utf-8")
    proc = _sh(scripts["generate"], tmp_path)
    assert proc.returncode == 2 and proc.stdout == "" and "invalid YAML" in proc.stderr


def test_workflow_diff_step_reports_changes_and_posts_markdown(tmp_path: Path) -> None:
    workflow = load(WORKFLOW)
    step = next(s for s in workflow["jobs"]["render"]["steps"] if s.get("id") == "diff")
    env = _env()
    env.update(workflow["env"])
    env.update(GITHUB_OUTPUT=str(tmp_path / "output"), GITHUB_STEP_SUMMARY=str(tmp_path / "summary"))
    shutil.copytree(DEMO, tmp_path / env["SNAPSHOT"])
    shutil.copytree(REPO / "rules", tmp_path / env["RULES"])
    render = next(s["run"] for s in workflow["jobs"]["render"]["steps"] if "-o" in s.get("run", ""))
    assert _sh(next(line for line in render.splitlines() if "render" in line), tmp_path, env).returncode == 0
    proc = _sh(step["run"], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "output").read_text() == "changed=false\n"
    assert (tmp_path / "diff.md").read_text().startswith(f"{HEADING}\n\nNo differences.")
    naming = tmp_path / env["RULES"] / "naming.yaml"
    naming.write_text(naming.read_text(encoding="utf-8").replace('topology: "gpustack-{profile}"',
                                                                   'topology: "topo-{profile}"'), encoding="utf-8")
    proc = _sh(step["run"], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "output").read_text().splitlines()[-1] == "changed=true"
    comment = (tmp_path / "diff.md").read_text()
    assert comment.startswith(f"{HEADING}\n\n**") and "| Topology | `topo-fnv64-" in comment
    assert (tmp_path / "summary").read_text().count(HEADING) == 2


def test_pre_commit_validate_hook_runs_on_a_repo_layout(tmp_path: Path) -> None:
    shutil.copytree(DEMO, tmp_path / "snapshot")
    shutil.copytree(REPO / "rules", tmp_path / "rules")
    validate = next(cmd for cmd in hook_commands() if cmd[1] == "validate")
    proc = subprocess.run(validate, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    queues = tmp_path / "rules" / "queues.yaml"
    queues.write_text(queues.read_text(encoding="utf-8").replace("maxFlavorsPerGroup: 64", "maxFlavorsPerGroup: 1"),
                      encoding="utf-8")
    proc = subprocess.run(validate, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "plan refused (TooManyFlavors" in proc.stdout, proc.stdout + proc.stderr
