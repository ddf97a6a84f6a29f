"""deploy/github-actions/gpustack-render.yml, run as GitHub Actions would run it.

Each job's steps are executed in order in a fresh shallow clone of a local bare repository that plays
`origin` (the GitOps repository): `run:` scripts with `bash --noprofile --norc -eo pipefail` (the
workflow's `shell: bash`), with the workflow, job and step `env` and the `${{ }}` expressions of `env`,
`if:` and `concurrency` evaluated against a GitHub context. `actions/checkout` is the clone,
`actions/setup-python` puts the venv on PATH. Only what needs GitHub or a cluster is stubbed, by scripts
on PATH that record their arguments: `pip` (the pinned requirement is recorded, the venv's
gpustack-render is the one that runs), `gh` (a small issue-comment API keeping its state in a file,
`--jq` through the real jq) and `gpustack-render snapshot` (writes a fixture snapshot instead of
reading a cluster; every other subcommand is the real one). Pushes go to the bare repository.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from cli_invoke import invoke

from gpustack_render.diff.report import HEADING

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / "deploy" / "github-actions" / "gpustack-render.yml"
FLUX_OUTPUT = REPO / "deploy" / "flux" / "rules-output.yaml"
DEMO = REPO / "fixtures" / "demo"
VENV_BIN = Path(sys.executable).parent
GITHUB_REPOSITORY = "platform/cluster-config"
PINNED = "gpustack-render @ git+https://github.com/example/gpustack-render@0123456789abcdef0123456789abcdef01234567"
KUBECONFIG = "apiVersion: v1\nkind: Config\n# a fake kubeconfig from the GPUSTACK_KUBECONFIG secret\n"
GIT_ID = ["-c", "user.name=Admin", "-c", "user.email=admin@example.com"]
ALLOW_LABEL = "gpustack-render/allow-removals"


# --- the GitHub expression language, as far as the workflow uses it --------------------------------

_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<op>==|!=|&&|\|\||!|\(|\))|(?P<name>[A-Za-z_][\w.-]*))\s*")


def evaluate(expression: str, context: dict[str, Any]) -> Any:
    """Evaluate a GitHub Actions expression (`${{ }}` optional) over `context`.

    Supported: string literals, true/false/null, dotted context names (missing ones are null, as in
    GitHub), ==, !=, !, &&, || (value-returning, like GitHub's) and parentheses. Anything else raises,
    so a workflow edit that needs more fails here instead of being misread."""
    text = expression.strip()
    if text.startswith("${{") and text.endswith("}}"):
        text = text[3:-2].strip()
    python: list[str] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise ValueError(f"unsupported expression {expression!r} at {text[pos:]!r}")
        pos = match.end()
        if match["str"]:
            python.append(repr(match["str"][1:-1].replace("''", "'")))
        elif match["op"]:
            python.append({"&&": " and ", "||": " or ", "!": " not "}.get(match["op"], match["op"]))
        elif match["name"] in ("true", "false", "null"):
            python.append({"true": "True", "false": "False", "null": "None"}[match["name"]])
        else:
            python.append(f"_lookup({match['name']!r})")

    def lookup(name: str) -> Any:
        value: Any = context
        for part in name.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value

    return eval("".join(python), {"__builtins__": {}}, {"_lookup": lookup})  # noqa: S307 - tokens checked above


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def substitute(text: str, context: dict[str, Any]) -> str:
    """Replace every `${{ expr }}` in a string, as GitHub does in env values."""
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: _as_text(evaluate(m[1], context)), text)


# --- the stubs -------------------------------------------------------------------------------------

GH_STUB = r'''
"""gh stub: `gh api` over a small issue-comment API; state and every call in $STUB_DIR/gh.json."""
import json, os, re, subprocess, sys
from pathlib import Path

path = Path(os.environ["STUB_DIR"]) / "gh.json"
state = json.loads(path.read_text()) if path.exists() else {"comments": [], "calls": [], "next_id": 1000}
args = sys.argv[1:]
state["calls"].append(args)


def finish(code, out="", err=""):
    path.write_text(json.dumps(state, indent=1))
    sys.stdout.write(out)
    sys.stderr.write(err)
    sys.exit(code)


if not os.environ.get("GH_TOKEN"):
    finish(4, err="gh: To use GitHub CLI in a GitHub Actions workflow, set the GH_TOKEN environment variable.\n")
if args[:1] != ["api"]:
    finish(1, err=f"gh stub: only `gh api` is implemented, not {args}\n")
method, jq, endpoint, fields, i = "GET", None, None, {}, 1
while i < len(args):
    arg = args[i]
    if arg in ("--method", "-X"):
        method, i = args[i + 1], i + 2
    elif arg == "--paginate":
        i += 1
    elif arg in ("--jq", "-q"):
        jq, i = args[i + 1], i + 2
    elif arg in ("-F", "--field"):
        key, value = args[i + 1].split("=", 1)
        fields[key] = Path(value[1:]).read_text() if value.startswith("@") else value
        i += 2
    elif arg.startswith("-"):
        finish(1, err=f"gh stub: unsupported flag {arg}\n")
    else:
        endpoint, i = arg, i + 1
listing = re.fullmatch(r"repos/([^/]+/[^/]+)/issues/(\d+)/comments", endpoint or "")
single = re.fullmatch(r"repos/([^/]+/[^/]+)/issues/comments/(\d+)", endpoint or "")
commit_pulls = re.fullmatch(r"repos/([^/]+/[^/]+)/commits/([0-9a-f]{40})/pulls", endpoint or "")
if commit_pulls and method == "GET":  # the pull requests a commit belongs to (state["pulls"][sha])
    result = [{"number": n, "labels": [{"name": label} for label in labels]}
              for n, labels in state.get("pulls", {}).get(commit_pulls[2], [])]
elif listing and method == "GET":
    result = [{"id": c["id"], "body": c["body"]} for c in state["comments"]
              if (c["repo"], c["issue"]) == (listing[1], int(listing[2]))]
elif listing and method == "POST" and set(fields) == {"body"}:
    result = {"id": state["next_id"], "repo": listing[1], "issue": int(listing[2]), "body": fields["body"]}
    state["next_id"] += 1
    state["comments"].append(result)
elif single and method == "PATCH" and set(fields) == {"body"}:
    found = [c for c in state["comments"] if c["repo"] == single[1] and c["id"] == int(single[2])]
    if not found:
        finish(1, err="gh: Not Found (HTTP 404)\n")
    found[0]["body"] = fields["body"]
    result = found[0]
else:
    finish(1, err=f"gh stub: unsupported call {method} {endpoint} {sorted(fields)}\n")
out = json.dumps(result)
if jq is not None:
    proc = subprocess.run(["jq", "-r", jq], input=out, capture_output=True, text=True)
    if proc.returncode:
        finish(1, err=proc.stderr)
    out = proc.stdout
finish(0, out)
'''

SNAPSHOT_STUB = r'''
"""`gpustack-render snapshot` stub: no cluster; records the call and the kubeconfig it was given,
and writes $STUB_DIR/cluster.json where -o points."""
import json, os, shutil, stat, sys
from pathlib import Path

args = sys.argv[2:]
stub = Path(os.environ["STUB_DIR"])
kubeconfig = Path(args[args.index("--kubeconfig") + 1])
target = Path(args[args.index("-o") + 1])
record = {"args": args, "kubeconfig": kubeconfig.read_text(), "mode": oct(stat.S_IMODE(kubeconfig.stat().st_mode))}
with open(stub / "snapshot.log", "a") as log:
    log.write(json.dumps(record) + "\n")
target.parent.mkdir(parents=True, exist_ok=True)
shutil.copyfile(stub / "cluster.json", target)
'''


def _write_executable(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


# --- the runner ------------------------------------------------------------------------------------

@dataclass
class Event:
    """What starts a run: the event name, the branch, dispatch inputs, the pull request."""
    name: str
    branch: str = "main"
    inputs: dict[str, Any] = field(default_factory=dict)
    pr_number: int | None = None
    pr_head_repo: str = GITHUB_REPOSITORY
    pr_labels: tuple[str, ...] = ()


@dataclass
class JobRun:
    ok: bool
    steps: list[tuple[str, str]]          # (step name, combined output) of every step that ran
    failed_step: str | None
    summary: str
    workspace: Path

    def log(self) -> str:
        return "".join(f"::group::{name}\n{out}::endgroup::\n" for name, out in self.steps)

    def output(self, step: str) -> str:
        [out] = [out for name, out in self.steps if name == step]
        return out


class Actions:
    """A local stand-in for GitHub Actions and the GitOps repository it works on."""

    def __init__(self, tmp: Path) -> None:
        if not shutil.which("jq"):
            pytest.skip("jq is not installed: the gh stub evaluates the workflow's --jq filters with it")
        self.tmp = tmp
        self.workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
        self.workflow["env"]["GPUSTACK_RENDER"] = PINNED   # what a user does first: pin it
        self.remote = tmp / "origin.git"
        self.stub = tmp / "stub"
        self.bin = self.stub / "bin"
        self.bin.mkdir(parents=True)
        self.home = tmp / "home"
        self.home.mkdir()
        self.runs = 0
        self.variables: dict[str, str] = {}  # the repository's configuration variables (vars.*)
        self._git(tmp, "init", "--quiet", "--bare", "--initial-branch=main", str(self.remote))
        _write_executable(self.bin / "pip", '#!/bin/sh\nprintf \'%s\\n\' "$*" >> "$STUB_DIR/pip.log"\n')
        _write_executable(self.bin / "gh", f"#!{sys.executable}\n{GH_STUB}")
        _write_executable(self.stub / "snapshot.py", f"#!{sys.executable}\n{SNAPSHOT_STUB}")
        real = shutil.which("gpustack-render", path=str(VENV_BIN))
        assert real, "the gpustack-render console script is not installed in the venv"
        _write_executable(self.bin / "gpustack-render",
                          f'#!/bin/sh\nif [ "$1" = snapshot ]; then exec "{self.stub}/snapshot.py" "$@"; fi\n'
                          # a bug of ours in the guard run (exit 3), when a test asks for one
                          f'case " $* " in *" --guard-removals "*) if [ -e "{self.stub}/guard-crashes" ]; then\n'
                          f'  echo "gpustack-render: internal error (a bug): please report it" >&2; exit 3; fi;; esac\n'
                          f'exec "{real}" "$@"\n')

    # the GitOps repository ------------------------------------------------------------------------

    def _git(self, cwd: Path, *args: str) -> str:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                              env=self._base_env())
        assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
        return proc.stdout

    def commit(self, message: str, change: Callable[[Path], None], branch: str = "main",
               base: str = "main") -> None:
        """Commit `change` (a function editing a checkout) on `branch`, starting from `base`."""
        self.runs += 1
        work = self.tmp / f"admin-{self.runs}"
        if self.branches():
            self._git(self.tmp, "clone", "--quiet", "--branch", base, str(self.remote), str(work))
        else:
            work.mkdir()
            self._git(work, "init", "--quiet", "--initial-branch=main")
        change(work)
        self._git(work, "add", "-A")
        self._git(work, *GIT_ID, "commit", "--quiet", "-m", message)
        self._git(work, "push", "--quiet", str(self.remote), f"HEAD:refs/heads/{branch}")

    def branches(self) -> list[str]:
        return self._git(self.remote, "for-each-ref", "--format=%(refname:short)", "refs/heads").split()

    def log(self, branch: str = "main") -> list[str]:
        return self._git(self.remote, "log", "--format=%an: %s", branch).splitlines()

    def files(self, commit: str, under: str) -> dict[str, bytes]:
        names = self._git(self.remote, "ls-tree", "-r", "--name-only", commit, "--", under).split()
        return {name: subprocess.run(["git", "show", f"{commit}:{name}"], cwd=self.remote, capture_output=True,
                                     check=True).stdout for name in names}

    def changed_paths(self, commit: str = "main") -> list[str]:
        return self._git(self.remote, "diff-tree", "--no-commit-id", "--name-only", "-r", commit).split()

    # the stubs' records ----------------------------------------------------------------------------

    def gh_state(self) -> dict[str, Any]:
        path = self.stub / "gh.json"
        return json.loads(path.read_text()) if path.exists() else {"comments": [], "calls": []}

    def stub_log(self, name: str) -> list[str]:
        path = self.stub / name
        return path.read_text().splitlines() if path.exists() else []

    def set_cluster(self, snapshot_text: str) -> None:
        (self.stub / "cluster.json").write_text(snapshot_text, encoding="utf-8")

    # running ---------------------------------------------------------------------------------------

    def _base_env(self) -> dict[str, str]:
        return {"PATH": os.pathsep.join([str(self.bin), str(VENV_BIN), os.environ.get("PATH", "/usr/bin:/bin")]),
                "HOME": str(self.home), "LANG": "C.UTF-8", "GIT_CONFIG_NOSYSTEM": "1", "STUB_DIR": str(self.stub),
                "GIT_TERMINAL_PROMPT": "0"}

    def context(self, event: Event) -> dict[str, Any]:
        pull_request = None
        if event.pr_number is not None:
            pull_request = {"number": event.pr_number, "head": {"repo": {"full_name": event.pr_head_repo}},
                            "labels": [{"name": label} for label in event.pr_labels]}
        ref = f"refs/pull/{event.pr_number}/merge" if event.name == "pull_request" else f"refs/heads/{event.branch}"
        return {"github": {"event_name": event.name, "ref": ref, "repository": GITHUB_REPOSITORY,
                           "token": "ghs_stub-token", "event": {"pull_request": pull_request}},
                "inputs": dict(event.inputs), "secrets": {"GPUSTACK_KUBECONFIG": KUBECONFIG},
                "vars": dict(self.variables)}

    def jobs_for(self, event: Event) -> list[str]:
        context = self.context(event)
        return [name for name, job in self.workflow["jobs"].items() if evaluate(job.get("if", "true"), context)]

    def run(self, job_name: str, event: Event) -> JobRun:
        """Run one job of the workflow for `event`, step by step, stopping at the first failure."""
        assert job_name in self.jobs_for(event), f"{job_name} does not run on {event}"
        job = self.workflow["jobs"][job_name]
        context = self.context(event)
        self.runs += 1
        run_dir = self.tmp / f"run-{self.runs}"
        workspace, temp = run_dir / "workspace", run_dir / "runner-temp"
        temp.mkdir(parents=True)
        files = {name: run_dir / name for name in ("output", "env", "summary")}
        for path in files.values():
            path.touch()
        event_file = run_dir / "event.json"  # the webhook payload, as $GITHUB_EVENT_PATH holds it
        event_file.write_text(json.dumps(context["github"]["event"]), encoding="utf-8")
        sha = self._git(self.remote, "rev-parse", self._ref_of(event)).strip()
        env = self._base_env()
        env.update(GITHUB_ACTIONS="true", CI="true", GITHUB_EVENT_NAME=event.name,
                   GITHUB_REF=context["github"]["ref"], GITHUB_REPOSITORY=GITHUB_REPOSITORY,
                   GITHUB_WORKSPACE=str(workspace), RUNNER_TEMP=str(temp), GITHUB_OUTPUT=str(files["output"]),
                   GITHUB_ENV=str(files["env"]), GITHUB_STEP_SUMMARY=str(files["summary"]),
                   GITHUB_EVENT_PATH=str(event_file), GITHUB_SHA=sha)
        for scope in (self.workflow.get("env", {}), job.get("env", {})):
            env.update({k: substitute(str(v), context) for k, v in scope.items()})
        shell = self.workflow.get("defaults", {}).get("run", {}).get("shell", "bash")
        assert shell == "bash", f"the runner here implements `shell: bash`, not {shell}"
        done: list[tuple[str, str]] = []
        for step in job["steps"]:
            name = step.get("name") or step.get("uses") or step["run"].splitlines()[0]
            if "if" in step and not evaluate(step["if"], context):
                continue
            if "uses" in step:
                out = self._action(step, event, workspace)
                done.append((name, out))
                continue
            assert "${{" not in step["run"], f"{name}: expressions belong in env, not in the script (injection)"
            step_env = {**env, **{k: substitute(str(v), context) for k, v in step.get("env", {}).items()}}
            step_env.update(_read_env_file(files["env"]))
            proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                                  cwd=workspace, env=step_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, timeout=300)
            done.append((name, proc.stdout))
            if proc.returncode != 0:
                return JobRun(False, done, name, files["summary"].read_text(), workspace)
        return JobRun(True, done, None, files["summary"].read_text(), workspace)

    @staticmethod
    def _ref_of(event: Event) -> str:
        return f"pr-{event.pr_number}" if event.name == "pull_request" else event.branch

    def merged_pull_request(self, number: int, labels: tuple[str, ...], commit: str = "main") -> None:
        """Record that ``commit`` came from pull request ``number`` carrying ``labels`` (the gh stub
        answers ``repos/R/commits/SHA/pulls`` with it)."""
        sha = self._git(self.remote, "rev-parse", commit).strip()
        path = self.stub / "gh.json"
        state = json.loads(path.read_text()) if path.exists() else {"comments": [], "calls": [], "next_id": 1000}
        state.setdefault("pulls", {}).setdefault(sha, []).append([number, list(labels)])
        path.write_text(json.dumps(state, indent=1))

    def _action(self, step: dict[str, Any], event: Event, workspace: Path) -> str:
        action = step["uses"].split("@")[0]
        if action == "actions/checkout":
            branch = self._ref_of(event)
            self._git(self.tmp, "clone", "--quiet", "--depth", "1", "--branch", branch,
                      f"file://{self.remote}", str(workspace))
            return f"checked out {branch} at {self._git(workspace, 'rev-parse', '--short', 'HEAD')}"
        if action == "actions/setup-python":
            assert str(step["with"]["python-version"]).startswith("3."), step
            return f"python {sys.version.split()[0]} from {VENV_BIN}\n"
        raise AssertionError(f"the workflow uses {step['uses']}, which this runner does not provide")


def _read_env_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {k: v for k, v in pairs}


# --- fixtures --------------------------------------------------------------------------------------

def demo_snapshot(drop: frozenset[str] = frozenset()) -> str:
    """The demo snapshot as `gpustack-render snapshot` writes it (one JSON List), without the Nodes
    and Devices named in `drop`."""
    items: list[dict[str, Any]] = []
    for path in sorted(DEMO.iterdir()):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            items.extend(doc["items"] if doc and doc.get("kind", "").endswith("List") else [doc] if doc else [])
    kept = [i for i in items if not (i["kind"] in ("Node", "Devices") and i["metadata"]["name"] in drop)]
    assert len(kept) == len(items) - 2 * len(drop), "each dropped name must be one Node and its Devices"
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": kept}, indent=2) + "\n"


def gitops_rules(target: Path) -> None:
    """The documented rules layout: the project's rules/, with the Flux output overlay as output.yaml."""
    shutil.copytree(REPO / "rules", target)
    shutil.copyfile(FLUX_OUTPUT, target / "output.yaml")


def gitops_repo(snapshot: str | None) -> Callable[[Path], None]:
    def change(work: Path) -> None:
        gitops_rules(work / "gpustack" / "rules")
        if snapshot is not None:
            (work / "gpustack" / "snapshot").mkdir(parents=True)
            (work / "gpustack" / "snapshot" / "cluster.json").write_text(snapshot, encoding="utf-8")
    return change


def expected_render(tmp: Path, snapshot: str, rules_change: Callable[[Path], None] | None = None) -> dict[str, bytes]:
    """What `render -o gpustack/rendered` gives for `snapshot`, rendered independently of the workflow."""
    base = Path(tempfile.mkdtemp(prefix="expected-", dir=tmp))
    (base / "gpustack" / "snapshot").mkdir(parents=True)
    (base / "gpustack" / "snapshot" / "cluster.json").write_text(snapshot, encoding="utf-8")
    gitops_rules(base / "gpustack" / "rules")
    if rules_change:
        rules_change(base)
    # In process (the workflow's own steps run the real console script; tests/test_smoke.py checks
    # that both give the same bytes): a child process here cost a third of a second per call.
    proc = invoke("render", "gpustack/snapshot", "--rules", "gpustack/rules", "-o", "gpustack/rendered", cwd=base)
    assert proc.returncode == 0, proc.stderr
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted((base / "gpustack" / "rendered").rglob("*"))
            if p.is_file()}


