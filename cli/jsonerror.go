package cli

import (
	"encoding/json"
	"errors"
	"io"
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
}

var exitCodeNames = map[int]string{
	exitFailure: "failure", exitUsage: "usage", exitNotFound: "not_found",
	exitRateLimited: "rate_limited", exitPermanent: "permanent", exitSuppressed: "suppressed",
}

// wantsJSON reports whether args ask for JSON output (--json, -json,
// --json=true), wherever the flag stands.
func wantsJSON(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		switch strings.TrimLeft(a, "-") {
		case "json", "json=true", "json=1":
			if strings.HasPrefix(a, "-") {
				return true
			}
		}
	}
	return false
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
