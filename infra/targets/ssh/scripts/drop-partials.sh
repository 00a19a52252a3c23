# inferry: partial files a killed weight fetch left in DIR, for each RELPATH line on stdin: fetch.sh names them
# RELPATH.part.PID.K[.MORE] after its shell's pid; removed unless that pid still runs (a fetch under way, say from
# a client that was killed while the host's fetch went on). Args: DIR. Run before the disk check, so what they
# held counts as free; each would otherwise be kept for ever, a model's size of disk per interruption.
dir=$1
while IFS= read -r rel; do
  case "/$rel/" in */../*|*/./*|*//*) continue ;; esac  # refused by fetch.sh too; never globbed outside DIR
  for old in "$dir/$rel".part.*; do
    pid=${old#"$dir/$rel".part.} && pid=${pid%%.*}
    case "$pid" in ''|*[!0-9]*) continue ;; esac
    [ -d "/proc/$pid" ] || rm -f "$old"
  done
done
