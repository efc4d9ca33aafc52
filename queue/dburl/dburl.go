// Package dburl opens the database a mailspool queue lives in from a URL:
//
//	mysql://user:password@host:3306/dbname?param=value   MySQL or MariaDB
//	postgres://user:password@host:5432/dbname?param=value PostgreSQL (also postgresql://)
//	sqlite:mailspool.db                                   SQLite file, relative to the working directory
//	sqlite:///var/lib/mailspool/queue.db                  SQLite file, absolute path
//
// MySQL query parameters are go-sql-driver/mysql DSN parameters (tls,
// timeout, readTimeout, ...); "socket=/run/mysqld/mysqld.sock" connects
// through a Unix socket instead of TCP. interpolateParams=true is the
// default. A MySQL URL may list several hosts
// (mysql://user:pw@h1:3306,h2:3306,h3/db, e.g. the nodes of a Galera
// cluster): a new connection tries them in order, starting from the one
// that answered last, so that a pool whose server died moves to the next
// one that answers and stays there. PostgreSQL query parameters are libpq's (sslmode, connect_timeout,
// application_name, ...) and server settings, as pgx reads them; a URL
// may list several hosts (postgres://h1:5432,h2:5432/db), tried in order.
// lock_timeout=5s is the default, so that a statement waiting for a lock
// gives up (the queue refuses a PostgreSQL handle without one), and
// connect_timeout=10. SQLite files are opened in WAL mode with a busy timeout and
// BEGIN IMMEDIATE transactions, so concurrent writers wait instead of failing;
// SQLite URLs take no parameters.
//
// # Drivers
//
// The program chooses the drivers it links. dburl links the MySQL driver
// (github.com/go-sql-driver/mysql, whose DSN it writes) and pgx's
// database/sql driver (github.com/jackc/pgx/v5/stdlib, which the queue
// uses for LISTEN/NOTIFY anyway), but not the SQLite one: a program that opens sqlite: URLs imports its driver itself,
//
//	import _ "modernc.org/sqlite"
//
// as package cli does in drivers.go, and a MySQL-only program does not
// carry SQLite.
package dburl

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/mailspool/mailspool/transport"
)

// sqliteDriver is the database/sql name modernc.org/sqlite registers.
const sqliteDriver = "sqlite"

// Open opens the database rawURL names. Errors never contain the password.
// A sqlite: URL needs the SQLite driver linked (see Drivers above).
func Open(rawURL string) (*sql.DB, error) {
	scheme, _, ok := strings.Cut(rawURL, ":")
	if !ok {
		return nil, fmt.Errorf("dburl: %q has no scheme; want mysql://user:password@host:port/dbname, postgres://user:password@host:port/dbname or sqlite:path", redact(rawURL))
	}
	switch strings.ToLower(scheme) {
	case "mysql", "mariadb":
		conn, err := MySQLConnector(rawURL)
		if err != nil {
			return nil, err
		}
		db := sql.OpenDB(conn)
		db.SetConnMaxLifetime(5 * time.Minute)
		return db, nil
	case "postgres", "postgresql":
		dsn, err := PostgresDSN(rawURL)
		if err != nil {
			return nil, err
		}
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, fmt.Errorf("dburl: bad parameters in %q: %v", redact(rawURL), hidePassword(err.Error(), rawURL))
		}
		db := stdlib.OpenDB(*cfg)
		db.SetConnMaxLifetime(5 * time.Minute)
		return db, nil
	case "sqlite", "sqlite3", "file":
		dsn, err := SQLiteDSN(rawURL)
		if err != nil {
			return nil, err
		}
		if dir := filepath.Dir(sqlitePath(dsn)); !isDir(dir) {
			return nil, fmt.Errorf("dburl: %s: the directory %s does not exist", redact(rawURL), dir)
		}
		if !slices.Contains(sql.Drivers(), sqliteDriver) {
			return nil, fmt.Errorf("dburl: %s: this program links no SQLite driver; add import _ \"modernc.org/sqlite\"", redact(rawURL))
		}
		return sql.Open(sqliteDriver, dsn)
	default:
		if strings.Contains(rawURL, "@tcp(") || strings.Contains(rawURL, "@unix(") {
			return nil, fmt.Errorf("dburl: %q is a go-sql-driver DSN, not a URL; write mysql://user:password@host:3306/dbname", redact(rawURL))
		}
		return nil, fmt.Errorf("dburl: unknown database scheme %q in %q; want mysql://..., postgres://... or sqlite:PATH", scheme, redact(rawURL))
	}
}