def rename_topology(work: Path) -> None:
    naming = work / "gpustack" / "rules" / "naming.yaml"
    text = naming.read_text(encoding="utf-8")
    assert 'topology: "gpustack-{profile}"' in text
    naming.write_text(text.replace('topology: "gpustack-{profile}"', 'topology: "topo-{profile}"'), encoding="utf-8")


def assert_ok(run: JobRun) -> None:
    """A job that must succeed; its log is the failure message (which step, what it printed)."""
    assert run.ok, run.log()


@pytest.fixture
def actions(tmp_path: Path) -> Actions:
    return Actions(tmp_path)


# --- tests -----------------------------------------------------------------------------------------

def test_each_event_runs_the_job_it_documents(actions: Actions) -> None:
    assert actions.jobs_for(Event("pull_request", pr_number=1)) == ["pull-request"]
    assert actions.jobs_for(Event("push")) == ["render"]
    assert actions.jobs_for(Event("schedule")) == ["snapshot"]
    assert actions.jobs_for(Event("workflow_dispatch", inputs={"snapshot": True})) == ["snapshot"]
    assert actions.jobs_for(Event("workflow_dispatch", inputs={"snapshot": False})) == ["render"]
    # Runs on main share one concurrency group (queued, never cancelled); pull requests one per ref.
    group = actions.workflow["concurrency"]["group"]
    assert substitute(group, actions.context(Event("push"))) == substitute(group, actions.context(Event("schedule")))
    assert substitute(group, actions.context(Event("pull_request", pr_number=3))).endswith("refs/pull/3/merge")
    cancel = actions.workflow["concurrency"]["cancel-in-progress"]
    assert substitute(cancel, actions.context(Event("push"))) == "false"


