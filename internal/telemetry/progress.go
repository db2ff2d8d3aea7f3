package telemetry

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Progress reports phases of items with counts, elapsed time and an ETA.
// On a terminal it redraws one status line and prints only failures and
// log lines permanently; otherwise every item becomes a log line.
type Progress struct {
	w   io.Writer
	tty bool
	now func() time.Time

	mu         sync.Mutex
	phase      string
	total      int
	done       int
	failed     int
	phaseStart time.Time
	runStart   time.Time
	lineShown  bool
}

// NewProgress writes to w; tty selects the redrawn status line.
func NewProgress(w io.Writer, tty bool) *Progress {
	p := &Progress{w: w, tty: tty, now: time.Now}
	p.runStart = p.now()
	return p
}

// Phase starts a new phase of total items.
func (p *Progress) Phase(name string, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
	p.phase, p.total, p.done, p.failed = name, total, 0, 0
	p.phaseStart = p.now()
	fmt.Fprintf(p.w, "%s %s: %d\n", p.stamp(), name, total)
	p.drawLocked("")
}

// notApplicable is an item's error that is no failure: the item cannot
// run where it was asked to (a workload its guest's kernel lacks), and
// the error says so itself.
type notApplicable interface{ NotApplicable() bool }

// Item records one finished item.
func (p *Progress) Item(desc string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	var na notApplicable
	skipped := errors.As(err, &na) && na.NotApplicable()
	if err != nil && !skipped {
		p.failed++
	}
	if !p.tty || err != nil {
		p.clearLocked()
		status := "ok"
		switch {
		case skipped:
			status = oneLine(err.Error())
		case err != nil:
			status = "FAILED: " + oneLine(err.Error())
		}
		fmt.Fprintf(p.w, "%s [%d/%d] %s %s%s\n", p.stamp(), p.done, p.total, desc, status, p.etaLocked())
	}
	p.drawLocked(desc)
}

// Logf prints a line, keeping the status line below it.
func (p *Progress) Logf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
	fmt.Fprintf(p.w, "%s %s\n", p.stamp(), fmt.Sprintf(format, args...))
	p.drawLocked("")
}

// Done clears the status line; call it before printing results.
func (p *Progress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
}

func (p *Progress) stamp() string {
	return "[" + formatDuration(p.now().Sub(p.runStart)) + "]"
}

func (p *Progress) etaLocked() string {
	if p.done == 0 || p.done >= p.total {
		return ""
	}
	per := p.now().Sub(p.phaseStart) / time.Duration(p.done)
	return ", eta " + formatDuration(per*time.Duration(p.total-p.done))
}

func (p *Progress) drawLocked(last string) {
	if !p.tty || p.total == 0 {
		return
	}
	line := fmt.Sprintf("%s %s %d/%d", p.stamp(), p.phase, p.done, p.total)
	if p.failed > 0 {
		line += fmt.Sprintf(" (%d failed)", p.failed)
	}
	line += p.etaLocked()
	if last != "" {
		line += " — " + last
	}
	fmt.Fprintf(p.w, "\r\x1b[K%s", line)
	p.lineShown = true
}

func (p *Progress) clearLocked() {
	if p.lineShown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.lineShown = false
	}
}

func formatDuration(d time.Duration) string {
	d = d.Round(time.Second)
	m := int(d / time.Minute)
	s := int((d % time.Minute) / time.Second)
	return fmt.Sprintf("%d:%02d", m, s)
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}
