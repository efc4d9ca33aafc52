// Package placeholder lets one SQL text, written with ? placeholders as
// MySQL/MariaDB and SQLite take them, run on PostgreSQL too, which numbers
// them ($1, $2, ...).
package placeholder

import (
	"database/sql"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/stdlib"
)

// Numbered returns stmt with its ? placeholders numbered $1, $2, ...,
// leaving ? inside quoted strings and identifiers alone.
func Numbered(stmt string) string {
	if !strings.Contains(stmt, "?") {
		return stmt
	}
	var b strings.Builder
	b.Grow(len(stmt) + 16)
	n := 0
	var quote byte // the quote we are inside, or 0
	for i := 0; i < len(stmt); i++ {
		c := stmt[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0 // a doubled quote closes and reopens: same result
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// For returns stmt as the store behind db takes it: numbered on
// PostgreSQL (pgx's database/sql driver), as written elsewhere.
func For(db *sql.DB, stmt string) string {
	if _, ok := db.Driver().(*stdlib.Driver); ok {
		return Numbered(stmt)
	}
	return stmt
}