def test_every_job_installs_the_pinned_requirement_and_refuses_the_placeholder(actions: Actions) -> None:
    placeholder = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["env"]["GPUSTACK_RENDER"]
    assert re.fullmatch(r"gpustack-render @ git\+https://github\.com/OWNER/gpustack-render@[A-Z-]+", placeholder)
    for name, job in actions.workflow["jobs"].items():
        installs = [s["run"] for s in job["steps"] if "pip install" in s.get("run", "")]
        assert installs == [next(s["run"] for s in job["steps"] if "pip install" in s.get("run", ""))], name
        assert 'pip install "$GPUSTACK_RENDER"' in installs[0], f"{name} must install the pinned requirement"
    actions.commit("gpustack: snapshot and rules", gitops_repo(demo_snapshot()))
    actions.workflow["env"]["GPUSTACK_RENDER"] = placeholder
    run = actions.run("render", Event("push"))
    assert not run.ok and run.failed_step == "Install gpustack-render (pinned)"
    assert "::error::pin GPUSTACK_RENDER" in run.steps[-1][1]
    assert actions.stub_log("pip.log") == [] and actions.log() == ["Admin: gpustack: snapshot and rules"]


def test_first_run_bootstraps_the_render_then_commits_only_changes(actions: Actions, tmp_path: Path) -> None:
    snapshot = demo_snapshot()
    actions.commit("gpustack: snapshot and rules", gitops_repo(snapshot))
    run = actions.run("render", Event("push"))
    assert run.ok, run.log()
    assert actions.stub_log("pip.log") == [f"install {PINNED}"]
    source = actions._git(actions.remote, "rev-parse", "--short", "main~1").strip()
    assert actions.log() == [f"gpustack-render: gpustack: render {source}", "Admin: gpustack: snapshot and rules"]
    expected = expected_render(tmp_path, snapshot)
    assert actions.files("main", "gpustack/rendered") == expected
    assert set(actions.changed_paths()) == set(expected) and "gpustack/rendered/kustomization.yaml" in expected
    assert "Committed " in run.steps[-1][1]
    # Nothing changed: no commit.
    again = actions.run("render", Event("push"))
    assert again.ok and "The committed render is up to date." in again.steps[-1][1]
    assert len(actions.log()) == 2
    # A rules change merged to main: the render is committed again, with exactly the change. Renaming
    # the only Topology removes it (the removal guard): the pull request carried the allow label.
    actions.commit("rules: rename topologies", rename_topology)
    actions.merged_pull_request(5, (ALLOW_LABEL,))
    run = actions.run("render", Event("push"))
    assert run.ok, run.log()
    assert actions.files("main", "gpustack/rendered") == expected_render(tmp_path, snapshot, rename_topology)
    assert any("topology-topo-fnv64-" in p for p in actions.changed_paths())


