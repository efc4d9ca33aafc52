package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"io"
	"strconv"
	"strings"

	"github.com/mailspool/mailspool/queue"
)

// jsonError is what a command run with --json prints on stdout when it
// fails, with the same exit status as without --json:
//
//	{"error": {"code": "rate_limited", "message": "...", "retry_after_seconds": 1200}}
type jsonError struct {
	Error jsonErrorBody `json:"error"`
}

type jsonErrorBody struct {
	// Code names the exit status: usage, not_found, rate_limited,
	// permanent or failure.
	Code    string `json:"code"`
	Message string `json:"message"`
	// RetryAfterSeconds is when a rate-limited enqueue may succeed.
	RetryAfterSeconds float64 `json:"retry_after_seconds,omitempty"`
	// Candidates are the mails (LANE/ID) an id or a lookup could mean,
	// when it names more than one.
	Candidates []string `json:"candidates,omitempty"`
	// Deleted is how many rows a cleanup that failed had deleted per
	// lane: they are gone, whatever the error.
	Deleted map[string]int64 `json:"deleted,omitempty"`
}

var exitCodeNames = map[int]string{
	exitFailure: "failure", exitUsage: "usage", exitNotFound: "not_found",
	exitRateLimited: "rate_limited", exitPermanent: "permanent", exitSuppressed: "suppressed",
}

// wantsJSON reports whether args ask for JSON output, wherever the flag
// stands: --json or -json, bare or with any value strconv.ParseBool takes
// for true (--json=TRUE, --json=t), the last one counting, as package flag
// reads them. It also answers for a command line the flag set fs failed
// to parse. fs, the command's flag set (nil if it made none), says which
// flags take a value, so that the value in "--subject -json" is not taken
// for the flag.
func wantsJSON(fs *flag.FlagSet, args []string) bool {
	asJSON := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			// The end of the flags; parseArgs reads the argument after it
			// as positional, and flags again after that.
			i++
			continue
		}
		if len(a) < 2 || a[0] != '-' {
			continue // positional
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		if name == "" || name[0] == '-' {
			continue // bad syntax: the flag set refuses it
		}
		if name == "json" {
			on := true
			if hasValue {
				var err error
				if on, err = strconv.ParseBool(value); err != nil {
					continue // refused by the flag set, as text
				}
			}
			asJSON = on
			continue
		}
		if !hasValue && fs != nil && takesValue(fs.Lookup(name)) {
			i++ // the next argument is this flag's value
		}
	}
	return asJSON
}

// takesValue reports whether f reads the argument after it as its value
// (every flag but a boolean one); false for an unknown flag.
func takesValue(f *flag.Flag) bool {
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// writeJSONError prints err as a jsonError for exit status code.
func writeJSONError(w io.Writer, err error, code int) {
	b := jsonErrorBody{Code: exitCodeNames[code], Message: err.Error()}
	if b.Code == "" {
		b.Code = "failure"
	}
	var rl *queue.RateLimitError
	if errors.As(err, &rl) {
		b.RetryAfterSeconds = rl.RetryAfter.Seconds()
	}
	var amb ambiguousError
	if errors.As(err, &amb) {
		b.Candidates = amb.Candidates()
	}
	var ce cleanupError
	if errors.As(err, &ce) {
		b.Deleted = ce.Deleted()
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(jsonError{Error: b})
}

// countingWriter counts what a command wrote.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
