package duration

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"90s", 90 * time.Second},
		{"2h45m", 2*time.Hour + 45*time.Minute},
		{"30d", 30 * Day},
		{"0d", 0},
		{"106751d", 106751 * Day},
		{"1.5h", 90 * time.Minute},
	} {
		got, err := Parse(c.in)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

// TestParseOverflow: values past time.Duration's range are errors that say
// so, never wrapped-around values (213504d used to come back negative).
func TestParseOverflow(t *testing.T) {
	for _, in := range []string{"213504d", "106752d", "99999999999999999999d", "-213504d", "2562048h", "9223372036854775808ns"} {
		d, err := Parse(in)
		if err == nil {
			t.Errorf("Parse(%q) = %v, want an error", in, d)
			continue
		}
		if !errors.Is(err, ErrTooLong) || !strings.Contains(err.Error(), in) {
			t.Errorf("Parse(%q) error %q does not say the value is too long", in, err)
		}
	}
}

func TestParseBad(t *testing.T) {
	for _, in := range []string{"", "d", "1.5d", "3 days", "10", "1y", "-d", "1dd"} {
		if d, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", in, d)
		} else if !strings.Contains(err.Error(), "not a duration") {
			t.Errorf("Parse(%q) error %q", in, err)
		}
	}
}

func TestPositive(t *testing.T) {
	for _, in := range []string{"0s", "-1m", "0d"} {
		if _, err := Positive(in); err == nil || !strings.Contains(err.Error(), "not a positive duration") {
			t.Errorf("Positive(%q) error %v", in, err)
		}
	}
	if _, err := Positive("213504d"); !errors.Is(err, ErrTooLong) {
		t.Errorf("Positive(213504d) error %v, want ErrTooLong", err)
	}
	if d, err := Positive("1d"); err != nil || d != Day {
		t.Errorf("Positive(1d) = %v, %v", d, err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"1d", "213504d", "90s", "1h30m", "-5d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		// A day value must come back as an exact multiple of days with the
		// sign it was written with.
		if n, ok := strings.CutSuffix(s, "d"); ok {
			if d%Day != 0 || (strings.HasPrefix(n, "-") && d > 0) || (!strings.HasPrefix(n, "-") && d < 0) {
				t.Fatalf("Parse(%q) = %v", s, d)
			}
		}
	})
}
