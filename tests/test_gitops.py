"""The copy-paste GitOps files under deploy/ and .pre-commit-hooks.yaml: they parse, every
`gpustack-render` invocation in them uses a real subcommand and real options (checked against its
`--help`), the Argo CD plugin's image is built from this source tree (the Dockerfile, read statically:
there is no Docker here) and the plugin's commands do what they claim when run locally, in the file
layout that Dockerfile gives the image. The GitHub Actions workflow is run in tests/test_workflow.py."""

from __future__ import annotations

import filecmp
import json
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
from cli_invoke import invoke


REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
DEMO = REPO / "fixtures" / "demo"
PLUGIN = DEPLOY / "argocd" / "plugin.yaml"
APPLICATION = DEPLOY / "argocd" / "application.yaml"
DOCKERFILE = DEPLOY / "argocd" / "Dockerfile"
DOCKERIGNORE = DEPLOY / "argocd" / "Dockerfile.dockerignore"
REPO_SERVER_PATCH = DEPLOY / "argocd" / "repo-server-patch.yaml"
ARGOCD_OUTPUT = DEPLOY / "argocd" / "rules-output.yaml"
FLUX_OUTPUT = DEPLOY / "flux" / "rules-output.yaml"
CRDS = REPO.parent / "shared" / "crds"
WORKFLOW = DEPLOY / "github-actions" / "gpustack-render.yml"
FLUX = DEPLOY / "flux" / "kustomization.yaml"
HOOKS = REPO / ".pre-commit-hooks.yaml"
SHELL_STOP = {";", "&&", "||", "|", ">", ">>", "<", "then", "fi", "do", "done", ")", "("}
COMMAND_PREFIXES = {"exec", "else", "{"}


def load_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def invocations(script: str) -> Iterator[list[str]]:
    """Every `gpustack-render ...` command in a shell script, cut at shell operators."""
    for line in script.replace("\\\n", " ").splitlines():   # backslash-newline continues a line
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
    """Every `gpustack-render` command line a hook's entry can run, with the hook's args in place of "$@"."""
    out = []
    for hook in load(HOOKS):
        entry, args = shlex.split(hook["entry"]), list(hook.get("args", []))
        if entry[:2] != ["sh", "-c"]:
            out.append(entry + args)
            continue
        out += [[t for token in cmd for t in (args if token == "$@" else [token])] for cmd in invocations(entry[2])]
    return out


def all_invocations() -> list[tuple[str, list[str]]]:
    found = [(f"plugin.yaml {stage}", cmd) for stage, script in plugin_scripts().items()
             for cmd in invocations(script)]
    found += [("workflow", cmd) for script in workflow_scripts() for cmd in invocations(script)]
    found += [(".pre-commit-hooks.yaml", cmd) for cmd in hook_commands()]
    return found


@lru_cache(maxsize=None)
def help_text(subcommand: str) -> str:
    proc = invoke(subcommand, "--help")
    assert proc.returncode == 0, f"`gpustack-render {subcommand} --help` exited {proc.returncode}: {proc.stderr}"
    return proc.stdout


