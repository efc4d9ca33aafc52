// Package config reads mailspool's TOML config file and runs the worker of
// every lane it names: the same format and supervisor the mailspool command
// uses, for an application that embeds the worker in its own process.
//
//	cfg, err := config.Load("mailspool.toml", "")
//	db, err := cfg.Open()
//	err = config.Run(ctx, db, cfg.Lanes, nil) // until ctx ends or a worker stops
//
// The package links the MySQL driver but not SQLite's: a program that opens
// sqlite: databases (the default, DefaultDatabase) imports the driver
// itself, as the mailspool command does:
//
//	import _ "modernc.org/sqlite"
package config

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/mailspool/mailspool/admin/statuspage"
	"github.com/mailspool/mailspool/alert"
	"github.com/mailspool/mailspool/classify"
	"github.com/mailspool/mailspool/internal/duration"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/suppress"
	"github.com/mailspool/mailspool/throttle"
	"github.com/mailspool/mailspool/transport"
)

// DefaultDatabase is the database used when neither the database argument
// of Load, the config file nor MAILSPOOL_DATABASE names one.
const DefaultDatabase = "sqlite:mailspool.db"

// fileConfig is the TOML config file:
//
//	database = "mysql://mailspool:secret@127.0.0.1:3306/app"
//
//	[lanes.transactional]
//	table           = "mail_queue"
//	transport       = "smtp://apikey@smtp.example.com:587?password_env=SMTP_PASSWORD"
//	recipient_limit = "3/1h"
//	ip_limit        = "20/24h"
//
//	[lanes.marketing]
//	table     = "mail_marketing"
//	transport = "ses://default?region=eu-west-1"
//	recipient_limit = "off"
//
//	# Operator classification rules of a lane, tried in order before the
//	# built-in table (see package classify); the first match decides.
//	[[lanes.transactional.rules]]
//	name        = "acme-quota"
//	code        = 552
//	text        = "quota.*tomorrow"
//	kind        = "temporary"
//	retry_after = "24h"
//	scope       = "recipient"   # optional: recipient, message, sender, transient, lane
//
// Secrets belong in the environment: MAILSPOOL_DATABASE replaces database,
// MAILSPOOL_LANE_<NAME>_TRANSPORT replaces a lane's transport (NAME upper
// case, other characters as _), and adapters read their own variables
// (SENDGRID_API_KEY, password_env=, the AWS chain).
type fileConfig struct {
	Database    string                `toml:"database"`
	AdminListen string                `toml:"admin_listen"`
	Alerts      *alertsConfig         `toml:"alerts"`
	StatusPage  *statusPageConfig     `toml:"status_page"`
	Serve       *serveConfig          `toml:"serve"`
	Unsubscribe *unsubscribeConfig    `toml:"unsubscribe"`
	Bounces     *bouncesConfig        `toml:"bounces"`
	Lanes       map[string]laneConfig `toml:"lanes"`
	Throttle    *throttleConfig       `toml:"throttle"`
}

type laneConfig struct {
	Table              string              `toml:"table"`
	Transport          string              `toml:"transport"`
	RecipientLimit     string              `toml:"recipient_limit"`
	IPLimit            string              `toml:"ip_limit"`
	MaxSize            int                 `toml:"max_size"`
	MaxAttempts        int                 `toml:"max_attempts"`
	RetrySchedule      []string            `toml:"retry_schedule"`
	ConnectionSchedule []string            `toml:"connection_schedule"`
	BreakerThreshold   int                 `toml:"breaker_threshold"`
	Batch              int                 `toml:"batch"`
	Concurrency        int                 `toml:"concurrency"`
	SendTimeout        string              `toml:"send_timeout"`
	PollInterval       string              `toml:"poll_interval"`
	MaxMessages        int                 `toml:"max_messages"`
	ShutdownTimeout    string              `toml:"shutdown_timeout"`
	LeaseMargin        string              `toml:"lease_margin"`
	FailAfter          string              `toml:"fail_after"`
	CleanupInterval    string              `toml:"cleanup_interval"`
	KeepSent           string              `toml:"keep_sent"`
	KeepFailed         string              `toml:"keep_failed"`
	LockTimeout        string              `toml:"lock_timeout"`
	Rules              []ruleConfig        `toml:"rules"`
	Alerts             *laneAlertsConfig   `toml:"alerts"`
	Suppression        *suppressionConfig  `toml:"suppression"`
	Throttle           *laneThrottleConfig `toml:"throttle"`
	Bulk               bool                `toml:"bulk"`
	VERP               bool                `toml:"verp"`
}

