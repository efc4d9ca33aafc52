package queue

import (
	"context"
	"strconv"
	"testing"
)

// BenchmarkEnqueueRecipientIndex measures what the recipient index (schema
// version 4) costs an enqueue: the same single-mail transaction on a table
// with the index and on one whose index was dropped, in one run.
func BenchmarkEnqueueRecipientIndex(b *testing.B) {
	for _, name := range []string{"sqlite", "mariadb"} {
		b.Run(name, func(b *testing.B) {
			var s store
			if name == "sqlite" {
				s = newSQLiteStore(b)
			} else {
				s = newMariaDBStore(b)
			}
			ctx := context.Background()
			if err := Migrate(ctx, s.db, "mail_indexed", "mail_unindexed"); err != nil {
				b.Fatal(err)
			}
			drop := "ALTER TABLE `mail_unindexed` DROP KEY idx_to"
			if s.name == "sqlite" {
				drop = `DROP INDEX "mail_unindexed_idx_to"`
			}
			if _, err := s.db.ExecContext(ctx, drop); err != nil {
				b.Fatal(err)
			}
			for _, table := range []string{"mail_unindexed", "mail_indexed"} {
				q := newQueue(b, s.db, Lane{Table: table, RecipientLimit: NoLimit, IPLimit: NoLimit}, nil)
				b.Run(table, func(b *testing.B) {
					i := 0
					for b.Loop() {
						i++
						if _, err := q.Enqueue(ctx, s.db, testMessage("user"+strconv.Itoa(i)+"@example.com")); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
