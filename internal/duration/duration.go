// Package duration parses the durations mailspool takes in URLs, the config
// file and on the command line: Go durations ("90s", "10m", "2h45m") plus
// whole days ("30d"). A value too large for a time.Duration (about 292
// years) is an error, never a wrapped-around value.
package duration

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Day is 24 hours; mailspool's days ignore daylight saving changes.
const Day = 24 * time.Hour

// ErrTooLong matches (errors.Is) the error for a value that does not fit a
// time.Duration.
var ErrTooLong = fmt.Errorf("at most %dd (about 292 years)", maxDays)

// maxDays is the largest day count a time.Duration holds.
const maxDays = int64(math.MaxInt64 / int64(Day))

// Parse reads s as a Go duration or as a whole number of days ("30d").
// Its errors quote s and give examples; they name no field, for the caller
// to put its own in front.
func Parse(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil {
			var ne *strconv.NumError
			if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
				return 0, fmt.Errorf("%q is too long: %w", s, ErrTooLong)
			}
			return 0, fmt.Errorf("%q is not a duration (e.g. 90s, 10m, 2h, 30d)", s)
		}
		if n > maxDays || n < -maxDays {
			return 0, fmt.Errorf("%q is too long: %w", s, ErrTooLong)
		}
		return time.Duration(n) * Day, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		// time.ParseDuration says "invalid duration" for an overflow too;
		// a value of the right shape that failed is one.
		if goDuration.MatchString(s) {
			return 0, fmt.Errorf("%q is too long: %w", s, ErrTooLong)
		}
		return 0, fmt.Errorf("%q is not a duration (e.g. 90s, 10m, 2h, 30d)", s)
	}
	return d, nil
}

// goDuration is the shape time.ParseDuration accepts.
var goDuration = regexp.MustCompile(`^[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

// Positive is Parse for values that must be greater than zero.
func Positive(s string) (time.Duration, error) {
	d, err := Parse(s)
	if err != nil && !errors.Is(err, ErrTooLong) || err == nil && d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration (e.g. 90s, 10m, 2h, 30d)", s)
	}
	return d, err
}
