package cli

// The database drivers this program ships, for queue/dburl: MySQL/MariaDB is
// linked by dburl itself (it writes that driver's DSN); the embedded SQLite
// store, the default, is linked here.
import _ "modernc.org/sqlite"
