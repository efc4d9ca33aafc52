package queue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMigrateAddsLastRule upgrades a table made before last_rule existed,
// and re-runs the step as after an interruption (the column there, the
// version not yet recorded).
func TestMigrateAddsLastRule(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		d, err := detectDialect(ctx, s.db)
		require.NoError(t, err)
		// The table as version 1 made it.
		_, err = s.db.ExecContext(ctx, `ALTER TABLE `+d.quote(DefaultTable)+` DROP COLUMN last_rule`)
		require.NoError(t, err)
		_, err = s.db.ExecContext(ctx, `UPDATE `+d.quote(schemaTable)+` SET version = 1 WHERE tbl = ?`, DefaultTable)
		require.NoError(t, err)
		require.ErrorContains(t, CheckSchema(ctx, s.db, DefaultTable), "run 'mailspool migrate'")

		require.NoError(t, Migrate(ctx, s.db))
		require.NoError(t, CheckSchema(ctx, s.db, DefaultTable))
		require.Equal(t, 0, countRows(t, s.db, DefaultTable, "last_rule <> ''"))

		// Interrupted after the ALTER, before the version was recorded.
		_, err = s.db.ExecContext(ctx, `UPDATE `+d.quote(schemaTable)+` SET version = 1 WHERE tbl = ?`, DefaultTable)
		require.NoError(t, err)
		require.NoError(t, Migrate(ctx, s.db))
		require.NoError(t, CheckSchema(ctx, s.db, DefaultTable))
	})
}
