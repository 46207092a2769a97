package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress reports the advance of a long job: a bar with ETA when w is a
// terminal, plain lines (at most one every few seconds, and the last one)
// otherwise, nothing when quiet.
type progress struct {
	w       io.Writer
	bar     *progressbar.ProgressBar
	total   int
	done    int
	done0   int // steps already done when the report started (resume)
	start   time.Time
	last    time.Time
	every   time.Duration
	label   string
	quiet   bool
	started bool
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// newProgress starts a progress report of total steps, resuming at done.
func newProgress(w io.Writer, label string, total, done int, quiet bool) *progress {
	return newProgressTo(w, label, total, done, quiet, isTerminal(w))
}

// newProgressTo is newProgress with a bar (tty) or plain lines. A resumed
// bar counts only this run's steps (total − done, labelled with where it
// resumed), so that its rate and ETA do not take the restored steps as
// done in no time.
func newProgressTo(w io.Writer, label string, total, done int, quiet, tty bool) *progress {
	p := &progress{w: w, total: total, done: done, done0: done, start: time.Now(), label: label, quiet: quiet, every: 5 * time.Second}
	if quiet || total <= 0 || done >= total {
		p.quiet = true
		return p
	}
	if tty {
		desc := label
		if done > 0 {
			desc = fmt.Sprintf("%s (resumed at %d of %d)", label, done, total)
		}
		p.bar = progressbar.NewOptions(total-done,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionSetWidth(30),
		)
	}
	return p
}

// add records n finished steps.
func (p *progress) add(n int) {
	p.done += n
	if p.quiet {
		return
	}
	if p.bar != nil {
		_ = p.bar.Add(n)
		return
	}
	now := time.Now()
	if p.done < p.total && now.Sub(p.last) < p.every && p.started {
		return
	}
	p.started = true
	p.last = now
	el := now.Sub(p.start)
	eta := "?"
	if n := p.done - p.done0; n > 0 {
		eta = (time.Duration(float64(el) / float64(n) * float64(p.total-p.done))).Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "%s: %d/%d (%.0f%%) elapsed %s eta %s\n", p.label, p.done, p.total,
		100*float64(p.done)/float64(p.total), el.Round(time.Second), eta)
}

// finish clears the bar (a terminal) so later output starts on a clean line.
func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		_ = p.bar.Clear()
	}
}
