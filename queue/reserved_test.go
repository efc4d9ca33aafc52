package queue

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A lane table named like one of mailspool's own tables (those the docs
// name: mailspool_alerts, mailspool_runs) is refused by Lane.Validate, and
// by Migrate before any DDL: nothing is created, not even another lane's
// tables.
func TestOwnTablesAreRefusedBeforeAnyDDL(t *testing.T) {
	t.Parallel()
	for _, name := range append([]string{"MAILSPOOL_RUNS", "Mailspool_Alerts"}, OwnTables...) {
		err := Lane{Table: name}.Validate()
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "one of mailspool's own tables", name)
	}
	db, err := dburl.Open("sqlite:" + filepath.Join(t.TempDir(), "fresh.db"))
	require.NoError(t, err)
	defer db.Close()
	err = Migrate(context.Background(), db, "mail_ok", "mailspool_alerts")
	require.ErrorContains(t, err, "one of mailspool's own tables")
	var n int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'`).Scan(&n))
	assert.Zero(t, n, "no table was created")
}
