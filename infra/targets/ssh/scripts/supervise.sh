#!/bin/sh
# inferry process-runtime supervisor: runs ./run-engine.sh (the rendered launcher), restarts it when it exits, logs to ./engine.log.
# Started with setsid, so it leads its own process group; `kill -TERM -PGID` stops it and the engine together.
cd "$(dirname "$0")" || exit 1
echo $$ > supervisor.pid
child=
trap 'kill -TERM "$child" 2>/dev/null; wait "$child" 2>/dev/null; rm -f supervisor.pid; exit 0' TERM INT
n=0
while :; do
  n=$((n + 1))
  echo "inferry-supervisor: start $n at $(date -u +%FT%TZ)" >> engine.log
  sh ./run-engine.sh >> engine.log 2>&1 &
  child=$!
  wait "$child"
  echo "inferry-supervisor: engine exited with status $?; restarting in 2s" >> engine.log
  sleep 2 &
  wait $!
done
