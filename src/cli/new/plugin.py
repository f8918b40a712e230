#!/usr/bin/python3 -S
# __NAME__: a Nomad dynamic host volume (DHV) plugin, written by `dhv-conform new`.
#
# Each volume is a plain directory "$DHV_VOLUMES_DIR/$DHV_VOLUME_ID" (mode 0700, like
# Nomad's built-in "mkdir" plugin). Change what create and delete do to make your
# storage; keep the rules below, which `dhv-conform check` holds every plugin to:
#   - stdout carries exactly one JSON answer; every log line goes to stderr;
#   - the environment is cleared (only DHV_* variables): rely on no PATH or HOME;
#   - create is called again for existing volumes (restore, update): return the same
#     path and keep the data; delete may come twice, or for a volume never created;
#   - creates and deletes of other volumes run at the same time;
#   - paths come from DHV_VOLUME_ID alone: never from the name, never from
#     DHV_CREATED_PATH (after a failed state write it is the volumes dir itself);
#   - a failure prints {"error": "..."} and exits 1, and leaves nothing behind.
# (-S: no site packages are imported, which halves the start-up time.)

import json
import os
import re
import shutil
import sys

NAME = "__NAME__"
VERSION = "1.0.0"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")


def log(message):
    print(f"{NAME}: {message}", file=sys.stderr)


def fail(message):
    log(f"error: {message}")
    print(json.dumps({"error": message}))
    sys.exit(1)


def volume_path():
    volume_id = os.environ.get("DHV_VOLUME_ID", "")
    volumes_dir = os.environ.get("DHV_VOLUMES_DIR", "")
    if not UUID.match(volume_id):
        fail("DHV_VOLUME_ID is not a lower-case UUID")
    if not volumes_dir.startswith("/"):
        fail("DHV_VOLUMES_DIR is not an absolute path")
    return os.path.join(volumes_dir.rstrip("/") or "/", volume_id)


def create():
    path = volume_path()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass  # made before (a restore, an update), or by a concurrent create of it
    except OSError as e:
        fail(f"cannot create the volume directory: {e.strerror}")
    else:
        make_private(path)
    if not os.path.isdir(path):
        fail(f"{path} exists and is not a directory")
    log(f"volume ready at {path}")
    print(json.dumps({"path": path, "bytes": 0}))


# Mode 0700 whatever the umask; when that fails, the new (empty) directory goes.
def make_private(path):
    try:
        os.chmod(path, 0o700)
    except OSError as e:
        os.rmdir(path)
        fail(f"cannot set the mode of the volume directory: {e.strerror}")


def delete():
    path = volume_path()
    created = os.environ.get("DHV_CREATED_PATH", "")
    if created and created != path:
        log("DHV_CREATED_PATH is not this volume's directory; ignoring it")
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        pass  # already gone: delete stays idempotent
    except OSError as e:
        fail(f"cannot remove the volume directory: {e.strerror}")
    log(f"deleted {path}")


def main():
    op = sys.argv[1] if len(sys.argv) > 1 else ""
    if op == "fingerprint":
        print(json.dumps({"version": VERSION}))
    elif op == "create":
        create()
    elif op == "delete":
        delete()
    elif op == "":
        fail("no operation given (expected fingerprint, create or delete)")
    else:
        fail(f"unknown operation: {op}")


if __name__ == "__main__":
    main()