def test_every_file_parses_as_what_it_claims() -> None:
    plugin = load(PLUGIN)
    assert (plugin["apiVersion"], plugin["kind"]) == ("argoproj.io/v1alpha1", "ConfigManagementPlugin")
    assert plugin["spec"]["init"]["command"] == plugin["spec"]["generate"]["command"] == ["sh", "-c"]
    app = load(APPLICATION)
    assert app["spec"]["source"]["plugin"]["name"] == f"{plugin['metadata']['name']}-{plugin['spec']['version']}"
    assert app["spec"]["syncPolicy"]["automated"]["prune"] is True
    flux = load(FLUX)
    assert (flux["apiVersion"], flux["kind"]) == ("kustomize.toolkit.fluxcd.io/v1", "Kustomization")
    workflow = load(WORKFLOW)
    assert flux["spec"]["path"] == "./" + workflow["env"]["RENDERED"]
    assert flux["spec"]["prune"] is True
    # The prune protection is in the render itself now (rules-output.yaml), not a kustomize patch.
    assert "patches" not in flux["spec"]
    assert set(workflow["jobs"]) == {"pull-request", "render", "snapshot"}
    for overlay, wanted in ((ARGOCD_OUTPUT, {"argocd.argoproj.io/sync-options": "Prune=false"}),
                            (FLUX_OUTPUT, {"kustomize.toolkit.fluxcd.io/prune": "disabled"})):
        rule = load(overlay)
        assert (rule["kind"], set(rule["kinds"])) == ("Output", {"InstanceType"}), overlay
        assert rule["kinds"]["InstanceType"]["annotations"] == wanted, overlay
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
    diffs = [cmd for where, cmd in all_invocations() if cmd[1] == "diff" and "--format" in cmd]
    markdown = [cmd for cmd in diffs if "--guard-removals" not in cmd]
    assert markdown and all(cmd[cmd.index("--format") + 1] == "markdown" for cmd in markdown)
    # The removal guard runs in every job of the workflow (the pull request's, render's, snapshot's).
    guards = [cmd for where, cmd in all_invocations() if where == "workflow" and "--guard-removals" in cmd]
    assert len(guards) == 3 and all(cmd[1] == "diff" and "--against" in cmd for cmd in guards), guards
    # Every validate either checks schemas against CRDs or says it skips them (no warning per sync).
    validates = [cmd for where, cmd in all_invocations() if cmd[1] == "validate" and where != ".pre-commit-hooks.yaml"]
    assert validates and all(("--crds" in cmd) != ("--skip-schema" in cmd) for cmd in validates), validates
    # Nothing installs gpustack-render by its bare name (no such package is published).
    texts = [PLUGIN, REPO_SERVER_PATCH, APPLICATION, FLUX, WORKFLOW, DOCKERFILE]
    for path in texts:
        for line in path.read_text(encoding="utf-8").splitlines():
            assert not re.search(r"pip3? install\s+(-\S+\s+)*[\"']?gpustack-render\b(?!\s*@)", line), f"{path}: {line}"


# --- the Argo CD plugin image, read statically (no Docker here) -----------------------------------

def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, rest = (pending + stripped).partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    return instructions


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for keyword, rest in dockerfile_instructions():
        if keyword == "ENV":
            env.update(pair.split("=", 1) for pair in shlex.split(rest))
    return env


def build_image_files(root: Path) -> None:
    """Lay out, under `root`, the files the Dockerfile's COPY instructions put into the image."""
    workdir = Path("/")
    for keyword, rest in dockerfile_instructions():
        if keyword == "WORKDIR":
            workdir = workdir / rest
        elif keyword == "COPY":
            *sources, dest = shlex.split(rest)
            assert not any(s.startswith("--") for s in sources), "COPY --from/--chown: extend this reader"
            target = root / (workdir / dest).relative_to("/")
            for source in sources:
                src = REPO / source
                assert src.exists(), f"Dockerfile: COPY {source}: not in the source tree"
                if src.is_dir():   # Docker copies a directory's contents
                    shutil.copytree(src, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    dst = target / src.name if dest.endswith("/") else target
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src, dst)


def test_plugin_image_is_built_from_this_source_tree() -> None:
    instructions = dockerfile_instructions()
    [base] = [rest for keyword, rest in instructions if keyword == "FROM"]
    assert re.fullmatch(r"[\w./-]+:\d+\.\d+\.\d+[\w.-]*(@sha256:[0-9a-f]{64})?", base), \
        f"the base image must be pinned by a full version tag (or digest), not {base!r}"
    copied = [s.rstrip("/") for keyword, rest in instructions if keyword == "COPY" for s in shlex.split(rest)[:-1]]
    assert {"pyproject.toml", "README.md", "gpustack_render", "rules", "templates"} <= set(copied)
    installs = [rest for keyword, rest in instructions if keyword == "RUN" and "pip install" in rest]
    assert installs, "the image installs gpustack-render"
    for rest in installs:
        for match in re.finditer(r"pip3? install((?:\s+[^&;|]+)?)", rest):
            targets = [t for t in shlex.split(match[1]) if not t.startswith("-")]
            assert targets and all(t == "." or t.startswith(("./", "/")) for t in targets), \
                f"pip installs {targets}: only the copied source tree, never a package by name"
    first_install = next(i for i, (k, r) in enumerate(instructions) if k == "RUN" and "pip install" in r)
    last_copy = max(i for i, (k, r) in enumerate(instructions) if k == "COPY"
                    and any(s.rstrip("/") in ("gpustack_render", "rules", "templates") for s in shlex.split(r)[:-1]))
    assert last_copy < first_install, "the source is copied before it is installed"
    users = [rest for keyword, rest in instructions if keyword == "USER"]
    assert users and users[-1] == "999", "Argo CD runs CMP sidecars as uid 999 (numeric for runAsNonRoot)"
    [entrypoint] = [json.loads(rest) for keyword, rest in instructions if keyword == "ENTRYPOINT"]
    [sidecar] = load(REPO_SERVER_PATCH)["spec"]["template"]["spec"]["containers"]
    assert entrypoint == sidecar["command"] == ["/var/run/argocd/argocd-cmp-server"]
    assert sidecar["securityContext"] == {"runAsNonRoot": True, "runAsUser": 999}
    # Every variable the plugin reads is set by the image.
    used = set(re.findall(r"\$\{?(GPUSTACK_RENDER_\w+)", "\n".join(plugin_scripts().values())))
    assert used and used <= set(image_env()), used - set(image_env())
    # The build context sends what the image copies (the Dockerfile-specific ignore file re-includes it).
    allowed = {line[1:].rstrip("/") for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
               if line.startswith("!")}
    assert set(copied) <= allowed, set(copied) - allowed


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


