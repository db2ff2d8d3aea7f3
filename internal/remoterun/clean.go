package remoterun

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vfleet/vfleet/internal/remote"
)

// stopScript stops the remote vfleet of every run's scratch in $1 (its pid
// file's process, if that still runs vfleet's binary there: a pid may be
// reused): SIGTERM, for its own teardown, then, after $2 seconds, SIGKILL
// for whatever did not end. It prints each pid it stopped.
const stopScript = `d="$1"; pids=
for s in "$d"/runs/run.*; do
  [ -f "$s/` + pidName + `" ] || continue
  pid=$(cat "$s/` + pidName + `")
  case "$(readlink "/proc/$pid/exe")" in
  "$d/bin/vfleet"|"$d/bin/vfleet (deleted)") kill -TERM "$pid" && pids="$pids $pid" && echo "$pid";;
  esac
done
n=0
while [ -n "$pids" ] && [ "$n" -lt "$2" ]; do
  alive=
  for pid in $pids; do [ -e "/proc/$pid/exe" ] && alive="$alive $pid"; done
  pids=$alive
  [ -n "$pids" ] && sleep 1
  n=$((n+1))
done
for pid in $pids; do kill -KILL "$pid" 2>/dev/null; done
true`

// Clean removes from the machine what runs of `vfleet run --on` left there
// when the vfleet that started them was killed: it stops their remote
// vfleet (which tears down its guests), runs the remote `vfleet clean` on
// the state directory, which undoes what its ledger still holds, and
// removes the runs' scratch and any half-pushed image. Images and binaries
// stay for the next run. Runs under way there from another vfleet are
// stopped too: clean a machine nobody is running on.
func Clean(ctx context.Context, t remote.Target, cfg remote.Config, grace time.Duration, log func(line string)) error {
	m, err := remote.Dial(ctx, t, cfg)
	if err != nil {
		return err
	}
	defer m.Close(context.WithoutCancel(ctx))
	l, err := openDirs(ctx, m)
	if err != nil {
		return err
	}
	secs := strconv.Itoa(int(cmpDuration(grace, DefaultGrace).Seconds()))
	out, err := m.Run(ctx, nil, "sh", "-c", stopScript, "sh", l.Dir, secs)
	if err != nil {
		return fmt.Errorf("stop the runs on %s: %w", t.Name(), err)
	}
	for _, pid := range strings.Fields(string(out)) {
		log("stopped the vfleet of a killed run (pid " + pid + ")")
	}
	if _, err := m.Run(ctx, nil, "test", "-x", l.bin("vfleet")); err == nil {
		stdout, stderr := &lineWriter{emit: log}, &lineWriter{emit: log}
		err := m.Stream(ctx, stdout, stderr, time.Minute, l.bin("vfleet"), "--state-dir", l.state(), "clean")
		stdout.Flush()
		stderr.Flush()
		if err != nil {
			return fmt.Errorf("vfleet clean on %s: %w", t.Name(), err)
		}
	}
	if _, err := m.Run(ctx, nil, "sh", "-c", `rm -rf -- "$1"/runs/run.* "$1"/state/images/.push-*`, "sh", l.Dir); err != nil {
		return fmt.Errorf("remove the runs' scratch on %s: %w", t.Name(), err)
	}
	return nil
}
