package queue

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
)

func TestMySQLDialect(t *testing.T) {
	cases := []struct {
		version                                   string
		mariadb, skipLocked, claimReadUncommitted bool
	}{
		{"10.11.19-MariaDB-0+deb12u1", true, true, true},
		{"10.6.0-MariaDB", true, true, true},
		{"10.5.23-MariaDB-log", true, false, false},
		{"11.4.2-MariaDB", true, true, true},
		{"8.0.36", false, true, true},
		{"8.0.0-dmr", false, false, false},
		{"5.7.44-log", false, false, false},
		{"9.1.0", false, true, true},
		{"8.0.11-TiDB-v7.5.1", false, true, false}, // TiDB refuses READ UNCOMMITTED
	}
	for _, c := range cases {
		d := mysqlDialect(c.version)
		if d.mariadb != c.mariadb || d.skipLocked != c.skipLocked || d.sqlite {
			t.Errorf("%s: got %+v", c.version, d)
		}
		if ru := d.claimTxOptions().Isolation == sql.LevelReadUncommitted; ru != c.claimReadUncommitted {
			t.Errorf("%s: claim in READ UNCOMMITTED: %v", c.version, ru)
		}
	}
}

func TestBoundedStatements(t *testing.T) {
	const sel = "SELECT id FROM t WHERE status = ?"
	if got := (dialect{mariadb: true}).bounded(sel); got != "SET STATEMENT max_statement_time=5, innodb_lock_wait_timeout=5 FOR "+sel {
		t.Error(got)
	}
	if got := (dialect{}).bounded(sel); got != "SELECT /*+ MAX_EXECUTION_TIME(5000) SET_VAR(innodb_lock_wait_timeout=5) */ id FROM t WHERE status = ?" {
		t.Error(got)
	}
	if got := (dialect{}).bounded("UPDATE t SET a = 1"); got != "UPDATE /*+ SET_VAR(innodb_lock_wait_timeout=5) */ t SET a = 1" {
		t.Error(got)
	}
	if got := (dialect{sqlite: true}).bounded(sel); got != sel {
		t.Error(got)
	}
}

func TestIsLockConflict(t *testing.T) {
	for err, want := range map[error]bool{
		&mysql.MySQLError{Number: 1213}:                                  true,
		fmt.Errorf("claim: %w", &mysql.MySQLError{Number: 1205}):         true,
		&mysql.MySQLError{Number: 1062}:                                  false,
		errors.New("Error 1213: Deadlock found (but not a MySQL error)"): false,
	} {
		assert.Equal(t, want, isLockConflict(err), err.Error())
	}
}
