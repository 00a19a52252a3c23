# inferry weight fetch: reads "SHA256 SIZE RELPATH URL" lines on stdin, downloads in parallel with curl,
# checks each sha256 before moving it into place. Args: DIR PARALLEL. Only presigned URLs reach the host.
dir=$1 par=$2
mkdir -p "$dir" || exit 1
xargs -P "$par" -L 1 sh -c '
  sha=$1 size=$2 rel=$3 url=$4 dest="$0/$3"
  if [ -f "$dest" ] && [ "$(stat -c %s "$dest")" = "$size" ] && echo "$sha  $dest" | sha256sum -c --status; then
    exit 0
  fi
  mkdir -p "$(dirname "$dest")" && tmp="$dest.part.$$"
  curl -fsS --retry 3 --retry-delay 1 -o "$tmp" "$url" || { rm -f "$tmp"; echo "download failed: $rel" >&2; exit 1; }
  echo "$sha  $tmp" | sha256sum -c --status || { rm -f "$tmp"; echo "sha256 mismatch: $rel" >&2; exit 1; }
  mv -f "$tmp" "$dest" && echo "fetched $rel"
' "$dir"
