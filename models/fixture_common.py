"""What the fixture scripts (make_text_models.py, make_pipeline_models.py, make_clip_models.py,
make_dense_models.py) share: progress lines, JSON files written whole or not at all, and an export
through python/export_*.py that is skipped while the hash its manifest records still holds."""

import importlib
import importlib.util
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PYTHON = os.path.join(ROOT, "python")


def logger(prog):
    def log(message):
        print(f"{prog}: {message}", flush=True)

    return log


def rel(path):
    """`path` as the progress lines show it: from the repository root where it is inside."""
    return os.path.relpath(path, ROOT) if os.path.abspath(path).startswith(ROOT) else path


def missing(names):
    """The Python packages of `names` the running Python lacks."""
    return [n for n in names if importlib.util.find_spec(n) is None]


def read_json(path):
    """The file's value, or None where it is absent or not JSON (a fixture to make again)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_json(path, value, indent=1):
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=indent)
        f.write("\n")
    os.replace(tmp, path)


def up_to_date(log, path, stamp):
    """True, said on a progress line, where the goldens at `path` record every key of `stamp` as it
    is (the export hashes and the inputs they were made from)."""
    have = read_json(path)
    if have and all(have.get(k) == v for k, v in stamp.items()):
        log(f"{rel(path)}: up to date")
        return True
    return False


def exporter(name):
    """python/<name>.py as a module, for the hash it would record (its `*_hash` / `source_hash`)."""
    if PYTHON not in sys.path:
        sys.path.insert(0, PYTHON)
    return importlib.import_module(name)


def export(log, name, source, out, want, options):
    """Runs python/<name>.py SOURCE OUT OPTIONS unless OUT's manifest records the hash `want` (and
    its program, where the manifest names one at the top, is there); returns the manifest."""
    manifest = read_json(os.path.join(out, "manifest.json"))
    if (manifest and manifest.get("source", {}).get("hash") == want
            and os.path.exists(os.path.join(out, manifest.get("program", "manifest.json")))):
        log(f"{rel(out)}: up to date")
        return manifest
    log(f"{rel(out)}: exporting {rel(source)}")
    subprocess.run([sys.executable, os.path.join(PYTHON, f"{name}.py"), source, out, *options], check=True)
    return read_json(os.path.join(out, "manifest.json"))