// ConnectTimeout bounds making one MySQL connection: the dial and the
// handshake, so that a server (or a proxy) that accepts the connection and
// then never answers fails the statement that wanted a connection instead
// of hanging it forever.
const ConnectTimeout = 10 * time.Second

// boundedConnector is a driver.Connector whose Connect gives up after
// ConnectTimeout.
type boundedConnector struct{ driver.Connector }

func (c boundedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	conn, err := c.Connector.Connect(ctx)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("dburl: no answer from the database server within %v of connecting: %w", ConnectTimeout, err)
	}
	return conn, err
}

// ErrNoFile matches (errors.Is) OpenExisting's error for an SQLite file
// that does not exist.
var ErrNoFile = errors.New("no such file")

// OpenExisting is Open for commands that only use a database that
// "mailspool migrate" made: an SQLite file that does not exist is an error
// saying so, and is not created.
func OpenExisting(rawURL string) (*sql.DB, error) {
	if scheme, _, _ := strings.Cut(rawURL, ":"); slices.Contains([]string{"sqlite", "sqlite3", "file"}, strings.ToLower(scheme)) {
		dsn, err := SQLiteDSN(rawURL)
		if err != nil {
			return nil, err
		}
		path := sqlitePath(dsn)
		if dir := filepath.Dir(path); !isDir(dir) {
			return nil, fmt.Errorf("dburl: %s: the directory %s does not exist", redact(rawURL), dir)
		}
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("dburl: the SQLite file %s does not exist yet: run 'mailspool migrate' to create it: %w", path, ErrNoFile)
		}
	}
	return Open(rawURL)
}

// sqlitePath is the file of a DSN SQLiteDSN made.
func sqlitePath(dsn string) string {
	path, _, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	return path
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// MySQLDSN converts a mysql:// URL into a go-sql-driver/mysql DSN. A DSN
// names one server: a URL that lists several hosts is refused here (Open
// and MySQLConnector take it).
func MySQLDSN(rawURL string) (string, error) {
	dsns, err := MySQLDSNs(rawURL)
	if err != nil {
		return "", err
	}
	if len(dsns) > 1 {
		return "", fmt.Errorf("dburl: %s lists %d hosts and a go-sql-driver DSN names one; open it with dburl.Open", redact(rawURL), len(dsns))
	}
	return dsns[0], nil
}

// MySQLConnector is the database/sql connector Open uses for a mysql://
// URL: it tries the URL's hosts in order, starting from the last one that
// answered, each bounded by ConnectTimeout.
func MySQLConnector(rawURL string) (driver.Connector, error) {
	dsns, err := MySQLDSNs(rawURL)
	if err != nil {
		return nil, err
	}
	f := &failoverConnector{}
	for _, dsn := range dsns {
		cfg, err := mysql.ParseDSN(dsn) // MySQLDSNs parsed it already
		if err != nil {
			return nil, fmt.Errorf("dburl: %s: bad parameters", redact(rawURL))
		}
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, fmt.Errorf("dburl: %s: %v", redact(rawURL), hide(err.Error(), cfg.Passwd))
		}
		f.hosts = append(f.hosts, cfg.Addr)
		f.conns = append(f.conns, boundedConnector{conn})
	}
	if len(f.conns) == 1 {
		return f.conns[0], nil
	}
	return f, nil
}

// failoverConnector connects to the first of several servers that
// answers, starting from the one that answered last, so that a pool whose
// server died moves to the next one and stays there (on a Galera cluster,
// a pool split over two nodes would write on both).
type failoverConnector struct {
	hosts []string // host:port of each, for errors
	conns []driver.Connector
	last  atomic.Int32 // index of the server that answered last
}

