package metrics_test

// The tests open SQLite databases: link the driver, as a program would.
import _ "modernc.org/sqlite"