def test_bootstrap_keeps_a_placeholder_in_the_render_directory(actions: Actions, tmp_path: Path) -> None:
    """A repository that created gpustack/rendered/ with a .gitkeep (Flux's path must exist) and a README."""
    def with_placeholder(work: Path) -> None:
        gitops_repo(demo_snapshot())(work)
        (work / "gpustack" / "rendered").mkdir()
        (work / "gpustack" / "rendered" / ".gitkeep").write_text("")
        (work / "gpustack" / "rendered" / "README.md").write_text("Written by CI: do not edit.\n")

    actions.commit("gpustack: snapshot, rules, render directory", with_placeholder)
    run = actions.run("render", Event("push"))
    assert run.ok, run.log()
    files = actions.files("main", "gpustack/rendered")
    assert files.pop("gpustack/rendered/.gitkeep") == b"" and "gpustack/rendered/README.md" in files
    files.pop("gpustack/rendered/README.md")
    assert files == expected_render(tmp_path, demo_snapshot())


def test_a_push_without_any_snapshot_says_how_to_get_one(actions: Actions) -> None:
    actions.commit("gpustack: rules", gitops_repo(None))
    run = actions.run("render", Event("push"))
    assert not run.ok and run.failed_step == "Validate the render"
    assert "::error::no snapshot at gpustack/snapshot yet" in run.steps[-1][1]
    assert actions.log() == ["Admin: gpustack: rules"]


