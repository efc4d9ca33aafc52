// Package sqlstore tells which of mailspool's stores a *sql.DB handle
// talks to, from its driver: MySQL/MariaDB (go-sql-driver/mysql), SQLite
// (modernc.org/sqlite) or PostgreSQL (pgx's database/sql driver).
package sqlstore

import (
	"database/sql"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/mailspool/mailspool/internal/placeholder"
)

// Name is a store, as mailspool's URLs and --print-sql name it.
type Name string

// The stores.
const (
	MySQL    Name = "mysql"
	SQLite   Name = "sqlite"
	Postgres Name = "postgres"
)

// Of returns the store behind db, or an error naming an unknown driver.
func Of(db *sql.DB) (Name, error) {
	if _, ok := db.Driver().(*stdlib.Driver); ok {
		return Postgres, nil
	}
	switch name := fmt.Sprintf("%T", db.Driver()); {
	case strings.Contains(name, "sqlite"):
		return SQLite, nil
	case strings.Contains(name, "mysql"):
		return MySQL, nil
	default:
		return "", fmt.Errorf("unsupported database driver %s (want go-sql-driver/mysql, github.com/jackc/pgx/v5/stdlib or modernc.org/sqlite)", name)
	}
}

// Rebind returns q, written with ? placeholders, as store n takes it:
// numbered ($1, $2, ...) on PostgreSQL, as written on the others.
func (n Name) Rebind(q string) string {
	if n != Postgres {
		return q
	}
	return placeholder.Numbered(q)
}
