package dburl

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMySQLDSN(t *testing.T) {
	dsn, err := MySQLDSN("mysql://app:p%40ss@db.internal:3307/shop?tls=skip-verify")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(dsn, "app:p@ss@tcp(db.internal:3307)/shop?"), dsn)
	assert.Contains(t, dsn, "interpolateParams=true")
	assert.Contains(t, dsn, "tls=skip-verify")

	dsn, err = MySQLDSN("mysql://root@127.0.0.1/test")
	require.NoError(t, err)
	assert.Contains(t, dsn, "tcp(127.0.0.1:3306)/test")

	dsn, err = MySQLDSN("mysql://root@localhost/test?socket=/run/mysqld/mysqld.sock")
	require.NoError(t, err)
	assert.Contains(t, dsn, "unix(/run/mysqld/mysqld.sock)/test")

	for _, bad := range []string{"mysql://root:hunter2@127.0.0.1:3306/", "mysql://root:hunter2@/test", "mysql://root:hunter2@h/a/b"} {
		_, err := MySQLDSN(bad)
		require.Error(t, err, bad)
		assert.NotContains(t, err.Error(), "hunter2")
	}
}

func TestSQLiteDSN(t *testing.T) {
	for in, path := range map[string]string{
		"sqlite:mailspool.db":       "file:mailspool.db?",
		"sqlite:./data/q.db":        "file:data/q.db?",
		"sqlite:///var/lib/ms/q.db": "file:/var/lib/ms/q.db?",
		"sqlite:/var/lib/ms/q.db":   "file:/var/lib/ms/q.db?",
	} {
		dsn, err := SQLiteDSN(in)
		require.NoError(t, err, in)
		assert.True(t, strings.HasPrefix(dsn, path), "%s → %s", in, dsn)
		assert.Contains(t, dsn, "_txlock=immediate")
		assert.Contains(t, dsn, "busy_timeout")
	}
	for _, bad := range []string{"sqlite:", "sqlite://host/x.db", "sqlite:x.db?mode=ro", "sqlite::memory:", "sqlite:dir/"} {
		_, err := SQLiteDSN(bad)
		assert.Error(t, err, bad)
	}
}

