package cli

import (
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mailspool/mailspool/internal/netstall"
	"github.com/mailspool/mailspool/queue/dburl/dburltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A threshold that is NaN, infinite or negative is a usage error (check's
// UNKNOWN), never a check that passes whatever the numbers are.
func TestCheckRefusesNaNInfinityAndNegatives(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	code, _, stderr := mailspool(t, "migrate", "--db", db)
	require.Equal(t, 0, code, stderr)
	for _, args := range [][]string{
		{"--max-failure-rate", "NaN"},
		{"--max-failure-rate", "nan%"},
		{"--max-failure-rate", "+Inf"},
		{"--max-failure-rate", "-Inf%"},
		{"--max-failure-rate", "-0.1%"},
		{"--max-backlog", "-1"},
		{"--min-finished", "-1"},
		{"--max-stuck", "-5"},
	} {
		code, out, stderr := mailspool(t, append([]string{"check", "--db", db}, args...)...)
		assert.Equal(t, checkUnknown, code, "%v: %s%s", args, out, stderr)
		assert.NotContains(t, out, "OK", args)
		assert.Contains(t, stderr, args[0], args)
	}
}

// bench's counts are usage errors outside 1..max: a zero used to become
// the default silently, and 100000 workers ran out of memory.
func TestBenchCountsOutOfRange(t *testing.T) {
	for _, args := range [][]string{
		{"--messages", "0"},
		{"--messages", "-1"},
		{"--workers", "0"},
		{"--workers", "100000"},
		{"--producers", "0"},
		{"--producers", "100000"},
		{"--messages", "1000000000"},
	} {
		code, _, stderr := mailspool(t, append([]string{"bench", "--quiet"}, args...)...)
		assert.Equal(t, exitUsage, code, "%v: %s", args, stderr)
		assert.True(t, strings.Contains(stderr, args[0]+" "+args[1]+": want 1 to"), "%v: %s", args, stderr)
	}
}

// silentServer accepts connections and never answers, like a database
// behind a stalled proxy; it returns its address.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// A monitoring probe against a database that accepts the connection and
// never answers says UNKNOWN (it used to hang forever).
func TestCheckAnswersUnknownWhenTheDatabaseNeverAnswers(t *testing.T) {
	addr := silentServer(t)
	code, out, stderr := mailspool(t, "check", "--timeout", "1s", "--db", "mysql://app:s3cret@"+addr+"/app")
	assert.Equal(t, checkUnknown, code, stderr)
	assert.True(t, strings.HasPrefix(out, "UNKNOWN: the database did not answer within 1s"), out)
	assert.NotContains(t, out+stderr, "s3cret")

	code, _, stderr = mailspool(t, "check", "--timeout", "0s")
	assert.Equal(t, checkUnknown, code)
	assert.Contains(t, stderr, "--timeout")
}

// A monitoring probe whose database stops answering in the middle of a
// statement (a proxy that drops everything from the first SELECT on,
// without closing the connection) says UNKNOWN within its --timeout, on
// MariaDB and PostgreSQL.
func TestCheckAnswersUnknownWhenTheDatabaseStallsMidStatement(t *testing.T) {
	for _, srv := range []dburltest.Server{dburltest.MariaDB, dburltest.Postgres} {
		t.Run(srv.Name, func(t *testing.T) {
			db := srv.Fresh(t)
			code, _, stderr := mailspool(t, "migrate", "--db", db)
			require.Equal(t, 0, code, stderr)
			u, err := url.Parse(db)
			require.NoError(t, err)
			p := netstall.New(t, u.Host)
			u.Host = p.Addr()
			if srv.Name == "postgres" {
				// In clear, so that the proxy sees the statement.
				q := u.Query()
				q.Set("sslmode", "disable")
				u.RawQuery = q.Encode()
			}
			p.StallOn("SELECT")
			code, out, stderr := mailspool(t, "check", "--timeout", "2s", "--db", u.String())
			assert.True(t, p.Stalled(), "check sent no SELECT")
			assert.Equal(t, checkUnknown, code, stderr)
			assert.True(t, strings.HasPrefix(out, "UNKNOWN: the database did not answer within 2s"), out)
		})
	}
}