func (f *failoverConnector) Connect(ctx context.Context) (driver.Conn, error) {
	first := int(f.last.Load())
	var errs []error
	for i := range f.conns {
		k := (first + i) % len(f.conns)
		conn, err := f.conns[k].Connect(ctx)
		if err == nil {
			f.last.Store(int32(k))
			return conn, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		errs = append(errs, fmt.Errorf("%s: %w", f.hosts[k], err))
	}
	return nil, fmt.Errorf("dburl: none of the %d database hosts answered: %w", len(f.conns), errors.Join(errs...))
}

func (f *failoverConnector) Driver() driver.Driver { return f.conns[0].Driver() }

// MySQLDSNs converts a mysql:// URL into go-sql-driver/mysql DSNs, one per
// host it lists (mysql://user:pw@h1:3306,h2:3306/db), in order.
func MySQLDSNs(rawURL string) ([]string, error) {
	hosts, rawURL, err := splitHosts(rawURL)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("dburl: cannot parse %q", redact(rawURL))
	}
	if hosts == nil {
		dsn, err := mysqlDSN(u)
		if err != nil {
			return nil, err
		}
		return []string{dsn}, nil
	}
	if u.Query().Has("socket") {
		return nil, fmt.Errorf("dburl: %q lists %d hosts and a socket; a socket names one local server: give either", redactHosts(u, hosts), len(hosts))
	}
	dsns := make([]string, len(hosts))
	seen := map[string]bool{}
	for i, h := range hosts {
		if h == "" {
			return nil, fmt.Errorf("dburl: %q: host %d of %d is empty (hosts are separated by single commas)", redactHosts(u, hosts), i+1, len(hosts))
		}
		addr, err := hostPort(h)
		if err != nil {
			return nil, fmt.Errorf("dburl: %q: host %d of %d, %q: %v", redactHosts(u, hosts), i+1, len(hosts), h, err)
		}
		if seen[addr] {
			return nil, fmt.Errorf("dburl: %q lists %s twice", redactHosts(u, hosts), addr)
		}
		seen[addr] = true
		u.Host = addr
		if dsns[i], err = mysqlDSN(u); err != nil {
			return nil, err
		}
	}
	return dsns, nil
}

// splitHosts finds a comma-separated host list in rawURL's authority. With
// several hosts it returns them and rawURL with a single stand-in host, so
// that it parses as a URL; with one, nil and rawURL unchanged.
func splitHosts(rawURL string) ([]string, string, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, rawURL, nil
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority := rest[:end]
	at := strings.LastIndex(authority, "@") + 1
	list := authority[at:]
	if !strings.Contains(list, ",") || strings.Contains(rest[end:], "@") {
		// One host; or a "/", "?" or "#" before the user's "@", which
		// url.Parse refuses, as it should: what precedes it is no host
		// list, and may be a password.
		return nil, rawURL, nil
	}
	return strings.Split(list, ","), scheme + "://" + authority[:at] + hostsStandIn + rest[end:], nil
}

// hostsStandIn stands for a host list in a URL given to url.Parse.
const hostsStandIn = "mailspool-hosts.invalid"

