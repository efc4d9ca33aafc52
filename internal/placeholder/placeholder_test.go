package placeholder

import "testing"

func TestNumbered(t *testing.T) {
	for in, want := range map[string]string{
		"SELECT 1":                                 "SELECT 1",
		"UPDATE t SET a = ? WHERE id IN (?, ?)":    "UPDATE t SET a = $1 WHERE id IN ($2, $3)",
		"SELECT '?', \"a?b\", ? FROM t":            "SELECT '?', \"a?b\", $1 FROM t",
		"SELECT 'it''s ?', ? FROM t WHERE x = 'y'": "SELECT 'it''s ?', $1 FROM t WHERE x = 'y'",
	} {
		if got := Numbered(in); got != want {
			t.Errorf("Numbered(%q) = %q, want %q", in, got, want)
		}
	}
}
