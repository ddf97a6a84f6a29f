"""Which file each kind's template comes from: ``--templates DIR`` is an overlay over the built-in
templates, as ``--rules DIR`` is over the built-in rules.

A ``<Kind>.yaml`` of ``DIR`` replaces the built-in template of that kind only; every other kind's
template is the built-in one of this version. A directory holding no template is one error, and so
is a ``<Kind>.yaml`` (a name starting with a capital, as kinds do) no rendered kind is named by, or a
kind's template under another suffix (``ClusterQueue.yml``, an old ``ClusterQueue.yaml.j2``): a misspelt
name would otherwise be ignored. This is the one place a kind's template file is looked up
(:meth:`Templates.file`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpustack_render.errors import Problem, UserError, did_you_mean
from gpustack_render.rules.resources import default_templates_dir

SUFFIX = ".yaml"


@dataclass(frozen=True)
class Templates:
    """The directory given (or the built-in one) and the directories templates are looked up in,
    in order: that directory, then the built-in one."""
    dir: Path
    search: tuple[Path, ...]

    def file(self, kind: str) -> Path:
        """The file ``kind``'s template is read from."""
        name = kind + SUFFIX
        return next((d / name for d in self.search if (d / name).is_file()), self.dir / name)


def locate(templates_dir: Path | None, kinds: tuple[str, ...]) -> Templates:
    """The templates of ``templates_dir`` over the built-in ones (just the built-in ones for ``None``);
    ``kinds`` are the kinds a template may be named by."""
    builtin = default_templates_dir()
    if templates_dir is None:
        return Templates(builtin, (builtin,))
    if not templates_dir.is_dir():
        raise UserError.single("templates directory not found", file=str(templates_dir))
    files = sorted(p for p in templates_dir.iterdir() if p.is_file())
    # A template is named like its kind (CamelCase): lower-case YAML files beside them (a
    # kustomization.yaml, a snapshot's nodes.yaml) are not templates.
    found = [p for p in files if p.name.endswith(SUFFIX) and p.name[:1].isupper()]
    names = [kind + SUFFIX for kind in kinds]
    misnamed = [Problem(f"not read as a template (templates are named <Kind>{SUFFIX})", file=str(p),
                        hint=did_you_mean(p.name, names)) for p in files if _meant_for_a_kind(p, kinds)]
    if misnamed:
        raise UserError(misnamed)
    if not found:
        raise UserError.single(f"no template in this directory (a template is <Kind>{SUFFIX}, for example "
                               f"{kinds[0]}{SUFFIX}; an overlay holds only the ones it changes)",
                               file=str(templates_dir))
    unknown = [Problem(f"no rendered kind has this template name (templates are <Kind>{SUFFIX})", file=str(p),
                       hint=did_you_mean(p.name, names)) for p in found if p.name not in names]
    if unknown:
        raise UserError(unknown)
    same = templates_dir.resolve() == builtin.resolve()
    return Templates(templates_dir, (templates_dir,) if same else (templates_dir, builtin))


# What a template of a kind is named when its suffix is misspelt (a helper or a backup is not).
_TEMPLATE_LIKE = (".j2", ".jinja", ".jinja2", ".yaml", ".yml", ".tpl", ".tmpl")


def _meant_for_a_kind(path: Path, kinds: tuple[str, ...]) -> bool:
    """Whether ``path`` reads as a kind's template under a wrong suffix (``ClusterQueue.yml.j2``,
    ``ClusterQueue.j2``): it is not read, so the kind would render with the built-in template."""
    stem = path.name.split(".", 1)[0].lower()
    return (not path.name.endswith(SUFFIX) and path.suffix.lower() in _TEMPLATE_LIKE
            and stem in {kind.lower() for kind in kinds})


def template_file(templates_dir: Path | None, kind: str) -> Path:
    """The file ``kind``'s template is read from with ``--templates templates_dir`` (``explain``
    names it); the directory was checked by the render."""
    builtin = default_templates_dir()
    return Templates(templates_dir or builtin, (templates_dir or builtin, builtin)).file(kind)
