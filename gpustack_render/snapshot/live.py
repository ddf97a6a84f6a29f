"""``snapshot``: capture from a live cluster exactly the objects the renderer (and ``diff``) read.

Uses the official ``kubernetes`` client with ``_preload_content=False`` so objects stay the raw
JSON the API server sent (what ``kubectl get -o json`` prints), never round-tripped through the
client's typed models, which drop unknown fields and rename others. Lists are paged with
``limit``/``continue`` so a 10,000-Node cluster is never one huge response. The settings Secret is
cut down to the settings keys: a snapshot is committed to Git, Secret data beyond that is not.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable

import click

from gpustack_render.errors import Diagnostics, Problem, UserError

CONNECT_TIMEOUT_S = 10
READ_TIMEOUT_S = 120


KUEUE_GROUP = "kueue.x-k8s.io"
NFD_GROUP = "nfd.k8s-sigs.io"
# The versions of each API group whose objects this tool reads (inputs.md §1). ``snapshot`` lists a
# kind at the first of these in the server's order of preference (discovery's preferredVersion
# first), so a cluster serving only an older or only a newer one of them is captured all the same.
KUEUE_VERSIONS = ("v1beta2", "v1beta1")
WORKER_VERSIONS = ("v1", "v1alpha1")
NFD_VERSIONS = ("v1alpha1",)


@dataclass(frozen=True)
class Resource:
    kind: str
    group: str
    versions: tuple[str, ...]  # the versions this tool reads; ``version`` is the one listed
    plural: str
    namespace: str | None = None  # list only this namespace (None: the whole cluster)
    required: bool = False  # every Kubernetes API serves it: a 404 means the server is not one
    prune: Callable[[dict[str, Any]], dict[str, Any]] | None = None  # keep only the fields read
    version: str = ""

    @property
    def api_version(self) -> str:
        version = self.version or self.versions[0]
        return f"{self.group}/{version}" if self.group else version

    @property
    def what(self) -> str:
        return f"list {self.plural}" + (f" in namespace {self.namespace}" if self.namespace else "")


def resources(worker_group: str, node_feature_namespace: str) -> tuple[Resource, ...]:
    """What ``snapshot`` lists, in order: the operator's kinds in ``worker_group`` and the NodeFeatures
    in ``node_feature_namespace`` (the rules' Vocabulary ``workerApiGroup`` and ``nodeFeatureNamespace``)."""
    from gpustack_render.snapshot.live_workloads import prune_workload
    return (
        Resource("Node", "", ("v1",), "nodes", required=True),
        Resource("Namespace", "", ("v1",), "namespaces", required=True),
        Resource("Devices", worker_group, WORKER_VERSIONS, "devices"),
        Resource("InstanceType", worker_group, WORKER_VERSIONS, "instancetypes"),
        Resource("Topology", KUEUE_GROUP, KUEUE_VERSIONS, "topologies"),
        Resource("AdmissionCheck", KUEUE_GROUP, KUEUE_VERSIONS, "admissionchecks"),
        Resource("ResourceFlavor", KUEUE_GROUP, KUEUE_VERSIONS, "resourceflavors"),
        Resource("ClusterQueue", KUEUE_GROUP, KUEUE_VERSIONS, "clusterqueues"),
        Resource("LocalQueue", KUEUE_GROUP, KUEUE_VERSIONS, "localqueues"),
        Resource("Workload", KUEUE_GROUP, KUEUE_VERSIONS, "workloads", prune=prune_workload),
        Resource("NodeFeature", NFD_GROUP, NFD_VERSIONS, "nodefeatures", node_feature_namespace),
    )


# --------------------------------------------------------------------------------------------
# The kubeconfig
# --------------------------------------------------------------------------------------------


def _kubeconfig_paths(kubeconfig: Path | None) -> list[Path]:
    """The files the client would read: ``--kubeconfig``, else ``$KUBECONFIG`` (a path list, as
    kubectl: missing entries are skipped), else ``~/.kube/config``."""
    if kubeconfig is not None:
        return [kubeconfig]
    listed = os.environ.get("KUBECONFIG")
    if listed:
        paths = [Path(os.path.expanduser(p)) for p in listed.split(os.pathsep) if p]
        return [p for p in paths if p.exists()] or paths[:1]
    return [Path(os.path.expanduser("~/.kube/config"))]


def _check_kubeconfig(paths: list[Path], context: str | None) -> None:
    """Refuse a kubeconfig the client would choke on, with one line that says why.

    The client's own messages for these cases are a YAML parser dump, or ``'str' object does not
    support item assignment``, or a silent fall back to no credentials.
    """
    from gpustack_render.snapshot import yamlread
    contexts: list[str] = []
    current = ""
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise UserError.single("cannot use kubeconfig: not UTF-8 text", file=str(path)) from None
        except OSError as err:
            raise UserError.single(f"cannot read kubeconfig: {err.strerror or err}", file=str(path)) from None
        try:
            doc = yamlread.document(text)
        except yamlread.Invalid as err:
            raise UserError([Problem(f"cannot use kubeconfig: not YAML: {err.reason}", file=str(path),
                                     line=err.line, column=err.column)]) from None
        if not isinstance(doc, dict):
            raise UserError.single("cannot use kubeconfig: not a kubeconfig (a mapping with clusters, "
                                   "users and contexts)", file=str(path))
        for entry in doc.get("contexts") or []:
            if isinstance(entry, dict) and entry.get("name"):
                contexts.append(str(entry["name"]))
        current = current or str(doc.get("current-context") or "")
    where = str(paths[0]) if len(paths) == 1 else os.pathsep.join(map(str, paths))
    if not contexts:
        raise UserError.single("cannot use kubeconfig: it has no contexts", file=where)
    wanted = context or current
    if not wanted:
        raise UserError.single(f"cannot use kubeconfig: no current-context; pass --context "
                               f"(one of: {', '.join(contexts)})", file=where)
    if wanted not in contexts:
        how = "--context" if context else "current-context"
        raise UserError.single(f"cannot use kubeconfig: {how} '{wanted}' is not one of its contexts "
                               f"({', '.join(contexts)})", file=where)


def _api_client(kubeconfig: Path | None, context: str | None, messages: "LibraryMessages") -> Any:
    """An ApiClient from the kubeconfig (``$KUBECONFIG`` / ``~/.kube/config`` by default), or the
    in-cluster service account when there is no kubeconfig and the tool runs in a Pod."""
    from kubernetes import client, config
    cfg = client.Configuration()
    paths = _kubeconfig_paths(kubeconfig)
    where = str(paths[0])
    try:
        if kubeconfig is None and context is None and not any(p.exists() for p in paths) \
                and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=cfg)
        else:
            _check_kubeconfig(paths, context)
            config.load_kube_config(config_file=str(kubeconfig) if kubeconfig else None, context=context,
                                    client_configuration=cfg, persist_config=False)
    except (config.ConfigException, OSError, ValueError, TypeError, KeyError, AttributeError) as err:
        raise UserError.single(f"cannot use kubeconfig: {_first_line(err)}", file=where) from None
    # The client logs a failing exec credential plugin (it is the only thing the loader logs as an
    # error: a plugin that exits non-zero, prints no credential, or cannot be started at all) and
    # goes on without credentials, which the server would only answer with a puzzling 401.
    failure = messages.take_errors()
    if failure:
        raise UserError.single(f"the exec credential plugin failed: {failure[0].removeprefix('exec:').strip()}",
                               file=where)
    cfg.retries = 1
    return client.ApiClient(cfg)


