package dburl

import (
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
	_, err := Open("postgres://u:hunter2@h/db")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown database scheme "postgres"`)
	assert.NotContains(t, err.Error(), "hunter2")
	_, err = Open("mailspool.db")
	assert.ErrorContains(t, err, "no scheme")
}

// Without the SQLite driver linked (this test binary links none), a sqlite:
// URL fails with an error that says what to import.
func TestOpenSQLiteWithoutDriver(t *testing.T) {
	_, err := Open("sqlite:" + t.TempDir() + "/q.db")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `import _ "modernc.org/sqlite"`)
}