def _plugin_env(image: Path) -> dict[str, str]:
    """The sidecar's environment: the image's ENV, its paths pointing into the laid-out image files."""
    build_image_files(image)
    env = _env()
    for name, value in image_env().items():
        env[name] = str(image / value.lstrip("/")) if value.startswith("/") else value
    return env


def _sync(app: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """What Argo CD does for one manifest request: init, then generate, in the same source copy."""
    scripts = plugin_scripts()
    init = _sh(scripts["init"], app, env)
    return init, (_sh(scripts["generate"], app, env) if init.returncode == 0 else init)


def _render(*args: str) -> str:
    proc = invoke("render", *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _hook(hook_id: str, cwd: Path, args: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a pre-commit hook as pre-commit does: its entry (split like a shell) with its args (or
    ``args``, as a .pre-commit-config.yaml overrides them) appended, from the repository root."""
    [hook] = [h for h in load(HOOKS) if h["id"] == hook_id]
    argv = shlex.split(hook["entry"]) + (list(hook.get("args", [])) if args is None else args)
    return subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300)


def _with_overlay(rules: Path, overlay: Path, target: Path) -> Path:
    shutil.copytree(rules, target)
    shutil.copyfile(overlay, target / "output.yaml")
    return target


def test_argocd_plugin_renders_with_the_overlay_and_prints_only_manifests(tmp_path: Path) -> None:
    env = _plugin_env(tmp_path / "image")
    app = tmp_path / "app"
    shutil.copytree(DEMO, app / "snapshot")
    init, generate = _sync(app, env)
    assert init.returncode == 0 and init.stdout == "", init.stdout + init.stderr
    assert "schema validation skipped" not in init.stderr, f"init must not warn on every sync: {init.stderr}"
    assert generate.returncode == 0, generate.stderr
    # Exactly the render with the built-in rules plus the Argo CD overlay.
    assert generate.stdout == _render(str(DEMO), "--rules", str(_with_overlay(REPO / "rules", ARGOCD_OUTPUT,
                                                                             tmp_path / "expected-rules")))
    docs = list(yaml.safe_load_all(generate.stdout))
    assert docs and all({"apiVersion", "kind", "metadata"} <= set(d) for d in docs)
    # With a rules/ directory in the application, the plugin uses it (still with the overlay).
    shutil.copytree(REPO / "rules", app / "rules")
    naming = app / "rules" / "naming.yaml"
    naming.write_text(naming.read_text(encoding="utf-8").replace('topology: "gpustack-{profile}"',
                                                                   'topology: "topo-{profile}"'), encoding="utf-8")
    init, generate = _sync(app, env)
    assert generate.returncode == 0, generate.stderr
    assert "name: topo-fnv64-" in generate.stdout
    # The application's copy of the built-in output.yaml is fine; its own Output rules are an error
    # (the plugin's come from its image), never silently replaced.
    assert filecmp.cmp(app / "rules" / "output.yaml", REPO / "rules" / "output.yaml", shallow=False)
    (app / "rules" / "output.yaml").write_text(load_text(FLUX_OUTPUT), encoding="utf-8")
    init, _ = _sync(app, env)
    assert init.returncode == 2 and init.stdout == "" and "rules/output.yaml: the plugin renders with its own" \
        in init.stderr, init.stderr
    shutil.copyfile(REPO / "rules" / "output.yaml", app / "rules" / "output.yaml")
    # A broken snapshot fails the sync (non-zero) at init, with the error on stderr only.
    (app / "snapshot" / "broken.yaml").write_text("kind: [\n", encoding="utf-8")
    init, _ = _sync(app, env)
    assert init.returncode == 2 and init.stdout == "" and "invalid YAML" in init.stderr


def test_argocd_plugin_checks_schemas_when_the_application_ships_crds(tmp_path: Path) -> None:
    if not (CRDS / "kueue").is_dir():
        pytest.skip(f"the shared CRDs are not at {CRDS} (tests read them from ../shared/crds)")
    env = _plugin_env(tmp_path / "image")
    app = tmp_path / "app"
    shutil.copytree(DEMO, app / "snapshot")
    shutil.copytree(CRDS, app / "crds")
    init, generate = _sync(app, env)
    assert init.returncode == 0 and generate.returncode == 0, init.stdout + init.stderr + generate.stderr
    assert "schema validation skipped" not in init.stderr, init.stderr
    # The schema check runs: a ClusterQueue value the CRD's enum does not allow fails validation.
    templates = app / "templates"
    shutil.copytree(REPO / "templates", templates)
    template = templates / "ClusterQueue.yaml"
    text = template.read_text(encoding="utf-8")
    assert "whenCanPreempt: MayStopSearch" in text
    template.write_text(text.replace("whenCanPreempt: MayStopSearch", "whenCanPreempt: Sometimes"), encoding="utf-8")
    proc = invoke("validate", "snapshot", "--rules", ".gpustack-render/rules", "--templates", "templates",
                  "--crds", "crds", cwd=app, env=env, replace_env=True)
    assert proc.returncode == 1 and "whenCanPreempt" in proc.stdout, proc.stdout + proc.stderr


def test_argocd_overlay_annotates_every_instance_type_and_nothing_else(tmp_path: Path) -> None:
    env = _plugin_env(tmp_path / "image")
    app = tmp_path / "app"
    shutil.copytree(DEMO, app / "snapshot")
    _, generate = _sync(app, env)
    assert generate.returncode == 0, generate.stderr
    wanted = load(ARGOCD_OUTPUT)["kinds"]["InstanceType"]["annotations"]
    docs = list(yaml.safe_load_all(generate.stdout))
    assert any(d["kind"] == "InstanceType" for d in docs), "the demo renders derived InstanceTypes"
    for doc in docs:
        annotations = doc["metadata"].get("annotations") or {}
        if doc["kind"] == "InstanceType":
            assert wanted.items() <= annotations.items(), doc["metadata"]["name"]
        else:
            assert not set(wanted) & set(annotations), f"{doc['kind']}/{doc['metadata']['name']}"


def test_pre_commit_validate_hook_runs_on_a_repo_layout(tmp_path: Path) -> None:
    shutil.copytree(DEMO, tmp_path / "snapshot")
    shutil.copytree(REPO / "rules", tmp_path / "rules")
    proc = _hook("gpustack-render-validate", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    queues = tmp_path / "rules" / "queues.yaml"
    queues.write_text(queues.read_text(encoding="utf-8").replace("maxFlavorsPerGroup: 64", "maxFlavorsPerGroup: 1"),
                      encoding="utf-8")
    proc = _hook("gpustack-render-validate", tmp_path)
    assert proc.returncode == 1 and "plan refused (TooManyFlavors" in proc.stdout, proc.stdout + proc.stderr


def test_pre_commit_render_hook_keeps_the_directory_in_step(tmp_path: Path) -> None:
    shutil.copytree(DEMO, tmp_path / "snapshot")
    shutil.copytree(REPO / "rules", tmp_path / "rules")
    render = next(cmd for cmd in hook_commands() if cmd[1] == "render")
    target = tmp_path / render[render.index("-o") + 1]
    proc = _hook("gpustack-render-render", tmp_path)
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout + proc.stderr
    first = {p.name: p.read_bytes() for p in target.iterdir()}
    assert "kustomization.yaml" in first and len(first) > 1
    # Unchanged inputs: the same files, byte for byte (pre-commit sees no modification).
    proc = _hook("gpustack-render-render", tmp_path)
    assert proc.returncode == 0 and {p.name: p.read_bytes() for p in target.iterdir()} == first
    # A rules change rewrites the directory (pre-commit then fails the commit, like a formatter).
    naming = tmp_path / "rules" / "naming.yaml"
    naming.write_text(naming.read_text(encoding="utf-8").replace('topology: "gpustack-{profile}"',
                                                                   'topology: "topo-{profile}"'), encoding="utf-8")
    proc = _hook("gpustack-render-render", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert any(name.startswith("topology-topo-fnv64-") for name in (p.name for p in target.iterdir()))


@pytest.mark.parametrize("overlay", [ARGOCD_OUTPUT, FLUX_OUTPUT], ids=lambda p: p.parent.name)
def test_output_overlays_are_valid_rule_files(overlay: Path, tmp_path: Path) -> None:
    rules = _with_overlay(REPO / "rules", overlay, tmp_path / "rules")
    result = invoke("lint", "--rules", str(rules), "--format", "json")
    assert result.exit_code == 0, result.output
    # And a broken overlay is refused, pointing at it (so the check above could fail).
    (rules / "output.yaml").write_text(load_text(overlay).replace("annotations:", "annotation:"), encoding="utf-8")
    result = invoke("lint", "--rules", str(rules))
    assert result.exit_code == 1 and "output.yaml:" in result.output, result.output


# --- overlays: one rule file and one template in the application (issue 24 points 3 and 4) ----------

TOPOLOGY_NAME = 'topology: "gpustack-{profile}"'
LQ_ANCHOR = '  name: "{{ obj.name }}"\n'


def _one_rule_file_and_one_template(app: Path) -> None:
    """rules/ with only naming.yaml (a changed Topology name), templates/ with only LocalQueue.yaml
    (a team label)."""
    (app / "rules").mkdir(parents=True)
    text = load_text(REPO / "rules" / "naming.yaml")
    assert TOPOLOGY_NAME in text
    (app / "rules" / "naming.yaml").write_text(text.replace(TOPOLOGY_NAME, 'topology: "topo-{profile}"'),
                                               encoding="utf-8")
    (app / "templates").mkdir()
    text = load_text(REPO / "templates" / "LocalQueue.yaml")
    assert LQ_ANCHOR in text
    (app / "templates" / "LocalQueue.yaml").write_text(text.replace(LQ_ANCHOR, LQ_ANCHOR + "  labels:\n    team: ml\n"),
                                                        encoding="utf-8")


def _assert_overlays_applied(manifests: str) -> None:
    docs = list(yaml.safe_load_all(manifests))
    queues = [d for d in docs if d["kind"] == "LocalQueue"]
    assert queues and all(q["metadata"]["labels"] == {"team": "ml"} for q in queues)
    assert any(d["kind"] == "Topology" and d["metadata"]["name"].startswith("topo-fnv64-") for d in docs)


def test_argocd_plugin_uses_the_applications_rule_and_template_overlays(tmp_path: Path) -> None:
    env = _plugin_env(tmp_path / "image")
    app = tmp_path / "app"
    shutil.copytree(DEMO, app / "snapshot")
    _one_rule_file_and_one_template(app)
    init, generate = _sync(app, env)
    assert init.returncode == 0 and generate.returncode == 0, init.stderr + generate.stderr
    _assert_overlays_applied(generate.stdout)
    # Exactly the render of the overlay plus the Argo CD Output rules, with the template overlay.
    expected_rules = tmp_path / "expected-rules"
    shutil.copytree(app / "rules", expected_rules)
    shutil.copyfile(ARGOCD_OUTPUT, expected_rules / "output.yaml")
    assert generate.stdout == _render(str(DEMO), "--rules", str(expected_rules), "--templates", str(app / "templates"))
    # The schema check of init renders with the template too: a template the CRD refuses fails the sync.
    if (CRDS / "kueue").is_dir():
        shutil.copytree(CRDS, app / "crds")
        template = app / "templates" / "LocalQueue.yaml"
        template.write_text(load_text(template).replace("spec:\n", "spec:\n  stopPolicy: Sometimes\n"), encoding="utf-8")
        init, _ = _sync(app, env)
        assert init.returncode == 1 and "stopPolicy" in init.stdout, init.stdout + init.stderr


def test_argocd_plugin_compares_output_rules_by_content(tmp_path: Path) -> None:
    env = _plugin_env(tmp_path / "image")
    app = tmp_path / "app"
    shutil.copytree(DEMO, app / "snapshot")
    shutil.copytree(REPO / "rules", app / "rules")
    # docs/rules.md §5: the schemas written beside the rules, every rule file's first line relinked.
    relink = invoke("schema", "-o", str(tmp_path / "gitops-schemas"), "--rules", str(app / "rules"))
    assert relink.exit_code == 0, relink.stderr
    output = app / "rules" / "output.yaml"
    assert not filecmp.cmp(output, REPO / "rules" / "output.yaml", shallow=False)   # the bytes differ
    init, generate = _sync(app, env)
    assert init.returncode == 0 and generate.returncode == 0, init.stderr + generate.stderr
    # A comment of its own, and the file under another name: still the built-in content, accepted.
    output.rename(app / "rules" / "output-rules.yml")
    (app / "rules" / "output-rules.yml").write_text("# ours\n" + load_text(app / "rules" / "output-rules.yml"),
                                                     encoding="utf-8")
    init, generate2 = _sync(app, env)
    assert init.returncode == 0 and generate2.stdout == generate.stdout, init.stderr
    # Other content is refused, naming the file, whatever its name.
    (app / "rules" / "output-rules.yml").write_text(load_text(FLUX_OUTPUT), encoding="utf-8")
    init, _ = _sync(app, env)
    assert init.returncode == 2 and init.stdout == "" and init.stderr.startswith(
        "gpustack-render plugin: error: rules/output-rules.yml: the plugin renders with its own Output rules"), init.stderr


def test_pre_commit_hooks_use_the_applications_templates(tmp_path: Path) -> None:
    shutil.copytree(DEMO, tmp_path / "snapshot")
    _one_rule_file_and_one_template(tmp_path)
    proc = _hook("gpustack-render-render", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rendered = tmp_path / "rendered"
    _assert_overlays_applied("".join("---\n" + p.read_text(encoding="utf-8") for p in sorted(rendered.iterdir())
                                     if p.name != "kustomization.yaml"))
    # A template mistake fails the validate hook (it renders with templates/, not the built-in ones).
    template = tmp_path / "templates" / "LocalQueue.yaml"
    template.write_text(load_text(template).replace('"{{ obj.name }}"', '"{{ obj.nmae }}"', 1), encoding="utf-8")
    proc = _hook("gpustack-render-validate", tmp_path)
    assert proc.returncode == 2 and "LocalQueue.yaml" in proc.stderr, proc.stdout + proc.stderr
    # args that name --templates themselves (another layout) are used as they are, not doubled.
    shutil.move(tmp_path / "templates", tmp_path / "gitops-templates")
    proc = _hook("gpustack-render-render", tmp_path, ["snapshot", "--rules", "rules", "--templates",
                                                      "gitops-templates", "-o", "rendered"])
    assert proc.returncode == 2 and "gitops-templates/LocalQueue.yaml" in proc.stderr, proc.stderr


@pytest.mark.parametrize("content", ["broken", "naming"])
def test_argocd_plugin_never_overwrites_an_applications_output_yaml_it_did_not_check(content: str,
                                                                                     tmp_path: Path) -> None:
    """init writes the plugin's Output rules to rules/output.yaml: an application's file of that name
    that is not the built-in Output rules (it does not parse, or holds another kind) is an error, not
    silently replaced (its Naming rules would have been dropped, or its YAML error never reported)."""
    env = _plugin_env(tmp_path / "image")
    app = tmp_path / "app"
    shutil.copytree(DEMO, app / "snapshot")
    (app / "rules").mkdir()
    text = load_text(REPO / "rules" / "naming.yaml")
    (app / "rules" / "output.yaml").write_text("kind: Output\n  bad: [\n" if content == "broken" else text,
                                               encoding="utf-8")
    init, _ = _sync(app, env)
    assert (init.returncode, init.stdout) == (2, ""), init.stderr
    assert init.stderr.startswith("gpustack-render plugin: error: rules/output.yaml: the plugin writes its own "
                                  "Output rules under this name"), init.stderr
    # Under another name: the Naming rules are the application's; the YAML error is reported where it is.
    (app / "rules" / "output.yaml").rename(app / "rules" / "naming.yaml")
    init, generate = _sync(app, env)
    if content == "naming":
        assert init.returncode == 0 and generate.returncode == 0, init.stderr
    else:
        assert init.returncode == 2 and "naming.yaml:2:" in init.stderr and "invalid YAML" in init.stderr, init.stderr
