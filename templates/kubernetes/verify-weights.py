"""Check every file of the weights manifest (MANIFEST: path, size, sha256) under WEIGHTS_DIR; stdlib only."""
import hashlib
import json
import os
import sys

root = os.environ["WEIGHTS_DIR"]
raw = open(os.path.join(root, os.environ["MANIFEST"]), "rb").read()
digest = hashlib.sha256(raw).hexdigest()
marker = os.path.join(root, ".verified")
if os.path.exists(marker) and open(marker).read().strip() == digest:
    print(f"weights: verified earlier against manifest {digest}")
    sys.exit(0)
bad = []
for entry in json.loads(raw)["files"]:
    rel = entry["path"]
    path = os.path.normpath(os.path.join(root, rel))
    if os.path.isabs(rel) or not path.startswith(os.path.normpath(root) + os.sep):
        bad.append(f"{rel}: path leaves the model folder")
        continue
    if not os.path.isfile(path) or os.path.getsize(path) != entry["size"]:
        bad.append(f"{rel}: missing or not {entry['size']} bytes")
        continue
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 24), b""):
            h.update(block)
    if h.hexdigest() != entry["sha256"]:
        bad.append(f"{rel}: sha256 differs from the manifest")
if bad:
    print(f"weights do not match {os.environ['MANIFEST']}:", *bad, sep="\n  ", file=sys.stderr)
    sys.exit(1)
with open(marker, "w") as fh:
    fh.write(digest)
print(f"weights: {len(json.loads(raw)['files'])} files match manifest {digest}")
