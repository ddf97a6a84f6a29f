"""``snapshot``: capture from a live cluster exactly the objects the renderer (and ``diff``) read.

Uses the official ``kubernetes`` client with ``_preload_content=False`` so objects stay the raw
JSON the API server sent (what ``kubectl get -o json`` prints), never round-tripped through the
client's typed models, which drop unknown fields and rename others. Lists are paged with
``limit``/``continue`` so a 10,000-Node cluster is never one huge response. The settings Secret is
cut down to the settings keys: a snapshot is committed to Git, Secret data beyond that is not.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from gpustack_render.errors import Diagnostics, Problem, UserError

CONNECT_TIMEOUT_S = 10
READ_TIMEOUT_S = 120
NODE_FEATURE_NAMESPACE = "gpustack-system"  # where the rendered NodeFeatures live (build.py)


@dataclass(frozen=True)
class Resource:
    kind: str
    group: str
    version: str
    plural: str
    namespace: str | None = None  # list only this namespace (None: the whole cluster)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


RESOURCES = (
    Resource("Node", "", "v1", "nodes"),
    Resource("Namespace", "", "v1", "namespaces"),
    Resource("Devices", "worker.gpustack.ai", "v1alpha1", "devices"),
    Resource("InstanceType", "worker.gpustack.ai", "v1alpha1", "instancetypes"),
    Resource("Topology", "kueue.x-k8s.io", "v1beta2", "topologies"),
    Resource("AdmissionCheck", "kueue.x-k8s.io", "v1beta2", "admissionchecks"),
    Resource("ResourceFlavor", "kueue.x-k8s.io", "v1beta2", "resourceflavors"),
    Resource("ClusterQueue", "kueue.x-k8s.io", "v1beta2", "clusterqueues"),
    Resource("LocalQueue", "kueue.x-k8s.io", "v1beta2", "localqueues"),
    Resource("NodeFeature", "nfd.k8s-sigs.io", "v1alpha1", "nodefeatures", NODE_FEATURE_NAMESPACE),
)


def _api_client(kubeconfig: Path | None, context: str | None) -> Any:
    """An ApiClient from the kubeconfig (``$KUBECONFIG`` / ``~/.kube/config`` by default), or the
    in-cluster service account when there is no kubeconfig and the tool runs in a Pod."""
    from kubernetes import client, config
    cfg = client.Configuration()
    default = Path(os.path.expanduser(config.KUBE_CONFIG_DEFAULT_LOCATION.split(os.pathsep)[0]))
    try:
        if kubeconfig is None and context is None and not default.exists() \
                and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=cfg)
        else:
            config.load_kube_config(config_file=str(kubeconfig) if kubeconfig else None, context=context,
                                    client_configuration=cfg, persist_config=False)
    except (config.ConfigException, OSError, ValueError, TypeError, KeyError) as err:
        where = str(kubeconfig or default)
        text = str(err).strip().splitlines()[0].strip("'\"") if str(err).strip() else type(err).__name__
        raise UserError.single(f"cannot use kubeconfig: {text}", file=where) from None
    cfg.retries = 1
    return client.ApiClient(cfg)


class Capture:
    """One capture session: the typed API wrappers over one client, and the page size."""

    def __init__(self, api: Any, page_size: int) -> None:
        from kubernetes import client
        self.page_size = page_size
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.server = api.configuration.host

    def _call(self, what: str, fetch: Callable[[], Any]) -> dict[str, Any] | None:
        """One request → parsed JSON; ``None`` on 404. Failures become one-line user errors."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError
        try:
            response = fetch()
            return json.loads(response.data)
        except ApiException as err:
            if err.status == 404:
                return None
            if err.status == 410:
                raise
            words = {401: "unauthorized: the kubeconfig credentials were rejected",
                     403: f"forbidden: the credentials may not {what}"}
            reason = words.get(err.status) or (f"HTTP {err.status} {err.reason or ''}".strip() if err.status
                                               else f"cannot reach the API server: {err.reason}")
            raise UserError.single(f"{reason} ({self.server})") from None
        except (HTTPError, OSError) as err:
            cause = getattr(err, "reason", None) or err
            raise UserError.single(f"cannot reach the API server {self.server}: "
                                   f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}")\
                from None
        except ValueError:
            raise UserError.single(f"the API server sent a response that is not JSON while trying to {what} "
                                   f"({self.server})") from None

    def list(self, res: Resource) -> list[dict[str, Any]] | None:
        """All objects of ``res``, page by page; ``None`` when the API does not serve it (404)."""
        from kubernetes.client.exceptions import ApiException
        what = f"list {res.plural}" + (f" in namespace {res.namespace}" if res.namespace else "")
        items: list[dict[str, Any]] = []
        token: str | None = None
        restarted = False
        while True:
            try:
                page = self._call(what, lambda: self._fetch(res, token))
            except ApiException:  # 410 Gone: the continue token expired; restart the list once
                if restarted:
                    raise UserError.single(f"the {res.plural} list kept changing while paging; "
                                           f"try again ({self.server})") from None
                items, token, restarted = [], None, True
                continue
            if page is None:
                return None
            items.extend(_tidy(item, res) for item in page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return items

    def _fetch(self, res: Resource, token: str | None) -> Any:
        options = {"limit": self.page_size, "_continue": token, "_preload_content": False,
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


def _tidy(item: dict[str, Any], res: Resource) -> dict[str, Any]:
    """List items of built-in kinds come without apiVersion/kind; managedFields is bulk nobody reads."""
    out = {"apiVersion": item.get("apiVersion") or res.api_version, "kind": item.get("kind") or res.kind}
    out.update((k, v) for k, v in item.items() if k not in out)
    meta = out.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        out["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return out


def capture(kubeconfig: Path | None, context: str | None, page_size: int, settings_source: tuple[str, str],
            settings_keys: Iterable[str], diag: Diagnostics) -> dict[str, Any]:
    """The snapshot as one ``List``: every kind of :data:`RESOURCES`, then the settings objects."""
    api = _api_client(kubeconfig, context)
    try:
        session = Capture(api, page_size)
        items: list[dict[str, Any]] = []
        for res in RESOURCES:
            found = session.list(res)
            if found is None:
                diag.warn(f"skipping {res.kind} ({res.plural}.{res.group or 'core'}/{res.version}): "
                          f"not served by the cluster (CRD not installed?)")
                continue
            items.extend(found)
        namespace, name = settings_source
        keys = list(settings_keys)
        for kind in ("Secret", "ConfigMap"):
            obj = session.settings(kind, namespace, name, keys)
            if obj is not None:
                items.append(obj)
        return {"apiVersion": "v1", "kind": "List", "items": items}
    finally:
        api.close()


def write_atomically(text: str, target: Path) -> None:
    """Write next to ``target`` and rename over it: a reader never sees half a snapshot."""
    parent = target.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    except OSError as err:
        raise UserError([Problem(f"cannot write: {err.strerror or err}", file=str(target))]) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, target)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise UserError([Problem(f"cannot write: {err.strerror or err}", file=str(target))]) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
