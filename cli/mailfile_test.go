package cli

import (
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// endless is a stream that never ends, like /dev/zero or /dev/urandom.
type endless byte

func (b endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// countingReader counts what was read from it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// An endless stream is refused at its first hopeless byte (NUL, not
// JSON), and one that looks like JSON forever (white space, a string that
// never closes, an array that never ends) at a bound, never read whole.
func TestEnqueueFileIsBounded(t *testing.T) {
	b := boundsFor(1 << 10) // 1 KiB mails: 1 MiB files
	for name, r := range map[string]io.Reader{
		"zeros":          endless(0),
		"random":         endless(0xA7),
		"white space":    endless(' '),
		"open string":    io.MultiReader(strings.NewReader(`[{"text":"`), endless('a')),
		"endless array":  io.MultiReader(strings.NewReader(`[`), endless('[')),
		"endless object": io.MultiReader(strings.NewReader(`{"text":`), endless('[')),
	} {
		c := &countingReader{r: r}
		_, err := decodeSpecs(c, b)
		require.Error(t, err, name)
		assert.LessOrEqual(t, c.n, b.total+64<<10, "%s: read %d bytes", name, c.n)
		if strings.Contains(name, "zeros") || strings.Contains(name, "random") {
			assert.Less(t, c.n, int64(64<<10), "%s: the first byte is hopeless", name)
		}
	}

	// One mail too big for the lane's per-mail bound, and too many mails.
	big := `[{"from":"a@example.com","to":"b@example.com","subject":"s","text":"` + strings.Repeat("x", int(b.perMail)) + `"}]`
	_, err := decodeSpecs(strings.NewReader(big), b)
	require.ErrorContains(t, err, "mail 1 is larger than")
	var many strings.Builder
	many.WriteString("[")
	for i := range maxFileMails + 1 {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`{"from":"a@example.com","to":"b@example.com","subject":"s","text":"t"}`)
	}
	many.WriteString("]")
	_, err = decodeSpecs(strings.NewReader(many.String()), boundsFor(1<<20))
	require.ErrorContains(t, err, "more than 1000 mails: split the file")

	// The whole command, on standard input.
	db := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	code, _, stderr := mailspool(t, "migrate", "--db", db)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = mailspoolIn(t, strings.Repeat(" ", 20<<20)+"[]", "enqueue", "--db", db, "--file", "-")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "is larger than 6356992 bytes of JSON", "white space counts")
}

// Re-running a file whose mails repeat idempotency keys prints the rows
// written, and names the mails that were duplicates; keys that differ in
// case are different keys on every store.
func TestEnqueueFileReportsDuplicates(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	code, _, stderr := mailspool(t, "migrate", "--db", db)
	require.Equal(t, 0, code, stderr)
	mail := func(key string) string {
		return `{"from":"a@example.com","to":"b@example.com","subject":"s","text":"t","idempotency_key":"` + key + `"}`
	}
	code, out, stderr := mailspoolIn(t, "["+mail("a")+","+mail("b")+","+mail("c")+"]", "enqueue", "--db", db, "--file", "-")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "queued 3 mails (ids 1..3) in lane default\n", out)

	code, out, stderr = mailspoolIn(t, "["+mail("d")+","+mail("e")+","+mail("a")+"]", "enqueue", "--db", db, "--file", "-")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "queued 2 mails (ids 4..5) in lane default\n1 of the 3 given repeat an idempotency key and queued nothing: 3 (as mail 1)\n", out)

	code, out, stderr = mailspoolIn(t, "["+mail("B")+","+mail("b")+","+mail("B")+"]", "enqueue", "--db", db, "--file", "-", "--json")
	require.Equal(t, 0, code, stderr)
	var res struct {
		IDs        []int64 `json:"ids"`
		Queued     int     `json:"queued"`
		Duplicates []int   `json:"duplicates"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, []int64{6, 2, 6}, res.IDs)
	assert.Equal(t, 1, res.Queued, "B is new, b was mail 2, the second B repeats the first")
	assert.Equal(t, []int{2, 3}, res.Duplicates)

	code, out, _ = mailspoolIn(t, mail("c"), "enqueue", "--db", db, "--file", "-")
	require.Equal(t, 0, code)
	assert.Equal(t, "queued nothing in lane default: the idempotency key was used already, by mail 3\n", out)
	code, out, _ = mailspool(t, "stats", "--db", db, "--json")
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"pending": 6`)
}