def test_invalid_rules_fail_before_anything_is_committed(actions: Actions) -> None:
    def refuse_plans(work: Path) -> None:
        queues = work / "gpustack" / "rules" / "queues.yaml"
        queues.write_text(queues.read_text(encoding="utf-8").replace("maxFlavorsPerGroup: 64", "maxFlavorsPerGroup: 1"),
                          encoding="utf-8")

    actions.commit("gpustack: snapshot and rules", gitops_repo(demo_snapshot()))
    actions.commit("rules: too few flavors", refuse_plans)
    run = actions.run("render", Event("push"))
    assert not run.ok and run.failed_step == "Validate the render"
    assert "plan refused (TooManyFlavors" in run.steps[-1][1]
    assert [line.split(":")[0] for line in actions.log()] == ["Admin", "Admin"]


def test_pull_request_comment_carries_the_diff_and_is_updated(actions: Actions, tmp_path: Path) -> None:
    actions.commit("gpustack: snapshot and rules", gitops_repo(demo_snapshot()))
    assert_ok(actions.run("render", Event("push")))
    actions.commit("rules: rename topologies", rename_topology, branch="pr-7")
    pr = Event("pull_request", pr_number=7, pr_labels=(ALLOW_LABEL,))  # the only Topology is renamed
    run = actions.run("pull-request", pr)
    assert run.ok, run.log()
    [comment] = actions.gh_state()["comments"]
    assert (comment["repo"], comment["issue"]) == (GITHUB_REPOSITORY, 7)
    body = comment["body"]
    assert body.startswith(f"{HEADING}\n\n**") and "| Topology | `topo-fnv64-" in body
    assert "+  name: topo-fnv64-" in body and "-  name: gpustack-fnv64-" in body   # the unified diff itself
    assert run.summary == body and "Commented on pull request #7." in run.output("Post the diff on the pull request")
    assert "**Removal guard:** allowed by the label `gpustack-render/allow-removals`" in body
    # A second push to the branch: the same comment is updated, no second one.
    def rename_again(work: Path) -> None:
        naming = work / "gpustack" / "rules" / "naming.yaml"
        naming.write_text(naming.read_text(encoding="utf-8").replace('"topo-{profile}"', '"zone-{profile}"'),
                          encoding="utf-8")
    actions.commit("rules: another name", rename_again, branch="pr-7", base="pr-7")
    run = actions.run("pull-request", pr)
    assert run.ok, run.log()
    [updated] = actions.gh_state()["comments"]
    assert updated["id"] == comment["id"] and "| Topology | `zone-fnv64-" in updated["body"]
    methods = [c[c.index("--method") + 1] for c in actions.gh_state()["calls"] if "--method" in c]
    assert methods == ["POST", "PATCH"]
    assert f"Updated comment {comment['id']}." in run.output("Post the diff on the pull request")
    # The pull request never pushes anything.
    assert actions.log("main")[0].startswith("gpustack-render: gpustack: render")
    assert [line.split(":")[0] for line in actions.log("pr-7")][:2] == ["Admin", "Admin"]