func TestOpenRejectsUnknownSchemes(t *testing.T) {
	_, err := Open("oracle://u:hunter2@h/db")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown database scheme "oracle"`)
	assert.NotContains(t, err.Error(), "hunter2")
	_, err = Open("mailspool.db")
	assert.ErrorContains(t, err, "no scheme")
}

// TestPostgresDSN: postgres:// and postgresql:// URLs name one database on
// a host, and get the lock and connect timeouts unless they set them.
func TestPostgresDSN(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://app:pw@db.internal:5432/mail":                 "postgres://app:pw@db.internal:5432/mail?connect_timeout=10&lock_timeout=5s",
		"postgresql://app@db1:5432,db2:5432/mail?lock_timeout=2s": "postgresql://app@db1:5432,db2:5432/mail?connect_timeout=10&lock_timeout=2s",
		"postgres:///mail?host=/run/postgresql":                   "postgres:///mail?connect_timeout=10&host=%2Frun%2Fpostgresql&lock_timeout=5s",
	} {
		got, err := PostgresDSN(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for in, want := range map[string]string{
		"postgres://app@db.internal:5432":       "must name one database",
		"postgres://app@db.internal:5432/a/b":   "must name one database",
		"postgres:///mail":                      "has no host",
		"postgres://app@db:5432/mail?sslmode=x": "bad parameters",
	} {
		_, err := PostgresDSN(in)
		assert.ErrorContains(t, err, want, in)
	}
	db, err := Open("postgresql://app@db.internal:5432/mail")
	require.NoError(t, err)
	db.Close()
}

// Without the SQLite driver linked (this test binary links none), a sqlite:
// URL fails with an error that says what to import.
func TestOpenSQLiteWithoutDriver(t *testing.T) {
	_, err := Open("sqlite:" + t.TempDir() + "/q.db")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `import _ "modernc.org/sqlite"`)
}

// TestErrorsHidePasswords: URLs that do not parse, DSNs and user:pw@host
// given where a URL belongs are never printed whole.
func TestErrorsHidePasswords(t *testing.T) {
	for in, want := range map[string]string{
		"mysql://root:hunter2/PW@127.0.0.1:3306/app":                 `dburl: cannot parse "mysql://xxxxx@127.0.0.1:3306/app"`,
		"mysql://root:hun#ter2@127.0.0.1:3306/app":                   `dburl: cannot parse "mysql://xxxxx@127.0.0.1:3306/app"`,
		"mysql://root:hun?ter2@127.0.0.1:3306/app":                   `dburl: cannot parse "mysql://xxxxx@127.0.0.1:3306/app"`,
		"mysql://root:12#hunter2@127.0.0.1:3306/app":                 `"mysql://xxxxx@127.0.0.1:3306/app"`,
		"root:hunter2@tcp(127.0.0.1:3306)/app":                       `go-sql-driver DSN, not a URL`,
		"root:hunter2@db.internal":                                   `"xxxxx@db.internal"`,
		"mysql://root:hunter2@127.0.0.1/app?tls=maybe!":              `bad parameters`,
		"postgres://root:hunter2@127.0.0.1/app?sslmode=maybe":        `bad parameters in "postgres://root:xxxxx@127.0.0.1/app?sslmode=maybe"`,
		"postgresql://root@127.0.0.1/app?password=hunter2&sslmode=x": `password=xxxxx`,
		"postgres://root:hun#ter2@127.0.0.1:5432/app":                `dburl: cannot parse "postgres://xxxxx@127.0.0.1:5432/app"`,
	} {
		_, err := Open(in)
		require.Error(t, err, in)
		assert.NotContains(t, err.Error(), "hunter2", in)
		assert.Contains(t, err.Error(), want, in)
	}
}

// TestBadParameterWithoutPassword: with no password the driver's error is
// shown as it is (a replace of the empty password used to garble it).
func TestBadParameterWithoutPassword(t *testing.T) {
	_, err := Open("mysql://root@127.0.0.1:3306/app?parseTime=maybe")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "invalid bool value: maybe")
	assert.NotContains(t, err.Error(), "xxxxx")
}

// FuzzOpenHidesPassword: whatever follows a sentinel password, in URL,
// DSN and host forms, Open's error never shows it.
func FuzzOpenHidesPassword(f *testing.F) {
	for _, s := range []string{"", "/PW", "#x", "?x", "@x", "%zz", ":1", "?parseTime=maybe", "@h/p?tls=x#f"} {
		f.Add(s)
	}
	const sentinel = "S3NT1NEL"
	f.Fuzz(func(t *testing.T, tail string) {
		for _, form := range []string{
			"mysql://root:%s@127.0.0.1:3306/app",
			"mysql://root:%s@127.0.0.1:3306/app?parseTime=maybe",
			"mysql://root:%s@127.0.0.1:3306,db2:x/app",
			"mysql://root:%s@db1,db2/app?tls=x",
			"mariadb://:%s@db/app?socket=/run/x.sock&x=1",
			"root:%s@tcp(127.0.0.1:3306)/app",
			"root:%s@db.internal",
			"sqlite://u:%s@h/x.db",
		} {
			raw := fmt.Sprintf(form, sentinel+tail)
			db, err := Open(raw)
			if err == nil {
				db.Close()
				continue
			}
			if strings.Contains(err.Error(), sentinel) {
				t.Fatalf("Open(%q) error %q shows the password", raw, err)
			}
		}
	})
}

// A server that accepts the connection and never answers fails the
// connect after ConnectTimeout, whatever the caller's context: every
// command and the worker get an error instead of hanging.
func TestConnectIsBounded(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		var held []net.Conn // open and silent until the test ends
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	db, err := Open("mysql://app:s3cret@" + ln.Addr().String() + "/app")
	require.NoError(t, err)
	defer db.Close()
	err = db.PingContext(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no answer from the database server within 10s")
	assert.NotContains(t, err.Error(), "s3cret")
}

// TestMySQLHostList: a mysql:// URL may list several hosts, each with or
// without a port ([v6] in brackets); each becomes a DSN, in order, with
// the URL's parameters.
func TestMySQLHostList(t *testing.T) {
	dsns, err := MySQLDSNs("mysql://app:p%40ss@db1:3307,db2,[::1]:3308,[fd00::2]/shop?tls=skip-verify")
	require.NoError(t, err)
	require.Len(t, dsns, 4)
	for i, addr := range []string{"db1:3307", "db2:3306", "[::1]:3308", "[fd00::2]:3306"} {
		assert.True(t, strings.HasPrefix(dsns[i], "app:p@ss@tcp("+addr+")/shop?"), dsns[i])
		assert.Contains(t, dsns[i], "tls=skip-verify")
		assert.Contains(t, dsns[i], "interpolateParams=true")
	}
	one, err := MySQLDSNs("mysql://root@127.0.0.1:3306/test")
	require.NoError(t, err)
	assert.Len(t, one, 1)
	_, err = MySQLDSN("mysql://root:hunter2@db1,db2/shop")
	assert.ErrorContains(t, err, "lists 2 hosts and a go-sql-driver DSN names one")
	assert.NotContains(t, err.Error(), "hunter2")

	for in, want := range map[string]string{
		"mysql://root:hunter2@db1,,db2/shop":              `host 2 of 3 is empty`,
		"mysql://root:hunter2@db1,/shop":                  `host 2 of 2 is empty`,
		"mysql://root:hunter2@db1,db2:99999/shop":         `host 2 of 2, "db2:99999": port "99999" is not a number from 1 to 65535`,
		"mysql://root:hunter2@db1,db2:x/shop":             `port "x" is not a number`,
		"mysql://root:hunter2@db1,db2:/shop":              `port "" is not a number`,
		"mysql://root:hunter2@db1,:3306/shop":             `no host name before the port`,
		"mysql://root:hunter2@db1,::1/shop":               `an IPv6 address must be in brackets`,
		"mysql://root:hunter2@db1,db1:3306/shop":          `lists db1:3306 twice`,
		"mysql://root:hunter2@db1,db2/shop?socket=/x.sck": `lists 2 hosts and a socket`,
		"mysql://root:hunter2@db1,db2/":                   `must name one database`,
		"mysql://root:hunter2@db1,db2/shop?tls=maybe!":    `bad parameters`,
		// A "/" or "?" in the password: no host list, and never shown.
		"mysql://root:hun,ter2/x@db1,db2/shop": `cannot parse "mysql://xxxxx@db1,db2/shop"`,
		"mysql://root:hun,ter2?x@db1,db2/shop": `cannot parse "mysql://xxxxx@db1,db2/shop"`,
	} {
		_, err := Open(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), want, in)
		assert.NotContains(t, err.Error(), "hunter2", in)
		assert.NotContains(t, err.Error(), "ter2", in)
	}
	_, err = Open("mysql://root:hunter2@db1:3306,db2:x/shop")
	assert.ErrorContains(t, err, `"mysql://root:xxxxx@db1:3306,db2:x/shop"`, "the error shows the whole list")
}
