#!/usr/bin/env bash
# The fleet-limit benchmark (docs/fleet-performance.md): how long `vfleet
# fleet up` takes, as a user waits for it, until every agent of a fleet
# answers, and `fleet down` until it is all gone; for a fleet of runc
# containers and one of cloned microVMs, whose host memory per clone it
# also reads (PSS of each clone's processes once the fleet is up). With
# more than one vfleet binary (an old build beside a new one) the binaries
# take turns, round after round, so that a drift of the machine falls on
# all of them; it prints every measurement and the medians. It asserts
# nothing: run it alone on the machine, as root, after scripts/build.sh.
#
#   scripts/bench-fleet.sh [-r ROUNDS] [-c CONTAINERS] [-t RUNTIME] [-m CLONES] BINARY...
#
# -t picks the containers' runtime (runc; crun where it runs); a count of 0
# leaves that fleet out.
set -euo pipefail
rounds=3 containers=1000 runtime=runc clones=100
usage() { echo "usage: $0 [-r ROUNDS] [-c CONTAINERS] [-t RUNTIME] [-m CLONES] BINARY..." >&2; exit 2; }
while getopts r:c:t:m: opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    c) containers=$OPTARG ;;
    t) runtime=$OPTARG ;;
    m) clones=$OPTARG ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || usage
for n in "$rounds" "$containers" "$clones"; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "bench-fleet: $n is not a count" >&2; exit 2; }
done
for b in "$@"; do
  [ -x "$b" ] || { echo "bench-fleet: $b is not an executable vfleet" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "bench-fleet: fleets need root" >&2; exit 2; }
# The binaries share one agent, so that a turn does not reinstall another
# in the image.
export VFLEET_AGENT=${VFLEET_AGENT:-$(dirname "$1")/vfleet-agent}

work=$(mktemp -d)
up=""
# Whatever happens, the fleet of the moment goes down.
trap '[ -z "$up" ] || "$up" fleet down bench-fleet >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

cat >"$work/containers.yaml" <<EOF
name: bench-containers
baseline: c
guests:
  - {name: c, kind: container, runtime: $runtime, count: $containers}
workloads:
  - workload: cpu
EOF
cat >"$work/clones.yaml" <<EOF
name: bench-clones
baseline: m
guests:
  - {name: m, kind: vm, runtime: microvm, vcpus: 1, memory: 256M, launch: clone, count: $clones}
workloads:
  - workload: cpu
EOF

seconds() { date +%s.%N; }

# pss_mib FLEET_STATE: the mean PSS, in MiB, of the fleet's guests'
# processes (each guest's own, as its state lists them).
pss_mib() {
  python3 - "$1" <<'EOF'
import json, sys
state = json.load(open(sys.argv[1]))
total, guests = 0, 0
for g in state["guests"]:
    kb = 0
    for pid in g.get("pids") or []:
        try:
            for line in open(f"/proc/{pid}/smaps_rollup"):
                if line.startswith("Pss:"):
                    kb += int(line.split()[1])
        except OSError:
            pass
    if kb:
        total, guests = total + kb, guests + 1
print(f"{total / guests / 1024:.1f}" if guests else "-")
EOF
}

# measure BINARY SCENARIO LABEL COUNT: one up and down, a line of figures.
measure() {
  local bin=$1 scenario=$2 label=$3 want=$4 t0 t1 t1b t2 ready pss=-
  "$bin" fleet down bench-fleet >/dev/null 2>&1 || true
  up=$bin
  t0=$(seconds)
  if ! "$bin" fleet up "$scenario" --name bench-fleet >"$work/up.log" 2>&1; then
    tail -20 "$work/up.log" >&2
    echo "bench-fleet: $bin fleet up $label failed" >&2
    exit 1
  fi
  t1=$(seconds)
  # A guest that failed to start leaves the fleet smaller: say so.
  ready=$(sed -n 's/.* is up: \([0-9]*\) guests.*/\1/p' "$work/up.log")
  if [ "$ready" != "$want" ]; then
    echo "bench-fleet: $bin fleet up $label: ${ready:-no} guests of $want started" >&2
  fi
  if [ "$label" = clones ]; then
    sleep 5 # the clones' first translations settle
    pss=$(pss_mib "${VFLEET_STATE_DIR:-/var/lib/vfleet}/fleets/bench-fleet.json")
  fi
  t1b=$(seconds)
  "$bin" fleet down bench-fleet >/dev/null
  up=""
  t2=$(seconds)
  awk -v b="$bin" -v l="$label" -v t0="$t0" -v t1="$t1" -v t1b="$t1b" -v t2="$t2" -v p="$pss" \
    'BEGIN { printf "%s\t%s\t%.2f\t%.2f\t%s\n", b, l, t1 - t0, t2 - t1b, p }' | tee -a "$work/all.tsv"
}

printf 'binary\tfleet\tup_s\tdown_s\tpss_mib_per_guest\n'
# One untimed round first: images, the VM boot files and the template are
# made once and cached, which is not what a fleet's start costs.
for scenario in containers clones; do
  count=$containers
  [ "$scenario" = clones ] && count=$clones
  [ "$count" -gt 0 ] || continue
  "$1" fleet up "$work/$scenario.yaml" --name bench-fleet >"$work/up.log" 2>&1 || { tail -20 "$work/up.log" >&2; exit 1; }
  up=$1
  "$1" fleet down bench-fleet >/dev/null
  up=""
done
for r in $(seq "$rounds"); do
  for bin in "$@"; do
    if [ "$containers" -gt 0 ]; then measure "$bin" "$work/containers.yaml" containers "$containers"; fi
    if [ "$clones" -gt 0 ]; then measure "$bin" "$work/clones.yaml" clones "$clones"; fi
  done
done
echo
echo "medians of $rounds round(s): $containers $runtime containers, $clones clones"
printf 'binary\tfleet\tup_s\tdown_s\tpss_mib_per_guest\n'
sort -t$'\t' -k1,2 "$work/all.tsv" | awk -F'\t' '
  function median(list, n,   a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { k = $1 "\t" $2; up[k] = up[k] " " $3; down[k] = down[k] " " $4; pss[k] = pss[k] " " $5; if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
  END { for (i = 1; i <= n; i++) { k = order[i]; p = pss[k] ~ /-/ ? "-" : median(pss[k]); printf "%s\t%.2f\t%.2f\t%s\n", k, median(up[k]), median(down[k]), p } }'
