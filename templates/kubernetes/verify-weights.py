"""Check every file of the weights manifest (MANIFEST: path, size, sha256) under WEIGHTS_DIR; stdlib only."""
import hashlib
import json
import os
import re
import sys

root = os.environ["WEIGHTS_DIR"]
raw = open(os.path.join(root, os.environ["MANIFEST"]), "rb").read()
digest = hashlib.sha256(raw).hexdigest()
marker = os.path.join(root, ".verified")
if os.path.exists(marker) and open(marker).read().strip() == digest:
    print(f"weights: verified earlier against manifest {digest}")
    sys.exit(0)
bad = []
HEX64 = re.compile(r"[0-9a-f]{64}")
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
RESERVED = {os.environ["MANIFEST"], ".verified", ".manifest.new", ".inferry-manifest"}
for entry in json.loads(raw)["files"]:
    rel = entry["path"]
    parts = rel.split("/") if isinstance(rel, str) else [""]
    # The manifest comes from the bucket: whoever can write it must not reach past the model folder.
    if CONTROL.search("".join(parts)) or rel.startswith("/") or rel in RESERVED or \
            any(p in ("", ".", "..") for p in parts):
        bad.append(f"{ascii(rel)}: refused: the path leaves the model folder or is not a plain relative path "
                   "(absolute, '..', an empty part, a control character, or inferry's own file)")
        continue
    if not isinstance(entry["sha256"], str) or not HEX64.fullmatch(entry["sha256"]) \
            or type(entry["size"]) is not int:
        bad.append(f"{ascii(rel)}: its sha256 is not 64 lowercase hex digits or its size not an integer")
        continue
    path = os.path.join(root, rel)
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