// ruleConfig is one [[lanes.NAME.rules]] entry: a classify.Rule.
type ruleConfig struct {
	Name       string `toml:"name"`
	Code       int    `toml:"code"`
	Enhanced   string `toml:"enhanced"`
	Text       string `toml:"text"`
	Error      string `toml:"error"`
	Kind       string `toml:"kind"`
	Scope      string `toml:"scope"`
	RetryAfter string `toml:"retry_after"`
}

// Config is a validated configuration.
type Config struct {
	// Database is the database URL (package dburl): the database argument
	// of Load, else MAILSPOOL_DATABASE, else the file's, else
	// DefaultDatabase.
	Database string
	// Lanes are sorted by name; no two share a table.
	Lanes []Lane
	// AdminListen is the host:port of the admin listener (/metrics,
	// /healthz): MAILSPOOL_ADMIN_LISTEN, else the file's admin_listen;
	// "" (or "off" in either) leaves it off.
	AdminListen string
	// Alerts is where alerts go; nil without [alerts] or
	// MAILSPOOL_ALERT_WEBHOOK.
	Alerts *Alerts
	// StatusPage configures the status page the admin listener serves at
	// / ([status_page]); it holds secrets (the credentials): never log it.
	StatusPage statuspage.Options
	// Serve is the provider webhooks' endpoint (mailspool serve); nil
	// without [serve].
	Serve *Serve
	// Unsubscribe is one-click unsubscribe for the bulk lanes; nil
	// without [unsubscribe].
	Unsubscribe *Unsubscribe
	// Bounces is the VERP return paths' domain and key and the bounce
	// listener; nil without [bounces].
	Bounces *Bounces
}

// Lane is everything one lane's worker needs.
type Lane struct {
	Lane queue.Lane
	// Transport is the transport URL; it may hold secrets, so log it only
	// through transport.Redact.
	Transport string
	Rules     *classify.Rules // the operator's classification rules (may be empty)
	Worker    queue.WorkerOptions
	// Alerts are the lane's alert thresholds ([lanes.NAME.alerts]), used
	// when Config.Alerts is set.
	Alerts alert.Thresholds
	// Suppression is the lane's suppression policy
	// ([lanes.NAME.suppression]); Screen applies it.
	Suppression suppress.Policy
	// Throttle is the lane's send limits ([throttle], [lanes.NAME.throttle])
	// without their store; config.Throttle connects them.
	Throttle throttle.Policy
	sesQuota []int // Throttle.Limits that take their rate from SES
	// Bulk is the config's Unsubscribe for a lane marked bulk
	// (lanes.NAME.bulk): its mail carries one-click unsubscribe headers.
	// nil for a transactional lane.
	Bulk *Unsubscribe
}

