"""A learning platform's bulk download read as a class folder: Gradescope's "Export Submissions" and Canvas's
"Download Submissions" (issue 44 item 6), so an instructor grades the folder they downloaded as it is.

- **Gradescope**: the folder holds `submission_metadata.yml` and one folder `submission_<id>/` per submission
  (the files the student uploaded). The metadata names each folder's submitters (`:name:`, `:sid:`, `:email:`);
  the student id is their student id (sid), else the e-mail's name, else the folder's name; a group submission's
  ids are joined with `+`.
- **Canvas**: the files are named `<name>[_late]_<user id>_<submission id>_<file name as uploaded>` (Canvas
  adds `-1`, `-2` to a file name uploaded again). The student id is `<name>_<user id>`; a student with several
  .py/.ipynb files is that student's problem row (a submission is exactly one), as in a plain folder.

Anything else is a plain folder (discovery.discover). Ids from metadata are made safe as folder names."""
from __future__ import annotations

import re
from pathlib import Path

METADATA = "submission_metadata.yml"
CANVAS = re.compile(r"^(?P<name>[a-z0-9]+)(?:_late)?_(?P<user>\d+)_(?P<sub>\d+)_(?P<file>.+)$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._@+-]+")


def safe_id(text: str) -> str:
    """A student id usable as a folder name: letters, digits and . _ @ + - only, never hidden, at most 80."""
    s = _UNSAFE.sub("_", text.strip()).strip("._") or "student"
    return s[:80]


def _plain(d) -> dict:
    """The YAML's Ruby-symbol keys (`:sid:` loads as ':sid') without their colon."""
    return {str(k).lstrip(":"): v for k, v in d.items()} if isinstance(d, dict) else {}


def gradescope_ids(src: Path) -> dict[str, str] | None:
    """{submission folder name: student id} of a Gradescope export, None when src is not one. Raises ValueError
    with the reason when the metadata is there but cannot be read."""
    meta = src / METADATA
    if not meta.is_file():
        return None
    import yaml
    try:
        data = yaml.safe_load(meta.read_text(encoding="utf-8", errors="replace"))
    except yaml.YAMLError as e:
        raise ValueError(f"{METADATA} is not valid YAML: {str(e)[:300]}") from e
    if not isinstance(data, dict):
        raise ValueError(f"{METADATA} does not map submission folders to their submitters")
    out = {}
    for folder, entry in data.items():
        people = _plain(entry).get("submitters") or []
        ids = []
        for p in people if isinstance(people, list) else []:
            p = _plain(p)
            sid, email, name = (str(p.get(k) or "").strip() for k in ("sid", "email", "name"))
            ids.append(sid or email.split("@")[0] or name)
        out[str(folder)] = safe_id("+".join(i for i in ids if i) or str(folder))
    return out


def canvas_groups(src: Path, suffixes: tuple) -> dict[str, list[Path]] | None:
    """{student id: their files} when every submission file directly in src is named as Canvas names them (and
    there is at least one), else None."""
    files = [p for p in sorted(src.iterdir()) if p.is_file() and not p.is_symlink() and p.suffix in suffixes]
    if not files or any(CANVAS.match(p.name) is None for p in files):
        return None
    groups: dict[str, list[Path]] = {}
    for p in files:
        m = CANVAS.match(p.name)
        assert m is not None
        groups.setdefault(safe_id(f"{m['name']}_{m['user']}"), []).append(p)
    return groups
