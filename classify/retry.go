package classify

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter caps every retry hint this package returns: a provider
// asking for more is treated as asking for this long.
const MaxRetryAfter = 24 * time.Hour

// RetryAfter parses the value of an HTTP Retry-After header, either delay
// seconds ("120") or an HTTP-date, into a duration from now. It returns 0
// for an empty or malformed value and for a date not after now, and caps
// the result at [MaxRetryAfter].
func RetryAfter(value string, now time.Time) time.Duration {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0
	}
	if strings.Trim(value, "0123456789") == "" {
		return scaled(value, time.Second)
	}
	t, err := http.ParseTime(value)
	if err != nil {
		return 0
	}
	return capped(t.Sub(now))
}

// rateLimitReset turns an X-RateLimit-Reset value (Unix seconds, as
// SendGrid sends it) into a duration from now, with RetryAfter's rules.
func rateLimitReset(value string, now time.Time) time.Duration {
	sec, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil {
		return 0
	}
	return capped(time.Unix(sec, 0).Sub(now))
}

// retryHint finds "try again in 5 minutes", "retry after 120 seconds",
// "retry in 1 hour", "wait 30s" and the like in lower-cased text.
var retryHint = regexp.MustCompile(`\b(?:try again|retry|wait)(?: again)?(?: in| after| for)?(?: about| approximately)? (\d{1,12}) ?(seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h)\b`)

// textRetryAfter returns the first retry hint in a reply text, capped at
// MaxRetryAfter; 0 when there is none.
func textRetryAfter(text string) time.Duration {
	m := retryHint.FindStringSubmatch(strings.ToLower(text))
	if m == nil {
		return 0
	}
	unit := time.Second
	switch m[2][0] {
	case 'm':
		unit = time.Minute
	case 'h':
		unit = time.Hour
	}
	return scaled(m[1], unit)
}

// scaled returns digits × unit, capped at MaxRetryAfter without overflowing.
func scaled(digits string, unit time.Duration) time.Duration {
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > int64(MaxRetryAfter/unit) {
		return MaxRetryAfter // only overflow fails: digits are digits
	}
	return capped(time.Duration(n) * unit)
}

// capped clamps d to [0, MaxRetryAfter].
func capped(d time.Duration) time.Duration {
	return max(0, min(d, MaxRetryAfter))
}