def test_pull_request_before_the_first_render_lists_everything_as_added(actions: Actions, tmp_path: Path) -> None:
    actions.commit("gpustack: README", lambda work: (work / "README.md").write_text("cluster config\n"))
    actions.commit("gpustack: snapshot and rules", gitops_repo(demo_snapshot()), branch="pr-1")
    run = actions.run("pull-request", Event("pull_request", pr_number=1))
    assert run.ok, run.log()
    [comment] = actions.gh_state()["comments"]
    objects = len(expected_render(tmp_path, demo_snapshot())) - 1       # minus kustomization.yaml
    summary = comment["body"].split("\n")[2]
    assert summary.startswith(f"**{objects} added") and summary.endswith(", 0 changed, 0 removed**"), summary


def test_pull_request_from_a_fork_keeps_the_diff_in_the_summary(actions: Actions) -> None:
    actions.commit("gpustack: snapshot and rules", gitops_repo(demo_snapshot()))
    actions.commit("rules: rename topologies", rename_topology, branch="pr-2")
    run = actions.run("pull-request", Event("pull_request", pr_number=2, pr_head_repo="someone/cluster-config"))
    assert run.ok, run.log()
    assert actions.gh_state()["calls"] == [] and run.summary.startswith(HEADING)


def test_snapshot_job_commits_the_snapshot_with_its_render(actions: Actions, tmp_path: Path) -> None:
    before = demo_snapshot(drop=frozenset({"node-t4-b"}))
    actions.commit("gpustack: snapshot and rules", gitops_repo(before))
    assert_ok(actions.run("render", Event("push")))
    cluster = demo_snapshot()
    actions.set_cluster(cluster)
    run = actions.run("snapshot", Event("schedule"))
    assert run.ok, run.log()
    [call] = [json.loads(line) for line in actions.stub_log("snapshot.log")]
    assert call["kubeconfig"] == KUBECONFIG and call["mode"] == "0o600"
    assert call["args"][call["args"].index("-o") + 1] == "gpustack/snapshot/cluster.json"
    assert not (run.workspace.parent / "runner-temp" / "kubeconfig").exists(), "the kubeconfig is removed"
    assert actions.log()[0] == "gpustack-render: gpustack: refresh cluster snapshot and render"
    changed = actions.changed_paths()
    assert "gpustack/snapshot/cluster.json" in changed and any(p.startswith("gpustack/rendered/") for p in changed)
    assert actions.files("main", "gpustack/snapshot")["gpustack/snapshot/cluster.json"] == cluster.encode()
    assert actions.files("main", "gpustack/rendered") == expected_render(tmp_path, cluster)
    # The cluster changed nothing the render reads (a Node heartbeat): no commit.
    data = json.loads(cluster)
    data["items"][0]["metadata"]["resourceVersion"] = "999999"
    actions.set_cluster(json.dumps(data))
    run = actions.run("snapshot", Event("schedule"))
    assert run.ok and "The render did not change" in run.steps[-1][1]
    assert actions.log()[0] == "gpustack-render: gpustack: refresh cluster snapshot and render" and len(actions.log()) == 3


def test_snapshot_job_bootstraps_a_repository_with_rules_only(actions: Actions, tmp_path: Path) -> None:
    actions.commit("gpustack: rules", gitops_repo(None))
    actions.set_cluster(demo_snapshot())
    run = actions.run("snapshot", Event("workflow_dispatch", inputs={"snapshot": True}))
    assert run.ok, run.log()
    assert actions.files("main", "gpustack/rendered") == expected_render(tmp_path, demo_snapshot())
    assert "gpustack/snapshot/cluster.json" in actions.changed_paths()


def test_a_run_queued_behind_another_renders_on_its_commit(actions: Actions, tmp_path: Path) -> None:
    """The push job starts from its own (older) commit; the snapshot job pushed meanwhile."""
    actions.commit("gpustack: snapshot and rules", gitops_repo(demo_snapshot(drop=frozenset({"node-t4-b"}))))
    assert_ok(actions.run("render", Event("push")))
    actions.set_cluster(demo_snapshot())
    assert_ok(actions.run("snapshot", Event("schedule")))
    actions.commit("rules: rename topologies", rename_topology)
    actions.merged_pull_request(5, (ALLOW_LABEL,))
    run = actions.run("render", Event("push"))
    assert run.ok, run.log()
    assert actions.files("main", "gpustack/rendered") == expected_render(tmp_path, demo_snapshot(), rename_topology)


def test_rendered_instance_types_carry_the_flux_prune_annotation(actions: Actions) -> None:
    actions.commit("gpustack: snapshot and rules", gitops_repo(demo_snapshot()))
    assert_ok(actions.run("render", Event("push")))
    overlay = yaml.safe_load(FLUX_OUTPUT.read_text(encoding="utf-8"))
    wanted = overlay["kinds"]["InstanceType"]["annotations"]
    assert wanted == {"kustomize.toolkit.fluxcd.io/prune": "disabled"}
    objects = [yaml.safe_load(text) for name, text in actions.files("main", "gpustack/rendered").items()
               if not name.endswith("/kustomization.yaml")]
    instance_types = [o for o in objects if o["kind"] == "InstanceType"]
    assert instance_types, "the demo renders derived InstanceTypes"
    for obj in objects:
        annotations = obj["metadata"].get("annotations") or {}
        if obj["kind"] == "InstanceType":
            assert wanted.items() <= annotations.items(), obj["metadata"]["name"]
        else:
            assert not set(wanted) & set(annotations), f"{obj['kind']}/{obj['metadata']['name']}"


# --- the removal guard (on by default) and the overlay layout ----------------------------------------