def _first_line(err: BaseException | str) -> str:
    """One line of an exception's text, the way a person would quote it."""
    text = str(err).strip()
    if not text:
        return type(err).__name__ if isinstance(err, BaseException) else ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    one = "; ".join(lines)
    return (one[:300] + "...") if len(one) > 300 else one


# --------------------------------------------------------------------------------------------
# What the libraries print: log records and warnings become our one-line messages
# --------------------------------------------------------------------------------------------


class LibraryMessages(logging.Handler):
    """Collects what the kubernetes client and urllib3 log and warn while a capture runs.

    Both write to stderr in their own formats (``ERROR:root:exec: process returned 1``, urllib3's
    retry lines, one InsecureRequestWarning per request). Collected here, a failing exec plugin
    becomes the command's error, TLS warnings one ``warning:`` line, and retry noise nothing
    (the request's final failure is reported on its own).
    """

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.errors: list[str] = []
        self._warnings: Any = None
        self._caught: list[warnings.WarningMessage] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR and not record.name.startswith("urllib3"):
            self.errors.append(_first_line(record.getMessage()))

    def take_errors(self) -> list[str]:
        taken, self.errors = self.errors, []
        return taken

    def __enter__(self) -> "LibraryMessages":
        # A handler on the root logger also keeps ``logging.error`` from installing basicConfig's.
        logging.getLogger().addHandler(self)
        self._warnings = warnings.catch_warnings(record=True)
        self._caught = self._warnings.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._warnings.__exit__(*exc)
        logging.getLogger().removeHandler(self)

    def warnings_to(self, diag: Diagnostics, server: str) -> None:
        """One line per kind of warning the libraries raised."""
        from urllib3.exceptions import InsecureRequestWarning
        for caught in self._caught:
            if issubclass(caught.category, InsecureRequestWarning):
                diag.warn(f"TLS certificate verification is off for {server} (insecure-skip-tls-verify in the "
                          f"kubeconfig): the server's identity was not checked")
            else:
                diag.warn(f"{caught.category.__name__}: {_first_line(str(caught.message))}")


