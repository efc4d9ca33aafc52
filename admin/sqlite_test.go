package admin_test

// The tests open SQLite through queue/dburl, which leaves linking the
// driver to the program.
import _ "modernc.org/sqlite"