var laneName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// Load reads the config file at path and applies the environment and
// database ("" = not given), which replaces the database URL of the file and
// of MAILSPOOL_DATABASE. With path "" there is no file: one lane "default"
// on table mail_queue, with the transport MAILSPOOL_LANE_DEFAULT_TRANSPORT
// names or none: there is no default transport, so a worker never sends
// real mail through the fake by accident. Every value is checked here, by
// the rules of queue.New and queue.NewWorker, and an error names its key.
func Load(path, database string) (*Config, error) {
	fc := fileConfig{}
	if path != "" {
		md, err := toml.DecodeFile(path, &fc)
		if err != nil {
			return nil, fmt.Errorf("config: %s: %s", path, redactTOMLError(err))
		}
		if undecoded := md.Undecoded(); len(undecoded) > 0 {
			keys := make([]string, len(undecoded))
			for i, k := range undecoded {
				keys[i] = k.String()
			}
			return nil, fmt.Errorf("config: %s: unknown key %s", path, strings.Join(keys, ", "))
		}
		if len(fc.Lanes) == 0 {
			return nil, fmt.Errorf("config: %s: no [lanes.NAME] section", path)
		}
		if err := zerosGiven(md, fc.Lanes); err != nil {
			return nil, fmt.Errorf("config: %s: %w", path, err)
		}
	} else {
		fc.Lanes = map[string]laneConfig{"default": {}}
	}
	cfg := &Config{Database: fc.Database}
	if err := cfg.loadWatch(&fc); err != nil {
		return nil, err
	}
	if err := cfg.loadStatusPage(&fc); err != nil {
		return nil, err
	}
	var err error
	if cfg.Unsubscribe, err = loadUnsubscribe(fc.Unsubscribe); err != nil {
		return nil, err
	}
	if cfg.Bounces, err = loadBounces(fc.Bounces); err != nil {
		return nil, err
	}
	if cfg.Serve, err = loadServe(fc.Serve, cfg.Unsubscribe != nil || cfg.Bounces != nil); err != nil {
		return nil, err
	}
	if v := os.Getenv("MAILSPOOL_DATABASE"); v != "" {
		cfg.Database = v
	}
	if database != "" {
		cfg.Database = database
	}
	if cfg.Database == "" {
		cfg.Database = DefaultDatabase
	}
	names := make([]string, 0, len(fc.Lanes))
	for name := range fc.Lanes {
		names = append(names, name)
	}
	slices.Sort(names)
	envs := map[string]string{}
	for _, name := range names {
		ls, err := buildLane(name, fc.Lanes[name], path != "")
		if err != nil {
			return nil, err
		}
		if other, dup := envs[laneEnv(name)]; dup {
			return nil, fmt.Errorf("config: lanes.%s: lanes %s and %s would both take their transport from %s; rename one", name, other, name, laneEnv(name))
		}
		envs[laneEnv(name)] = name
		if fc.Lanes[name].Bulk {
			if cfg.Unsubscribe == nil {
				return nil, fmt.Errorf("config: lanes.%s.bulk: a bulk lane's mail carries one-click unsubscribe links: configure [unsubscribe] (url, keys)", name)
			}
			ls.Bulk = cfg.Unsubscribe
		}
		if fc.Lanes[name].VERP {
			if err := verpLane(cfg.Bounces, &ls); err != nil {
				return nil, err
			}
		}
		if ls.Alerts, err = laneAlerts(name, ls.Transport, fc.Lanes[name].Alerts, cfg.Alerts != nil); err != nil {
			return nil, err
		}
		cfg.Lanes = append(cfg.Lanes, ls)
	}
	if err := checkTables(cfg.Lanes); err != nil {
		return nil, err
	}
	if err := cfg.loadThrottle(&fc); err != nil {
		return nil, err
	}
	return cfg, nil
}

// quotedText is a double-quoted string in a TOML error message.
var quotedText = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// redactTOMLError returns a TOML decoding error without the text it
// quotes from the file: a syntax error in a line that holds a secret
// ("expected four hexadecimal digits after '\u', but got
// "smtp://u:s3cret...") would show it. The line and the last key stay.
func redactTOMLError(err error) string {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		where := fmt.Sprintf("line %d", pe.Position.Line)
		if pe.LastKey != "" {
			where += " (last key " + pe.LastKey + ")"
		}
		return "toml: " + where + ": " + quotedText.ReplaceAllString(pe.Message, `"xxxxx"`)
	}
	if _, isPath := err.(*os.PathError); isPath {
		return err.Error()
	}
	// A decoding error: keep the key it names, mask any other quote.
	msg := err.Error()
	key := lastKey.FindStringIndex(msg)
	if key == nil {
		return quotedText.ReplaceAllString(msg, `"xxxxx"`)
	}
	return quotedText.ReplaceAllString(msg[:key[0]], `"xxxxx"`) + msg[key[0]:key[1]] + quotedText.ReplaceAllString(msg[key[1]:], `"xxxxx"`)
}

// lastKey is where a TOML error names the key it was at.
var lastKey = regexp.MustCompile(`\(last key "[A-Za-z0-9_.-]*"\)`)

// zerosGiven refuses a count written as 0 in the file: the zero value
// means "the default" to the queue, so "batch = 0" would silently become
// 200 instead of the error it is.
func zerosGiven(md toml.MetaData, lanes map[string]laneConfig) error {
	for name, lc := range lanes {
		for _, c := range []struct {
			key string
			v   int
		}{{"batch", lc.Batch}, {"concurrency", lc.Concurrency}, {"max_attempts", lc.MaxAttempts}, {"max_size", lc.MaxSize}, {"breaker_threshold", lc.BreakerThreshold}} {
			if c.v == 0 && md.IsDefined("lanes", name, c.key) {
				return fmt.Errorf("lanes.%s.%s: 0 is not allowed (leave the key out for the default)", name, c.key)
			}
		}
	}
	return nil
}