def miscounted(snapshot: str, *cards: str) -> str:
    """``snapshot`` with each card's count label spelt out (``four``): the Nodes carrying it give no flavor,
    so their pools' flavors, InstanceTypes and queues leave the render (issue 24 point 5)."""
    for card in cards:
        snapshot, n = re.subn(rf'("acceleratable\.feature\.gpustack\.ai/{card}\.count": )"\d+"', r'\1"four"', snapshot)
        assert n, card
    return snapshot


def test_a_pull_request_removing_most_of_a_kind_fails_after_its_comment(actions: Actions) -> None:
    actions.commit("gpustack: snapshot and rules", gitops_repo(demo_snapshot()))
    assert_ok(actions.run("render", Event("push")))
    snapshot = miscounted(demo_snapshot(), "nvidia-a10g", "nvidia-tesla-t4")   # 2 of 3 ClusterQueues go
    actions.commit("snapshot: typed counts", lambda work: (work / "gpustack" / "snapshot" / "cluster.json")
                   .write_text(snapshot, encoding="utf-8"), branch="pr-3")
    run = actions.run("pull-request", Event("pull_request", pr_number=3))
    assert not run.ok and run.failed_step == "Removal guard", run.log()
    assert "::error::gpustack-render: error: more than half of a kind's owned objects would be removed " \
           "(InstanceType 2 of 3, ClusterQueue 2 of 3, LocalQueue 4 of 6)" in run.output("Removal guard")
    [comment] = actions.gh_state()["comments"]   # the comment is posted all the same, and says why
    assert "**Removal guard:** this check fails until the pull request carries the label " \
           f"`{ALLOW_LABEL}`" in comment["body"] and "ClusterQueue 2 of 3" in comment["body"]
    assert "| ClusterQueue | " in comment["body"]   # the diff itself is still there
    # The label lets it through (labeled runs the check again); the comment says so.
    run = actions.run("pull-request", Event("pull_request", pr_number=3, pr_labels=(ALLOW_LABEL,)))
    assert run.ok, run.log()
    [comment] = actions.gh_state()["comments"]
    assert f"**Removal guard:** allowed by the label `{ALLOW_LABEL}`" in comment["body"]


def test_the_max_removals_variable_caps_the_total(actions: Actions) -> None:
    actions.commit("gpustack: snapshot and rules", gitops_repo(demo_snapshot()))
    assert_ok(actions.run("render", Event("push")))
    snapshot = miscounted(demo_snapshot(), "nvidia-a10g")   # 5 objects, no kind losing more than half
    actions.commit("snapshot: typed count", lambda work: (work / "gpustack" / "snapshot" / "cluster.json")
                   .write_text(snapshot, encoding="utf-8"), branch="pr-4")
    pr = Event("pull_request", pr_number=4)
    assert_ok(actions.run("pull-request", pr))
    actions.variables["GPUSTACK_RENDER_MAX_REMOVALS"] = "2"
    run = actions.run("pull-request", pr)
    assert not run.ok and run.failed_step == "Removal guard", run.log()
    assert "5 owned objects would be removed (ResourceFlavor 1, InstanceType 1, ClusterQueue 1, LocalQueue 2), " \
           "more than --max-removals 2" in run.output("Removal guard")


def test_render_and_snapshot_jobs_refuse_removals_before_they_commit(actions: Actions, tmp_path: Path) -> None:
    actions.commit("gpustack: snapshot and rules", gitops_repo(demo_snapshot()))
    assert_ok(actions.run("render", Event("push")))
    rendered = actions.files("main", "gpustack/rendered")
    bad = miscounted(demo_snapshot(), "nvidia-a10g", "nvidia-tesla-t4")
    # The hourly snapshot: refused, nothing committed.
    actions.set_cluster(bad)
    run = actions.run("snapshot", Event("schedule"))
    assert not run.ok and run.failed_step == "Removal guard", run.log()
    assert "; not committed (run the workflow with allow-removals ticked" in run.output("Removal guard")
    assert len(actions.log()) == 2 and actions.files("main", "gpustack/rendered") == rendered
    # A push without a labelled pull request: refused, nothing committed.
    actions.commit("snapshot: typed counts", lambda work: (work / "gpustack" / "snapshot" / "cluster.json")
                   .write_text(bad, encoding="utf-8"))
    run = actions.run("render", Event("push"))
    assert not run.ok and run.failed_step == "Removal guard", run.log()
    assert actions.log()[0] == "Admin: snapshot: typed counts"
    # "Run workflow" with allow-removals ticked lets it through.
    run = actions.run("render", Event("workflow_dispatch", inputs={"snapshot": False, "allow-removals": True}))
    assert run.ok and "allowed by the allow-removals input" in run.output("Removal guard"), run.log()
    assert actions.files("main", "gpustack/rendered") == expected_render(tmp_path, bad)


def test_the_merged_pull_request_label_lets_the_render_job_through(actions: Actions, tmp_path: Path) -> None:
    actions.commit("gpustack: snapshot and rules", gitops_repo(demo_snapshot()))
    assert_ok(actions.run("render", Event("push")))
    bad = miscounted(demo_snapshot(), "nvidia-a10g", "nvidia-tesla-t4")
    actions.commit("snapshot: typed counts", lambda work: (work / "gpustack" / "snapshot" / "cluster.json")
                   .write_text(bad, encoding="utf-8"))
    actions.merged_pull_request(9, ("documentation",))
    assert actions.run("render", Event("push")).failed_step == "Removal guard"
    actions.merged_pull_request(9, (ALLOW_LABEL,))
    run = actions.run("render", Event("push"))
    assert run.ok and f"allowed by the label {ALLOW_LABEL} of the merged pull request" \
        in run.output("Removal guard"), run.log()
    assert actions.files("main", "gpustack/rendered") == expected_render(tmp_path, bad)