// hostPort checks one host of a list: host, host:port, [v6] or [v6]:port;
// the port defaults to 3306.
func hostPort(h string) (string, error) {
	host, port := h, "3306"
	if strings.HasPrefix(h, "[") || strings.Count(h, ":") == 1 {
		if i := strings.LastIndex(h, "]"); !strings.Contains(h[max(i, 0):], ":") {
			h += ":3306" // [v6] without a port
		}
		var err error
		if host, port, err = net.SplitHostPort(h); err != nil {
			return "", fmt.Errorf("not host:port (%v)", err)
		}
	} else if strings.Contains(h, ":") {
		return "", errors.New("an IPv6 address must be in brackets, e.g. [::1]:3306")
	}
	if host == "" {
		return "", errors.New("no host name before the port")
	}
	if strings.ContainsAny(host, "/@ ") {
		return "", errors.New("not a host name")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	return net.JoinHostPort(host, port), nil
}

// redactHosts is u, redacted, with its host list put back.
func redactHosts(u *url.URL, hosts []string) string {
	v := *u
	v.Host = hostsStandIn
	return strings.Replace(transport.RedactURL(&v), hostsStandIn, strings.Join(hosts, ","), 1)
}

// mysqlDSN converts a parsed mysql:// URL naming one host into a DSN.
func mysqlDSN(u *url.URL) (string, error) {
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if cfg.DBName == "" || strings.Contains(cfg.DBName, "/") {
		return "", fmt.Errorf("dburl: %q must name one database in its path, e.g. mysql://root@127.0.0.1:3306/test", transport.RedactURL(u))
	}
	q := u.Query()
	if sock := q.Get("socket"); sock != "" {
		cfg.Net, cfg.Addr = "unix", sock
		q.Del("socket")
	} else {
		if u.Host == "" {
			return "", fmt.Errorf("dburl: %q has no host", transport.RedactURL(u))
		}
		cfg.Net, cfg.Addr = "tcp", u.Host
		if u.Port() == "" {
			cfg.Addr = u.Host + ":3306"
		}
	}
	cfg.InterpolateParams = true
	cfg.Timeout = 10 * time.Second
	base := cfg.FormatDSN()
	if len(q) == 0 {
		return base, nil
	}
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	dsn := base + sep + q.Encode()
	if _, err := mysql.ParseDSN(dsn); err != nil {
		return "", fmt.Errorf("dburl: bad parameters in %q: %v", transport.RedactURL(u), hide(err.Error(), cfg.Passwd))
	}
	return dsn, nil
}

// PostgresDSN checks a postgres:// or postgresql:// URL and returns it as
// the connection string pgx reads, with lock_timeout=5s and
// connect_timeout=10 unless it sets them.
func PostgresDSN(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("dburl: cannot parse %q", redact(rawURL))
	}
	q := u.Query()
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return "", fmt.Errorf("dburl: %q must name one database in its path, e.g. postgres://postgres@127.0.0.1:5432/postgres", transport.RedactURL(u))
	}
	if u.Host == "" && q.Get("host") == "" {
		return "", fmt.Errorf("dburl: %q has no host", transport.RedactURL(u))
	}
	if !q.Has("lock_timeout") {
		q.Set("lock_timeout", "5s")
	}
	if !q.Has("connect_timeout") {
		q.Set("connect_timeout", "10")
	}
	u.RawQuery = q.Encode()
	if _, err := pgx.ParseConfig(u.String()); err != nil {
		return "", fmt.Errorf("dburl: bad parameters in %q: %v", redact(rawURL), hidePassword(err.Error(), rawURL))
	}
	return u.String(), nil
}

// hidePassword hides in s the password of rawURL, given as user:password
// or as a password parameter.
func hidePassword(s, rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return redact(s)
	}
	pw, _ := u.User.Password()
	s = hide(s, pw)
	return hide(s, u.Query().Get("password"))
}

// SQLiteDSN converts a sqlite: URL into a modernc.org/sqlite DSN.
func SQLiteDSN(rawURL string) (string, error) {
	_, rest, _ := strings.Cut(rawURL, ":")
	if strings.HasPrefix(rest, "//") {
		u, err := url.Parse(rawURL)
		if err != nil {
			return "", fmt.Errorf("dburl: cannot parse %q", redact(rawURL))
		}
		if u.Host != "" {
			return "", fmt.Errorf("dburl: %q: an SQLite URL has no host; write sqlite:relative/path.db or sqlite:///absolute/path.db", redact(rawURL))
		}
		if u.RawQuery != "" {
			return "", fmt.Errorf("dburl: %q: SQLite URLs take no parameters", redact(rawURL))
		}
		rest = u.Path
	}
	if strings.Contains(rest, "?") {
		return "", fmt.Errorf("dburl: %q: SQLite URLs take no parameters", redact(rawURL))
	}
	if rest == "" || strings.HasSuffix(rest, "/") {
		return "", fmt.Errorf("dburl: %q names no file", redact(rawURL))
	}
	if rest == ":memory:" {
		return "", fmt.Errorf("dburl: %q: in-memory SQLite is not supported (each connection would see its own database)", redact(rawURL))
	}
	path := filepath.Clean(rest)
	return "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_txlock=immediate", nil
}

func redact(rawURL string) string { return transport.Redact(rawURL) }

// hide replaces secret in s; an empty secret hides nothing.
func hide(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "xxxxx")
}