// checkTables refuses lanes whose tables would be one table: names are
// compared without case (SQLite, and MySQL on some systems, ignore it), and
// a lane's table may not be another lane's rate-limit table (its table +
// "_limits") or table of mail bodies (+ "_bodies"); queue.Lane.Validate
// already keeps mailspool_schema out.
func checkTables(lanes []Lane) error {
	owner := map[string]string{} // lower-case table name → "lane X's table T"
	for _, l := range lanes {
		for _, t := range []string{l.Lane.Table, l.Lane.Table + "_limits", l.Lane.Table + "_bodies"} {
			key := strings.ToLower(t)
			if other, dup := owner[key]; dup {
				return fmt.Errorf("config: lanes.%s.table: %q is the same table as %s (names are compared without case); lanes never share a table", l.Lane.Name, t, other)
			}
			owner[key] = fmt.Sprintf("lane %s's table %q", l.Lane.Name, t)
		}
	}
	return nil
}

// CheckTransport returns an error unless the lane has a transport, saying
// how to give it one. Commands that send (the worker, a test send) call it;
// the others work without a transport.
func (l Lane) CheckTransport() error {
	if l.Transport != "" {
		return nil
	}
	return fmt.Errorf("config: lane %s has no transport: name one in the config file (transport = \"smtp://user@smtp.example.com:587?password_env=SMTP_PASSWORD\") or set %s; there is no default (fake:// replays recorded replies and delivers nothing, for trying things out)", l.Lane.Name, laneEnv(l.Lane.Name))
}

// buildLane checks one lane; fromFile says it comes from a config file,
// where a lane without a transport is a mistake.
func buildLane(name string, lc laneConfig, fromFile bool) (Lane, error) {
	key := "lanes." + name
	if !laneName.MatchString(name) {
		return Lane{}, fmt.Errorf("config: %s: lane names are 1-32 of a-z, 0-9, _ and -, starting with a letter", key)
	}
	fail := func(field string, err error) (Lane, error) {
		return Lane{}, fmt.Errorf("config: %s.%s: %w", key, field, err)
	}
	ls := Lane{Transport: lc.Transport}
	if v := os.Getenv(laneEnv(name)); v != "" {
		ls.Transport = v
	}
	if ls.Transport == "" && fromFile {
		return fail("transport", fmt.Errorf("missing (a transport URL, or set %s)", laneEnv(name)))
	}
	if err := checkComposite(name, ls.Transport); err != nil {
		return Lane{}, err
	}
	l := queue.Lane{Name: name, Table: lc.Table, MaxSize: lc.MaxSize}
	if l.MaxSize == 0 && ls.Transport != "" {
		l.MaxSize = DefaultMaxSize(ls.Transport)
	}
	if l.Table == "" {
		l.Table = queue.DefaultTable
	}
	var err error
	if l.RecipientLimit, err = parseLimit(lc.RecipientLimit); err != nil {
		return fail("recipient_limit", err)
	}
	if l.IPLimit, err = parseLimit(lc.IPLimit); err != nil {
		return fail("ip_limit", err)
	}
	l.Retry = queue.RetryPolicy{MaxAttempts: lc.MaxAttempts, BreakerThreshold: lc.BreakerThreshold}
	if l.Retry.Schedule, err = parseDurations(lc.RetrySchedule); err != nil {
		return fail("retry_schedule", err)
	}
	if l.Retry.ConnectionSchedule, err = parseDurations(lc.ConnectionSchedule); err != nil {
		return fail("connection_schedule", err)
	}
	if lc.LockTimeout != "" {
		if l.LockTimeout, err = duration.Positive(lc.LockTimeout); err != nil {
			return fail("lock_timeout", err)
		}
	}
	ls.Lane = l
	w := queue.WorkerOptions{Batch: lc.Batch, Concurrency: lc.Concurrency, MaxMessages: lc.MaxMessages}
	for _, d := range []struct {
		field string
		value string
		dst   *time.Duration
	}{
		{"send_timeout", lc.SendTimeout, &w.SendTimeout},
		{"poll_interval", lc.PollInterval, &w.PollInterval},
		{"shutdown_timeout", lc.ShutdownTimeout, &w.ShutdownTimeout},
		{"lease_margin", lc.LeaseMargin, &w.LeaseMargin},
		{"fail_after", lc.FailAfter, &w.FailAfter},
		{"cleanup_interval", lc.CleanupInterval, &w.CleanupInterval},
		{"keep_sent", lc.KeepSent, &w.Retention.Sent},
		{"keep_failed", lc.KeepFailed, &w.Retention.Failed},
	} {
		if d.value == "" {
			continue
		}
		if *d.dst, err = duration.Positive(d.value); err != nil {
			return fail(d.field, err)
		}
	}
	ls.Worker = w
	if ls.Rules, err = buildRules(lc.Rules); err != nil {
		return fail("rules", err)
	}
	if ls.Suppression, err = buildPolicy(lc.Suppression); err != nil {
		return fail("suppression", err)
	}
	// Let the queue and worker check the rest now, so a bad value is
	// reported with its lane before anything runs.
	if err := ls.Lane.Validate(); err != nil {
		return Lane{}, fmt.Errorf("config: %s: %w", key, err)
	}
	if err := ls.Worker.Validate(); err != nil {
		return Lane{}, fmt.Errorf("config: %s: %w", key, err)
	}
	return ls, nil
}