def overlay_repo(snapshot: str) -> Callable[[Path], None]:
    """The overlay layout: gpustack/rules holds the Flux output.yaml and one changed rule file only,
    gpustack/templates one changed template."""
    def change(work: Path) -> None:
        rules = work / "gpustack" / "rules"
        rules.mkdir(parents=True)
        shutil.copyfile(FLUX_OUTPUT, rules / "output.yaml")
        shutil.copyfile(REPO / "rules" / "naming.yaml", rules / "naming.yaml")
        rename_topology(work)
        templates = work / "gpustack" / "templates"
        templates.mkdir()
        text = (REPO / "templates" / "LocalQueue.yaml").read_text(encoding="utf-8")
        anchor = '  name: "{{ obj.name }}"\n'
        assert anchor in text
        (templates / "LocalQueue.yaml").write_text(text.replace(anchor, anchor + "  labels:\n    team: ml\n"),
                                                      encoding="utf-8")
        (work / "gpustack" / "snapshot").mkdir(parents=True)
        (work / "gpustack" / "snapshot" / "cluster.json").write_text(snapshot, encoding="utf-8")
    return change


def test_an_overlay_of_one_rule_file_and_one_template_is_rendered(actions: Actions, tmp_path: Path) -> None:
    actions.commit("gpustack: snapshot, rules and templates overlays", overlay_repo(demo_snapshot()))
    run = actions.run("render", Event("push"))
    assert run.ok, run.log()
    files = actions.files("main", "gpustack/rendered")
    base = tmp_path / "expected-overlay"
    overlay_repo(demo_snapshot())(base)
    proc = invoke("render", "gpustack/snapshot", "--rules", "gpustack/rules", "--templates", "gpustack/templates",
                  "-o", "gpustack/rendered", cwd=base)
    assert proc.returncode == 0, proc.stderr
    assert files == {str(p.relative_to(base)): p.read_bytes()
                     for p in sorted((base / "gpustack" / "rendered").rglob("*")) if p.is_file()}
    queues = [yaml.safe_load(text) for name, text in files.items() if "/localqueue-" in name]
    assert queues and all(q["metadata"]["labels"] == {"team": "ml"} for q in queues)
    assert any("/topology-topo-fnv64-" in name for name in files)   # the one rule file took effect
    assert any(yaml.safe_load(text).get("kind") == "InstanceType" and
               yaml.safe_load(text)["metadata"]["annotations"]["kustomize.toolkit.fluxcd.io/prune"] == "disabled"
               for name, text in files.items() if not name.endswith("kustomization.yaml"))
    # A pull request changing the template: its diff is rendered with both overlays too.
    def relabel(work: Path) -> None:
        template = work / "gpustack" / "templates" / "LocalQueue.yaml"
        template.write_text(template.read_text(encoding="utf-8").replace("team: ml", "team: research"),
                            encoding="utf-8")
    actions.commit("templates: the research team's queues", relabel, branch="pr-6")
    run = actions.run("pull-request", Event("pull_request", pr_number=6))
    assert run.ok, run.log()
    assert f"**0 added, {len(queues)} changed (LocalQueue {len(queues)}), 0 removed**" in run.summary
    assert "+    team: research" in run.summary, run.summary


def test_a_max_removals_variable_that_is_no_number_fails_even_with_the_label(actions: Actions) -> None:
    """GPUSTACK_RENDER_MAX_REMOVALS set to something not a count: every job stops, naming the variable
    (it was a usage error the guard took for a refusal, so the label or the allow-removals input let the
    render through with no guard at all)."""
    actions.commit("gpustack: snapshot and rules", gitops_repo(demo_snapshot()))
    assert_ok(actions.run("render", Event("push")))
    actions.commit("gpustack: a note", lambda work: (work / "gpustack" / "NOTES.md").write_text("note\n", encoding="utf-8"),
                   branch="pr-5")
    actions.variables["GPUSTACK_RENDER_MAX_REMOVALS"] = "ten"
    wanted = "::error::the repository variable GPUSTACK_RENDER_MAX_REMOVALS must be a whole number of objects, not 'ten'"
    run = actions.run("pull-request", Event("pull_request", pr_number=5, pr_labels=(ALLOW_LABEL,)))
    assert not run.ok and run.failed_step == "Diff against the committed render", run.log()
    assert wanted in run.output("Diff against the committed render")
    run = actions.run("render", Event("workflow_dispatch", inputs={"snapshot": False, "allow-removals": True}))
    assert not run.ok and run.failed_step == "Removal guard" and wanted in run.output("Removal guard"), run.log()
    actions.variables["GPUSTACK_RENDER_MAX_REMOVALS"] = "10"
    assert_ok(actions.run("pull-request", Event("pull_request", pr_number=5)))


def test_a_crash_of_the_removal_guard_is_never_let_through_by_the_label(actions: Actions) -> None:
    """The guard's refusal is exit 2; an exit 3 (a bug of ours) is not a refusal, so neither the
    label nor the allow-removals input lets it through: the job fails with the tool's own line."""
    actions.commit("gpustack: snapshot and rules", gitops_repo(demo_snapshot()))
    assert_ok(actions.run("render", Event("push")))
    actions.commit("gpustack: a note", lambda work: (work / "gpustack" / "NOTES.md").write_text("note\n", encoding="utf-8"),
                   branch="pr-6")
    (actions.stub / "guard-crashes").touch()
    run = actions.run("pull-request", Event("pull_request", pr_number=6, pr_labels=(ALLOW_LABEL,)))
    assert not run.ok and run.failed_step == "Diff against the committed render", run.log()
    assert "internal error" in run.output("Diff against the committed render")
    run = actions.run("render", Event("workflow_dispatch", inputs={"snapshot": False, "allow-removals": True}))
    assert not run.ok and run.failed_step == "Removal guard", run.log()
    assert "internal error" in run.output("Removal guard") and "allowed" not in run.output("Removal guard")
    (actions.stub / "guard-crashes").unlink()
    assert_ok(actions.run("pull-request", Event("pull_request", pr_number=6)))