# --------------------------------------------------------------------------------------------
# Progress
# --------------------------------------------------------------------------------------------


class Progress:
    """Progress per kind and page on stderr (click's progress bar), or nothing at all.

    One step per kind; the text after the bar names the kind, the page and the objects so far (of
    the total when the server sends ``remainingItemCount``), so a 10,000-Node list shows motion.
    """

    def __init__(self, shown: bool, steps: int) -> None:
        self.bar: Any = None
        if shown:
            self.bar = click.progressbar(length=steps, label="snapshot", file=sys.stderr, show_eta=False,
                                         show_percent=False, show_pos=True, item_show_func=lambda item: item)

    def __enter__(self) -> "Progress":
        if self.bar is not None:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def page(self, kind: str, page: int, objects: int, remaining: int | None) -> None:
        if self.bar is None:
            return
        total = f"/{objects + remaining}" if remaining else ""
        self.bar.current_item = f"{kind}: page {page}, {objects}{total} objects"
        self.bar.render_progress()

    def step(self, label: str) -> None:
        if self.bar is not None:
            self.bar.update(1, label)


# --------------------------------------------------------------------------------------------
# The capture
# --------------------------------------------------------------------------------------------


class Capture:
    """One capture session: the typed API wrappers over one client, and the page size."""

    def __init__(self, api: Any, page_size: int, progress: Progress | None = None) -> None:
        from kubernetes import client
        self.page_size = page_size
        self.api = api
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.server = api.configuration.host
        self.progress = progress or Progress(False, 0)

    def _not_kubernetes(self, detail: str) -> UserError:
        return UserError.single(f"{self.server} is not a Kubernetes API server: {detail} "
                                f"(check the server URL of the kubeconfig context)")

    def _call(self, what: str, fetch: Callable[[], Any],
              not_json: Callable[[str], UserError] | None = None) -> dict[str, Any] | None:
        """One request → parsed JSON object; ``None`` on 404. Failures become one-line user errors
        (``not_json`` words the one for an answer that is not a JSON object, given its content type)."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError
        try:
            response = fetch()
        except ApiException as err:
            if err.status == 404:
                return None
            if err.status == 410:
                raise
            words = {401: "unauthorized: the kubeconfig credentials were rejected",
                     403: f"forbidden: the credentials may not {what}"}
            reason = words.get(err.status) or (f"HTTP {err.status} {err.reason or ''}".strip() + f" while trying to {what}"
                                               if err.status else f"cannot reach the API server: {err.reason}")
            raise UserError.single(f"{reason} ({self.server})") from None
        except (HTTPError, OSError) as err:
            cause = getattr(err, "reason", None) or err
            raise UserError.single(f"cannot reach the API server {self.server}: "
                                   f"{type(cause).__name__}: {_first_line(str(cause))}") from None
        try:
            parsed = json.loads(response.data)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            kind = (response.headers.get("Content-Type") or "no content type").split(";")[0].strip()
            if not_json is not None:
                raise not_json(kind)
            raise UserError.single(f"the API server answered {kind}, not a JSON object, while trying to {what} "
                                   f"({self.server})")
        return parsed

    def served_groups(self) -> dict[str, list[str]]:
        """Discovery (``/api``, ``/apis``): that the server is a Kubernetes API at all, and which
        versions of which API groups it serves, preferred first. A wrong URL (an ingress or proxy answering 404 or an
        HTML page everywhere) must fail here, not look like a cluster without CRDs."""
        from kubernetes import client
        timeout = (CONNECT_TIMEOUT_S, READ_TIMEOUT_S)
        groups: dict[str, list[str]] = {}
        for path, kind, fetch in (
                ("/api", "APIVersions", client.CoreApi(self.api).get_api_versions),
                ("/apis", "APIGroupList", client.ApisApi(self.api).get_api_versions)):
            found = self._call(f"discover the APIs (GET {path})",
                               lambda: fetch(_preload_content=False, _request_timeout=timeout),
                               lambda answer: self._not_kubernetes(f"GET {path} answered {answer}, not JSON"))
            if found is None:
                raise self._not_kubernetes(f"GET {path} answered 404")
            if found.get("kind") != kind:
                raise self._not_kubernetes(f"GET {path} answered JSON that is not an {kind}")
            if kind == "APIVersions":
                if "v1" not in (found.get("versions") or []):
                    raise self._not_kubernetes(f"GET {path} does not list the core API v1")
                groups[""] = ["v1"]
            for group in found.get("groups") or []:
                if isinstance(group, dict):
                    groups[str(group.get("name"))] = _by_preference(group)
        return groups

    def list(self, res: Resource) -> list[dict[str, Any]] | None:
        """All objects of ``res``, page by page; ``None`` when the API does not serve it (404 on
        the first page). Any failure after the first page fails the capture: half a list would
        render as if the rest had been deleted."""
        from kubernetes.client.exceptions import ApiException
        items: list[dict[str, Any]] = []
        token: str | None = None
        restarted = False
        page_no = 0
        while True:
            page_no += 1
            what = res.what + (f" (page {page_no})" if page_no > 1 else "")
            try:
                page = self._call(what, lambda: self._fetch(res, token))
            except ApiException:  # 410 Gone: the continue token expired; restart the list once
                if restarted:
                    raise UserError.single(f"the {res.plural} list kept changing while paging; "
                                           f"try again ({self.server})") from None
                items, token, restarted, page_no = [], None, True, 0
                continue
            if page is None:
                if page_no == 1 and not res.required:
                    return None
                if page_no == 1:
                    raise self._not_kubernetes(f"it does not serve {res.plural} ({res.api_version})")
                raise UserError.single(f"the API server answered 404 while trying to {what}: the list "
                                       f"cannot be completed ({self.server})")
            page_items = page.get("items")
            if not isinstance(page_items, list) and not (page_items is None and "metadata" in page):
                raise UserError.single(f"the API server answered JSON that is not a list while trying to "
                                       f"{what} ({self.server})")
            items.extend(_tidy(item, res) for item in page_items or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue") or None
            self.progress.page(res.kind, page_no, len(items), meta.get("remainingItemCount") if token else None)
            if not token:
                return items

    def _fetch(self, res: Resource, token: str | None) -> Any:
        # One set of keyword options for calls of different signatures: typed loosely on purpose.
        options: dict[str, Any] = {"limit": self.page_size, "_continue": token, "_preload_content": False,
                   "_request_timeout": (CONNECT_TIMEOUT_S, READ_TIMEOUT_S)}
        if not res.group:
            return getattr(self.core, f"list_{'node' if res.kind == 'Node' else 'namespace'}")(**options)
        if res.namespace:
            return self.custom.list_namespaced_custom_object(res.group, res.version, res.namespace, res.plural,
                                                             **options)
        return self.custom.list_cluster_custom_object(res.group, res.version, res.plural, **options)

    def settings(self, kind: str, namespace: str, name: str, keys: Iterable[str]) -> dict[str, Any] | None:
        """The settings Secret or ConfigMap, reduced to the settings keys (nothing else is copied)."""
        reader = self.core.read_namespaced_secret if kind == "Secret" else self.core.read_namespaced_config_map
        obj = self._call(f"get {kind.lower()} {namespace}/{name}",
                         lambda: reader(name, namespace, _preload_content=False,
                                        _request_timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S)))
        if obj is None:
            return None
        wanted = set(keys)
        out: dict[str, Any] = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": namespace}}
        data = {k: v for k, v in sorted((obj.get("data") or {}).items()) if k in wanted}
        if data:
            out["data"] = data
        return out


def _by_preference(group: dict[str, Any]) -> list[str]:
    """An APIGroup's versions, its preferredVersion first, then the rest in the server's order (the
    order of priority the API server lists them in)."""
    versions = [str(v.get("version")) for v in group.get("versions") or [] if isinstance(v, dict)]
    preferred = group.get("preferredVersion")
    first = str(preferred.get("version")) if isinstance(preferred, dict) else None
    return ([first] if first in versions else []) + [v for v in versions if v != first]


def _tidy(item: dict[str, Any], res: Resource) -> dict[str, Any]:
    """List items of built-in kinds come without apiVersion/kind; managedFields is bulk nobody reads;
    a kind with ``prune`` keeps only the fields the tool reads."""
    out = {"apiVersion": item.get("apiVersion") or res.api_version, "kind": item.get("kind") or res.kind}
    out.update((k, v) for k, v in item.items() if k not in out)
    if res.prune is not None:
        return res.prune(out)
    meta = out.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        out["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return out


def _versions_to_try(res: Resource, groups: dict[str, list[str]]) -> tuple[list[str], str | None]:
    """The versions of ``res`` to list, the server's preferred first, among those this tool reads;
    or why there are none (discovery says the group is not served, or only at versions it does not read)."""
    if res.required:
        return list(res.versions), None
    served = groups.get(res.group)
    if served is None:
        return [], "not served by the cluster (CRD not installed?)"
    readable = [v for v in served if v in res.versions]
    if not readable:
        return [], (f"the cluster serves {res.group} {', '.join(served) or 'with no version'} only, and this "
                    f"tool reads {', '.join(res.versions)}")
    return readable, None


def capture(kubeconfig: Path | None, context: str | None, page_size: int, settings_source: tuple[str, str],
            settings_keys: Iterable[str], diag: Diagnostics, progress: bool = False,
            vocabulary: tuple[str, str] | None = None) -> dict[str, Any]:
    """The snapshot as one ``List``: every kind of :func:`resources`, then the settings objects.
    ``vocabulary`` is the rules' (workerApiGroup, nodeFeatureNamespace), the built-in rules' when unset.
    Raises :class:`UserError` unless the server is a Kubernetes API and every list it serves was
    read completely: an empty or partial snapshot renders as if objects had been deleted."""
    if vocabulary is None:
        from gpustack_render.snapshot.inputs import builtin_vocabulary
        builtin = builtin_vocabulary()
        vocabulary = (str(builtin["workerApiGroup"]), str(builtin["nodeFeatureNamespace"]))
    listed = resources(*vocabulary)
    with LibraryMessages() as messages:
        api = _api_client(kubeconfig, context, messages)
        try:
            with Progress(progress, len(listed) + 1) as bar:
                snapshot = _capture_lists(Capture(api, page_size, bar), listed, settings_source, settings_keys,
                                          diag, bar)
        finally:
            api.close()
        messages.warnings_to(diag, api.configuration.host)
        for error in messages.take_errors():  # e.g. a credential refresh that failed but was not needed
            diag.warn(f"the kubernetes client reported: {error}")
    return snapshot


def _capture_lists(session: Capture, listed: tuple[Resource, ...], settings_source: tuple[str, str],
                   settings_keys: Iterable[str], diag: Diagnostics, bar: Progress) -> dict[str, Any]:
    groups = session.served_groups()
    items: list[dict[str, Any]] = []
    for res in listed:
        versions, why = _versions_to_try(res, groups)
        found = None
        for version in versions:  # a version of the group may lack the kind (404): try the next one
            found = session.list(replace(res, version=version))
            if found is not None:
                break
        if found is None:
            why = why or f"not served by the cluster at {res.group} {', '.join(versions)} (CRD not installed?)"
            diag.warn(f"skipping {res.kind} ({res.plural}.{res.group or 'core'}): {why}")
        else:
            items.extend(found)
        bar.step(f"{res.kind}: done")
    namespace, name = settings_source
    keys = list(settings_keys)
    for kind in ("Secret", "ConfigMap"):
        obj = session.settings(kind, namespace, name, keys)
        if obj is not None:
            items.append(obj)
    bar.step("settings: done")
    return {"apiVersion": "v1", "kind": "List", "items": items}


def write_atomically(text: str, target: Path) -> None:
    """Write next to ``target`` and rename over it: a reader never sees half a snapshot."""
    parent = target.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    except OSError as err:
        raise UserError([Problem(f"cannot write: {err.strerror or err}", file=str(target))]) from None
    written = False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, target)
        written = True
    except OSError as err:
        raise UserError([Problem(f"cannot write: {err.strerror or err}", file=str(target))]) from None
    finally:
        if not written:  # nothing is ever left half written, whatever stopped it
            Path(tmp).unlink(missing_ok=True)