// ruleKinds are the kinds an operator's rule may give, by stored name.
var ruleKinds = map[string]transport.Kind{
	transport.Temporary.String():  transport.Temporary,
	transport.Permanent.String():  transport.Permanent,
	transport.Connection.String(): transport.Connection,
}

// buildRules turns a lane's [[rules]] into classify.Rules; errors name
// the rule.
func buildRules(rcs []ruleConfig) (*classify.Rules, error) {
	rules := make([]classify.Rule, len(rcs))
	for i, rc := range rcs {
		name := rc.Name
		if name == "" {
			name = fmt.Sprintf("#%d", i+1)
		}
		kind, ok := ruleKinds[rc.Kind]
		if !ok {
			return nil, fmt.Errorf("rule %s: kind %q: want temporary, permanent or connection", name, rc.Kind)
		}
		r := classify.Rule{Name: rc.Name, Code: rc.Code, Enhanced: rc.Enhanced, Text: rc.Text, Error: rc.Error, Kind: kind}
		if rc.Scope != "" {
			scope, err := transport.ParseScope(rc.Scope)
			if err != nil {
				return nil, fmt.Errorf("rule %s: scope %q: want recipient, message, sender, transient or lane", name, rc.Scope)
			}
			r.Scope = &scope
		}
		var err error
		if rc.RetryAfter != "" {
			if r.RetryAfter, err = duration.Positive(rc.RetryAfter); err != nil {
				return nil, fmt.Errorf("rule %s: retry_after: %w", name, err)
			}
		}
		rules[i] = r
	}
	rs, err := classify.NewRules(rules)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "classify: "))
	}
	return rs, nil
}

// Open opens the configured database (package dburl).
func (c *Config) Open() (*sql.DB, error) {
	return dburl.Open(c.Database)
}

// Pick returns the lane called name, or every lane when name is "".
func (c *Config) Pick(name string) ([]Lane, error) {
	if name == "" {
		return c.Lanes, nil
	}
	var names []string
	for _, l := range c.Lanes {
		if l.Lane.Name == name {
			return []Lane{l}, nil
		}
		names = append(names, l.Lane.Name)
	}
	return nil, fmt.Errorf("config: no lane %q (lanes: %s)", name, strings.Join(names, ", "))
}

// Tables returns the lanes' tables, for queue.Migrate.
func Tables(lanes []Lane) []string {
	t := make([]string, len(lanes))
	for i, l := range lanes {
		t[i] = l.Lane.Table
	}
	return t
}

// laneEnv is the environment variable that replaces a lane's transport.
func laneEnv(name string) string {
	return "MAILSPOOL_LANE_" + strings.ToUpper(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)) + "_TRANSPORT"
}

// parseLimit reads "N/DURATION" ("3/1h", "20/24h", "100/1d") or "off";
// "" is "off" too: lanes have no limits unless they are set.
func parseLimit(s string) (queue.Limit, error) {
	switch s {
	case "":
		return queue.Limit{}, nil
	case "off":
		return queue.NoLimit, nil
	}
	n, per, ok := strings.Cut(s, "/")
	count, err := strconv.Atoi(strings.TrimSpace(n))
	if !ok || err != nil || count < 1 {
		return queue.Limit{}, fmt.Errorf("%q is not N/DURATION (e.g. 3/1h) or off", s)
	}
	d, err := duration.Positive(strings.TrimSpace(per))
	if errors.Is(err, duration.ErrTooLong) {
		return queue.Limit{}, err
	}
	if err != nil {
		return queue.Limit{}, fmt.Errorf("%q is not N/DURATION (e.g. 3/1h) or off", s)
	}
	return queue.Limit{N: count, Per: d}, nil
}

func parseDurations(ss []string) ([]time.Duration, error) {
	if ss == nil {
		return nil, nil
	}
	if len(ss) == 0 {
		return nil, errors.New("empty list")
	}
	ds := make([]time.Duration, len(ss))
	for i, s := range ss {
		d, err := duration.Positive(s)
		if err != nil {
			return nil, err
		}
		ds[i] = d
	}
	return ds, nil
}
