package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// check's exit codes, as Nagios reads them.
const (
	checkOK       = 0
	checkWarning  = 1
	checkCritical = 2
	checkUnknown  = 3
)

// thresholds are what check compares each lane with.
type thresholds struct {
	maxBacklog     int64
	maxFailureRate float64 // 0..1
	minFinished    int64   // sent+failed in the hour before the rate counts
	maxStuck       int64
}

// checkExitCodes are check's own, as Nagios reads them: a usage error is
// UNKNOWN too.
const checkExitCodes = `Exit codes (Nagios):
  0  OK
  1  WARNING (a lane is paused)
  2  CRITICAL (a lane is over a threshold)
  3  UNKNOWN (bad flags or arguments, database or config unusable)`

func runCheck(ctx context.Context, e *env, args []string) error {
	const usage = "[--db URL] [--config FILE] [--lane NAME] [--max-backlog N] [--max-failure-rate P] [--min-finished N] [--max-stuck N] [--timeout D] [--json]"
	fs := newFlagSet(e, "check", usage)
	setExitCodes(e, fs, usage, checkExitCodes)
	var sf storeFlags
	sf.register(fs)
	lane := filterString(fs, "lane", "only this lane (default: every lane)")
	var th thresholds
	fs.Int64Var(&th.maxBacklog, "max-backlog", 10000, "critical above this many pending, retry and sending mails")
	rate := fs.String("max-failure-rate", "20%", "critical above this share of the last hour's finished mail failing (20% or 0.2)")
	fs.Int64Var(&th.minFinished, "min-finished", 20, "judge the failure rate only once this many mails finished in the hour")
	fs.Int64Var(&th.maxStuck, "max-stuck", 0, "critical above this many rows stuck in sending")
	asJSON := fs.Bool("json", false, "print JSON: status, the line, and each lane's numbers")
	timeout := fs.Duration("timeout", 10*time.Second, "answer UNKNOWN when the database has not answered within this long (connecting included)")
	// A bad flag or threshold is UNKNOWN, on stderr, and on stdout as the
	// line a monitoring system shows (Nagios reads the first line of
	// stdout): with --json as the report, whose status and line are
	// always there.
	refuse := func(err error) error {
		if errors.Is(err, flag.ErrHelp) {
			return exitError{checkUnknown, err}
		}
		line := "UNKNOWN: " + err.Error()
		var werr error
		if wantsJSON(fs, args) {
			werr = writeJSON(e.stdout, checkResult{Status: checkNames[checkUnknown], Line: line})
		} else {
			_, werr = fmt.Fprintln(e.stdout, line)
		}
		if werr != nil {
			return exitError{checkUnknown, werr}
		}
		return exitError{checkUnknown, err}
	}
	if err := parseFlags(fs, args); err != nil {
		return refuse(err)
	}
	if *timeout <= 0 || *timeout > time.Hour {
		return refuse(usageError{fmt.Sprintf("--timeout %v: want a duration above 0 and at most 1h", *timeout)})
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var err error
	if th.maxFailureRate, err = parseRate(*rate); err != nil {
		return refuse(usageError{err.Error()})
	}
	for _, n := range []struct {
		flag string
		v    int64
	}{{"--max-backlog", th.maxBacklog}, {"--min-finished", th.minFinished}, {"--max-stuck", th.maxStuck}} {
		if n.v < 0 {
			return refuse(usageError{fmt.Sprintf("%s %d: negative", n.flag, n.v)})
		}
	}
	report := func(code int, line string, lanes []laneStats) error {
		if *asJSON {
			if err := writeJSON(e.stdout, checkResult{Status: checkNames[code], Line: line, Lanes: lanes}); err != nil {
				return exitError{checkUnknown, err}
			}
		} else {
			fmt.Fprintln(e.stdout, line)
		}
		if code != checkOK {
			return exitError{code: code}
		}
		return nil
	}
	unknown := func(err error) error {
		if ctx.Err() != nil {
			err = fmt.Errorf("the database did not answer within %v: %w", *timeout, err)
		}
		return report(checkUnknown, fmt.Sprintf("UNKNOWN: %v", err), nil)
	}
	lf := laneFlags{storeFlags: sf, lane: *lane}
	lanes, qs, db, err := lf.openQueues(ctx)
	if err != nil {
		return unknown(err)
	}
	defer db.Close()
	stats, err := collectStats(ctx, lanes, qs)
	if err != nil {
		return unknown(err)
	}
	code, line := evaluate(stats, th)
	return report(code, line, stats)
}

// checkResult is "mailspool check --json".
type checkResult struct {
	Status string      `json:"status"` // ok, warning, critical or unknown
	Line   string      `json:"line"`
	Lanes  []laneStats `json:"lanes,omitempty"`
}

var checkNames = map[int]string{checkOK: "ok", checkWarning: "warning", checkCritical: "critical", checkUnknown: "unknown"}

// evaluate returns check's exit code and its one line: critical when a lane
// is over a threshold, warning when a lane is paused, else ok with the
// numbers.
func evaluate(stats []laneStats, th thresholds) (int, string) {
	var critical, warning, ok []string
	for _, s := range stats {
		var bad []string
		if s.Backlog > th.maxBacklog {
			bad = append(bad, fmt.Sprintf("backlog %d over %d", s.Backlog, th.maxBacklog))
		}
		finished := s.SentLastHour + s.FailedLastHour
		if finished >= th.minFinished && s.FailureRate > th.maxFailureRate {
			bad = append(bad, fmt.Sprintf("failure rate %.1f%% of %d over %.1f%%", 100*s.FailureRate, finished, 100*th.maxFailureRate))
		}
		if s.Stuck > th.maxStuck {
			bad = append(bad, fmt.Sprintf("%d stuck in sending over %d", s.Stuck, th.maxStuck))
		}
		if len(bad) > 0 {
			critical = append(critical, "lane "+s.Lane+" "+strings.Join(bad, ", "))
		}
		for _, p := range s.Paused {
			warning = append(warning, "lane "+s.Lane+" paused "+describePause(p))
		}
		ok = append(ok, fmt.Sprintf("lane %s backlog %d, failure rate %.1f%% of %d, stuck %d", s.Lane, s.Backlog, 100*s.FailureRate, finished, s.Stuck))
	}
	switch {
	case len(critical) > 0:
		return checkCritical, "CRITICAL: " + strings.Join(append(critical, warning...), "; ")
	case len(warning) > 0:
		return checkWarning, "WARNING: " + strings.Join(warning, "; ")
	}
	return checkOK, "OK: " + strings.Join(ok, "; ")
}

// parseRate reads "20%" or "0.2".
func parseRate(s string) (float64, error) {
	v, pct := strings.CutSuffix(strings.TrimSpace(s), "%")
	f, err := strconv.ParseFloat(v, 64)
	if pct {
		f /= 100
	}
	if err != nil || !(f >= 0 && f <= 1) { // refuses NaN, which compares false with everything
		return 0, fmt.Errorf("--max-failure-rate %q: want a share like 20%% or 0.2", s)
	}
	return f, nil
}
