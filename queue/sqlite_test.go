package queue

// The queue's tests open SQLite through dburl, which leaves linking the
// driver to the program.
import _ "modernc.org/sqlite"
