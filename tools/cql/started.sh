#!/usr/bin/env bash
# Prints when process PID started (clock ticks after boot, field 22 of
# /proc/PID/stat), nothing when no such process runs (a zombie has ended):
# with the PID, it names one process even once its PID is reused.
#
#   started.sh PID
set -u
stat=$(cat "/proc/$1/stat" 2>/dev/null) || exit 0
rest=${stat##*) } # after "PID (command name) ", the name may hold spaces
read -r -a f <<<"$rest"
[[ "${f[0]}" == Z ]] && exit 0
echo "${f[19]}"
