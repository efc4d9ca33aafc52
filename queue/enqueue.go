package queue

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"regexp"
	"strings"
	"time"

	"github.com/mailspool/mailspool/attachment"
	"github.com/mailspool/mailspool/mailaddr"
	"github.com/mailspool/mailspool/transport"
)

// DBTX is what Enqueue writes through: the caller's *sql.Tx (so the mail
// commits or rolls back with the business write), or a *sql.DB, in which
// case Enqueue runs its own transaction. Anything else must already be
// inside a transaction.
type DBTX interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// ErrInvalid matches every error Enqueue returns for bad input (errors.Is);
// transport.ErrInvalidMessage matches the message problems among them.
var ErrInvalid = errors.New("queue: invalid enqueue")

// InvalidError says what is wrong with an enqueue.
type InvalidError struct{ Reason string }

func (e *InvalidError) Error() string        { return "queue: invalid enqueue: " + e.Reason }
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// ErrTooLarge matches the error of an enqueue whose message is over the
// lane's MaxSize (errors.Is); it also matches ErrInvalid.
var ErrTooLarge = errors.New("queue: message too large")

// TooLargeError is a message over its lane's MaxSize, measured encoded
// (transport.Message.EncodedSize): nothing was written.
type TooLargeError struct {
	Size, Limit int
	Lane        string
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("queue: invalid enqueue: message of %d bytes encoded is over lane %s's limit of %d", e.Size, e.Lane, e.Limit)
}

// Is reports whether target is ErrTooLarge or ErrInvalid.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge || target == ErrInvalid }

// Option adjusts one Enqueue.
type Option func(*enqueueOptions) error

type enqueueOptions struct {
	nice        int // MaxPriority - the priority
	idemKey     string
	idemScope   string // RecipientIdempotencyKey: idemKey is made from it and the recipient
	duplicate   *bool
	clientIP    string
	maxAttempts int
	notAfter    time.Time
	delay       time.Duration
	template    string
	list        string
	bypass      string // BypassSuppression's reason
}

// Priorities of mail within a lane: due mail is claimed highest priority
// first, then oldest first.
const (
	MinPriority     = 0
	MaxPriority     = 9
	DefaultPriority = 5
)

// Priority sets the mail's priority, MinPriority to MaxPriority
// (DefaultPriority when not given): within the lane, due mail of a higher
// priority is claimed before all due mail of a lower one, so a password
// reset enqueued with Priority(9) behind a bulk backlog at the default
// goes out with the next claim. It orders mail of one status: a fresh mail
// is claimed before a due retry whatever their priorities. Bulk and
// transactional streams that must never wait on each other belong in
// separate lanes.
func Priority(n int) Option {
	return func(o *enqueueOptions) error {
		if n < MinPriority || n > MaxPriority {
			return &InvalidError{Reason: fmt.Sprintf("priority %d out of range %d..%d", n, MinPriority, MaxPriority)}
		}
		o.nice = MaxPriority - n
		return nil
	}
}

// IdempotencyKey makes the enqueue happen at most once per key and lane: a
// later Enqueue with the same key returns the first row's id and queues
// nothing (nor counts against the rate limits). Keys are compared as
// written (case matters on every store); a key with a control or format
// character, or ending in a space, is refused (MySQL's collations compare
// "order-1 " equal to "order-1", so the second would be taken for a
// duplicate and never queued).
func IdempotencyKey(key string) Option {
	return func(o *enqueueOptions) error {
		if key == "" || len(key) > 191 {
			return &InvalidError{Reason: fmt.Sprintf("idempotency key must be 1..191 bytes, got %d", len(key))}
		}
		if reason := controlProblem(key); reason != "" {
			return &InvalidError{Reason: "idempotency key " + reason}
		}
		if strings.HasSuffix(key, " ") {
			return &InvalidError{Reason: fmt.Sprintf("idempotency key %q ends in a space, which MySQL does not tell apart from the key without it", key)}
		}
		o.idemKey = key
		return nil
	}
}

// RecipientIdempotencyKey makes the enqueue happen at most once per scope,
// recipient mailbox and lane: "send invite 42 to each attendee once" is
// RecipientIdempotencyKey("invite-42"). The key is the scope, a slash and
// the recipient's mailaddr.Key (the normalized address with the local part
// case-folded), so that every spelling of one mailbox (case, fullwidth
// letters, an ideographic full stop, a U-label or its A-label) is one key;
// a key over 191 bytes ends in a SHA-256 of the address instead. Building
// the key from the address as typed (IdempotencyKey("invite-42/"+addr))
// would queue one mail per spelling. IdempotencyKey itself is opaque and
// compared as written. The scope is 1..128 bytes without control or format
// characters; giving both options is an error.
func RecipientIdempotencyKey(scope string) Option {
	return func(o *enqueueOptions) error {
		if scope == "" || len(scope) > maxIdemScope {
			return &InvalidError{Reason: fmt.Sprintf("idempotency scope must be 1..%d bytes, got %d", maxIdemScope, len(scope))}
		}
		if reason := controlProblem(scope); reason != "" {
			return &InvalidError{Reason: "idempotency scope " + reason}
		}
		o.idemScope = scope
		return nil
	}
}

const maxIdemScope = 128

// recipientIdemKey is RecipientIdempotencyKey's key for a recipient whose
// mailaddr.Key is addrKey.
func recipientIdemKey(scope, addrKey string) string {
	if k := scope + "/" + addrKey; len(k) <= 191 {
		return k
	}
	sum := sha256.Sum256([]byte(addrKey))
	return scope + "/sha256:" + hex.EncodeToString(sum[:16])
}

// ReportDuplicate sets *dup to whether the enqueue found its
// IdempotencyKey used already and so queued nothing: the id it returns is
// then the first row's. A caller that reports what was queued counts rows
// written by it, not ids.
func ReportDuplicate(dup *bool) Option {
	return func(o *enqueueOptions) error {
		o.duplicate = dup
		return nil
	}
}

// ClientIP names the client the mail was requested by; the lane's IPLimit
// applies to it.
func ClientIP(ip string) Option {
	return func(o *enqueueOptions) error {
		parsed := net.ParseIP(ip)
		if parsed == nil {
			return &InvalidError{Reason: fmt.Sprintf("client IP %q does not parse", ip)}
		}
		o.clientIP = parsed.String()
		return nil
	}
}

// MaxAttempts overrides the lane's MaxAttempts for this mail; 1 makes it a
// single-attempt notification that is failed instead of retried.
func MaxAttempts(n int) Option {
	return func(o *enqueueOptions) error {
		if n < 1 || n > 1000 {
			return &InvalidError{Reason: fmt.Sprintf("max attempts %d out of range 1..1000", n)}
		}
		o.maxAttempts = n
		return nil
	}
}

// NotAfter drops the mail (failed as expired) if it cannot be sent by t:
// for notifications that are worthless when late.
func NotAfter(t time.Time) Option {
	return func(o *enqueueOptions) error {
		if t.IsZero() {
			return &InvalidError{Reason: "not-after deadline is the zero time"}
		}
		o.notAfter = t
		return nil
	}
}

// Delay makes the mail due d after the enqueue instead of at once.
func Delay(d time.Duration) Option {
	return func(o *enqueueOptions) error {
		if d < 0 {
			return &InvalidError{Reason: fmt.Sprintf("negative delay %v", d)}
		}
		o.delay = d
		return nil
	}
}

// Template records the template name the mail was rendered from, for
// statistics and resends. The body stays the one given at enqueue time. A
// name with a control or format character is refused.
func Template(name string) Option {
	return func(o *enqueueOptions) error {
		if len(name) > 64 {
			return &InvalidError{Reason: fmt.Sprintf("template name is %d bytes, at most 64", len(name))}
		}
		if reason := controlProblem(name); reason != "" {
			return &InvalidError{Reason: "template name " + reason}
		}
		o.template = name
		return nil
	}
}

// listName is the form of a list's name: that of a lane, as suppression
// scopes are written.
var listName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// List names the mailing list the mail belongs to (a newsletter, a
// digest): on a lane whose Screen handles lists (package unsubscribe), the
// mail carries that list's unsubscribe link, and a recipient who
// unsubscribed from the list is refused. A lane without lists refuses the
// option. Names are lower-case letters, digits, _ and -, at most 64.
func List(name string) Option {
	return func(o *enqueueOptions) error {
		if !listName.MatchString(name) {
			return &InvalidError{Reason: fmt.Sprintf("list name %q: want lower-case letters, digits, _ and -, starting with a letter, at most 64", name)}
		}
		o.list = name
		return nil
	}
}

// Enqueue validates m and inserts it into the lane's table through exec,
// normally the caller's transaction, and returns the row id. When the
// transaction rolls back, neither the mail nor its rate-limit counts remain;
// when Enqueue returns an error, nothing it wrote remains even if the caller
// commits.
//
// Errors: bad input matches ErrInvalid (and transport.ErrInvalidMessage for
// the message itself); an exceeded rate limit matches ErrRateLimited and is
// a *RateLimitError saying when to try again; a recipient on the lane's
// suppression list (Lane.Screen) matches ErrSuppressed and is a
// *SuppressedError naming the reason and the date.
func (q *Queue) Enqueue(ctx context.Context, exec DBTX, m *transport.Message, opts ...Option) (int64, error) {
	o := enqueueOptions{nice: MaxPriority - DefaultPriority}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return 0, err
		}
	}
	o.setDuplicate(false)
	m, err := normalizeAddresses(m)
	if err != nil {
		return 0, err
	}
	if o.idemScope != "" {
		if o.idemKey != "" {
			return 0, &InvalidError{Reason: "both an idempotency key and an idempotency scope given"}
		}
		k, err := mailaddr.Key(m.To.Address)
		if err != nil {
			return 0, &InvalidError{Reason: err.Error()}
		}
		o.idemKey = recipientIdemKey(o.idemScope, k)
	}
	if m, err = q.prepare(m, &o); err != nil {
		return 0, err
	}
	if n := m.EncodedSize(); n > q.lane.MaxSize {
		return 0, &TooLargeError{Size: n, Limit: q.lane.MaxSize, Lane: q.lane.Name}
	}
	m = attachment.WithTypes(m)
	now := q.clock.Now()
	if !o.notAfter.IsZero() && !o.notAfter.After(now.Add(o.delay)) {
		return 0, &InvalidError{Reason: "not-after deadline " + o.notAfter.UTC().Format(time.RFC3339) + " is not after the time the mail is due"}
	}
	if o.maxAttempts == 0 {
		o.maxAttempts = q.lane.Retry.MaxAttempts
	}
	if db, ok := exec.(*sql.DB); ok {
		return q.enqueueOwnTx(ctx, db, m, &o, now)
	}
	if o.idemKey == "" && len(m.Attachments) == 0 && o.bypass == "" {
		// No savepoint: a single INSERT is atomic (on SQLite the bodies'
		// INSERT before it is taken back if it fails, see insertRow), and
		// the rate-limit counts, when a limit applies, are taken back by
		// countLimits' undo if the enqueue fails.
		return q.enqueueInTx(ctx, exec, m, &o, now)
	}
	return q.enqueueSavepoint(ctx, exec, m, &o, now)
}

// enqueueOwnTx runs the enqueue in a transaction of its own.
func (q *Queue) enqueueOwnTx(ctx context.Context, db *sql.DB, m *transport.Message, o *enqueueOptions, now time.Time) (int64, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("queue: enqueue: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if q.d.postgres {
		// The lane's lock timeout, for this transaction only; in the
		// caller's own transaction the connection's lock_timeout applies.
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("SET LOCAL lock_timeout = '%ds'", q.lockWait)); err != nil {
			return 0, fmt.Errorf("queue: enqueue: %w", err)
		}
	}
	id, err := q.enqueueInTx(ctx, tx, m, o, now)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("queue: enqueue: commit: %w", err)
	}
	q.wakers.wake()
	return id, nil
}

// enqueueSavepoint runs the enqueue inside the caller's transaction, under
// a savepoint that is rolled back if the enqueue fails, so that a caller who
// commits anyway keeps nothing half-written (no counted limit, no row).
func (q *Queue) enqueueSavepoint(ctx context.Context, exec DBTX, m *transport.Message, o *enqueueOptions, now time.Time) (int64, error) {
	if _, err := exec.ExecContext(ctx, "SAVEPOINT mailspool_enqueue"); err != nil {
		return 0, fmt.Errorf("queue: enqueue: savepoint (is exec inside a transaction?): %w", err)
	}
	id, err := q.enqueueInTx(ctx, exec, m, o, now)
	if err != nil {
		if _, rbErr := exec.ExecContext(context.WithoutCancel(ctx), "ROLLBACK TO SAVEPOINT mailspool_enqueue"); rbErr != nil {
			return 0, errors.Join(err, fmt.Errorf("queue: enqueue: rolling back to the savepoint: %w", rbErr))
		}
		return 0, err
	}
	if _, err := exec.ExecContext(ctx, "RELEASE SAVEPOINT mailspool_enqueue"); err != nil {
		return 0, fmt.Errorf("queue: enqueue: release savepoint: %w", err)
	}
	return id, nil
}

// enqueueInTx is the whole enqueue inside a transaction (or savepoint) that
// undoes it on error: the idempotency lookup, the rate limits, the row.
func (q *Queue) enqueueInTx(ctx context.Context, exec DBTX, m *transport.Message, o *enqueueOptions, now time.Time) (int64, error) {
	if o.idemKey != "" {
		// A plain read: a locking read of a missing key would take gap
		// locks, and two such enqueues would then deadlock on their INSERTs.
		if id, found, err := q.idempotent(ctx, exec, o.idemKey, false); err != nil || found {
			o.setDuplicate(found)
			return id, err
		}
	}
	bypassed, err := q.checkEnqueue(ctx, exec, m.To.Address, o)
	if err != nil {
		return 0, err
	}
	undo, err := q.countLimits(ctx, exec, m, o, now)
	if err != nil {
		return 0, err
	}
	id, err := q.insertRow(ctx, exec, m, o, now)
	if err == nil {
		err = q.recordBypass(ctx, exec, id, m.To.Address, o, bypassed)
	}
	if err == nil {
		return id, nil
	}
	if undo != nil && !q.txRolledBack(err) {
		if uerr := undo(); uerr != nil {
			return 0, errors.Join(err, uerr)
		}
	}
	if o.idemKey != "" && (!q.d.postgres || errors.Is(err, errIdemTaken)) {
		// A concurrent enqueue with the same key committed first: the
		// unique index refused ours. Return that row (without our counts).
		if id, found, err2 := q.idempotent(ctx, exec, o.idemKey, true); err2 == nil && found {
			o.setDuplicate(true)
			return id, nil
		}
	}
	return 0, err
}

func (o *enqueueOptions) setDuplicate(dup bool) {
	if o.duplicate != nil {
		*o.duplicate = dup
	}
}

// txRolledBack reports an error after which the server has rolled the
// whole transaction back (a MySQL deadlock): there is nothing left to undo,
// and a statement now would run outside the transaction. On PostgreSQL,
// every error of the server's: the transaction (or the savepoint) refuses
// every statement until it is rolled back, which undoes the counts.
func (q *Queue) txRolledBack(err error) bool {
	if q.d.postgres {
		return pgAborted(err)
	}
	return strings.Contains(err.Error(), "Error 1213")
}

// errIdemTaken: on PostgreSQL the INSERT of a mail whose idempotency key
// another enqueue wrote first does nothing (ON CONFLICT DO NOTHING), rather
// than fail and abort the caller's transaction.
var errIdemTaken = errors.New("queue: enqueue: the idempotency key was taken by a concurrent enqueue")

// insertRow is the INSERT of the mail's row: one statement (on SQLite two:
// the bodies first, taken back if the row cannot be written).
func (q *Queue) insertRow(ctx context.Context, exec DBTX, m *transport.Message, o *enqueueOptions, now time.Time) (int64, error) {
	headers, err := json.Marshal(headerPairs(m.Headers))
	if err != nil {
		return 0, fmt.Errorf("queue: enqueue: encoding headers: %w", err)
	}
	msgID := m.MessageID
	if msgID == "" {
		msgID = transport.NewMessageID(m.From.Address)
	}
	var idem, notAfter any = nil, int64(0)
	if o.idemKey != "" {
		idem = o.idemKey
	}
	if !o.notAfter.IsZero() {
		notAfter = o.notAfter.UnixMilli()
	}
	args := []any{o.maxAttempts, now.Add(o.delay).UnixMilli(), notAfter, now.UnixMilli(),
		msgID, idem, o.template, o.clientIP, m.From.Address, m.From.Name, m.To.Address, m.To.Name,
		m.ReplyTo.Address, m.ReplyTo.Name, m.Subject, m.Text, m.HTML, string(headers), len(m.Attachments), o.nice}
	var bodyID int64
	if q.d.sqlite {
		// The bodies go first into their own table (see bodies.go), and
		// the row names them.
		if bodyID, err = q.insertBodies(ctx, exec, m, string(headers)); err != nil {
			return 0, err
		}
		// The row's own text_body, html_body and headers (the three
		// arguments before the attachments' count and nice) stay empty.
		args = append(args[:len(args)-5], "", "", "", len(m.Attachments), o.nice, bodyID)
	}
	if q.d.postgres {
		var id int64
		var notified any
		err := exec.QueryRowContext(ctx, q.inserts.rowSQL, args...).Scan(&id, &notified)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return 0, errIdemTaken
		case err != nil:
			return 0, fmt.Errorf("queue: enqueue into %s: %w", q.lane.Table, q.lockError(err))
		}
		if err := q.insertFiles(ctx, exec, id, m); err != nil {
			return 0, err
		}
		return id, nil
	}
	res, err := q.execPrepared(ctx, exec, q.inserts.row, q.inserts.rowSQL, args...)
	err = q.lockError(err)
	if err != nil {
		err = fmt.Errorf("queue: enqueue into %s: %w", q.lane.Table, err)
		if bodyID != 0 {
			// Take the bodies back out: a caller who commits anyway keeps
			// nothing of this enqueue.
			if _, derr := exec.ExecContext(context.WithoutCancel(ctx), `DELETE FROM `+q.bodies+` WHERE id = ?`, bodyID); derr != nil {
				err = errors.Join(err, fmt.Errorf("queue: enqueue: removing the bodies of the mail that was not written: %w", derr))
			}
		}
		return 0, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("queue: enqueue: reading the new id: %w", err)
	}
	// The files after the row, in the same transaction: with attachments
	// the enqueue always runs under a savepoint or a transaction of its
	// own, which a failure here rolls back (Enqueue).
	if err := q.insertFiles(ctx, exec, id, m); err != nil {
		return 0, err
	}
	return id, nil
}

// inserts are the enqueue's INSERT statements of a queue, as text, and on
// SQLite prepared (see prepareShared).
type inserts struct {
	rowSQL, bodiesSQL string
	row, bodies       *sql.Stmt
}

// prepareInserts fills q.inserts. Preparing is only a speed-up: when it
// fails (New before Migrate: no table yet), the enqueue runs the text.
func (q *Queue) prepareInserts(ctx context.Context) {
	cols := `status, attempts, max_attempts, next_run, not_after, created_at,
  message_id, idem_key, template, client_ip, from_addr, from_name, to_addr, to_name, reply_to_addr, reply_to_name,
  subject, text_body, html_body, headers, attachments, nice`
	values := `0, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?`
	switch {
	case q.d.postgres:
		// A key another enqueue wrote first returns no id (errIdemTaken).
		// The notification wakes listening workers at commit (listen.go).
		q.inserts.rowSQL = q.d.rebind(`INSERT INTO ` + q.table + ` (` + cols + `) VALUES (` + values + `) ON CONFLICT (idem_key) DO NOTHING
  RETURNING id, pg_notify('` + notifyChannel(q.lane.Table) + `', id::text)`)
		return
	case !q.d.sqlite:
		q.inserts.rowSQL = q.d.lockBounded(`INSERT INTO `+q.table+` (`+cols+`) VALUES (`+values+`)`, q.lockWait)
		return
	}
	q.inserts.rowSQL = `INSERT INTO ` + q.table + ` (` + cols + `, body_id) VALUES (` + values + `, ?)`
	q.inserts.bodiesSQL = `INSERT INTO ` + q.bodies + ` (text_body, html_body, headers) VALUES (?, ?, ?)`
	q.inserts.row, _ = prepareShared(ctx, q.db, q.inserts.rowSQL)
	q.inserts.bodies, _ = prepareShared(ctx, q.db, q.inserts.bodiesSQL)
}

// insertBodies writes a mail's bodies and headers into the lane's bodies
// table (SQLite) and returns their id.
func (q *Queue) insertBodies(ctx context.Context, exec DBTX, m *transport.Message, headers string) (int64, error) {
	res, err := q.execPrepared(ctx, exec, q.inserts.bodies, q.inserts.bodiesSQL, m.Text, m.HTML, headers)
	if err != nil {
		return 0, fmt.Errorf("queue: enqueue into %s: writing the bodies: %w", q.lane.Table, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("queue: enqueue: reading the bodies' id: %w", err)
	}
	return id, nil
}

// idempotent looks up the row enqueued with key. After a duplicate-key
// error, locked reads the row in share mode: it sees a row committed after
// this transaction's snapshot, and shares the lock the failed INSERT's
// duplicate check already holds instead of deadlocking with other waiters.
func (q *Queue) idempotent(ctx context.Context, exec DBTX, key string, locked bool) (int64, bool, error) {
	lock := ""
	switch {
	case locked && q.d.postgres:
		lock = " FOR SHARE"
	case locked && !q.d.sqlite:
		lock = " LOCK IN SHARE MODE"
	}
	var id int64
	err := q.lockError(exec.QueryRowContext(ctx, q.d.lockBounded(`SELECT id FROM `+q.table+` WHERE idem_key = ?`+lock, q.lockWait), key).Scan(&id))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("queue: enqueue: looking up the idempotency key: %w", err)
	}
	return id, true, nil
}

func headerPairs(hs []transport.Header) [][2]string {
	pairs := make([][2]string, len(hs))
	for i, h := range hs {
		pairs[i] = [2]string{h.Name, h.Value}
	}
	return pairs
}

func parseHeaders(s string) ([]transport.Header, error) {
	if s == "" || s == "[]" || s == "null" {
		return nil, nil
	}
	var pairs [][2]string
	if err := json.Unmarshal([]byte(s), &pairs); err != nil {
		return nil, fmt.Errorf("queue: stored headers %.40q: %w", s, err)
	}
	hs := make([]transport.Header, len(pairs))
	for i, p := range pairs {
		hs[i] = transport.Header{Name: p[0], Value: p[1]}
	}
	return hs, nil
}

// normalizeAddresses validates m and returns it with every address in the
// form it is stored in (mailaddr.Normalize: the domain mapped per UTS #46,
// in lower-case U-labels; the local part as written), so that one mailbox
// is one address in the table, in list --to and in the rate limits. m
// itself is not changed.
func normalizeAddresses(m *transport.Message) (*transport.Message, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	out := *m
	for _, a := range []struct {
		field string
		addr  *mail.Address
	}{{"from", &out.From}, {"to", &out.To}, {"reply_to", &out.ReplyTo}} {
		if a.addr.Address == "" {
			continue
		}
		n, err := mailaddr.Normalize(a.addr.Address)
		if err != nil {
			var me *mailaddr.Error
			if errors.As(err, &me) {
				err = &transport.ValidationError{Field: a.field + ".address", Reason: fmt.Sprintf("%q: %s", me.Addr, me.Reason)}
			}
			return nil, err
		}
		a.addr.Address = n
	}
	return &out, nil
}

// recipientKey is the form a recipient is rate-limited under: one key per
// mailbox (mailaddr.Key). The address was normalized at enqueue.
func recipientKey(addr string) string {
	if k, err := mailaddr.Key(addr); err == nil {
		return k
	}
	return strings.ToLower(addr)
}

// lockError turns a lock wait timeout (MySQL/MariaDB error 1205) into an
// error that says what happened.
func (q *Queue) lockError(err error) error {
	if err != nil && pgLockTimeout(err) {
		return fmt.Errorf("queue: enqueue into %s: waited more than its lock_timeout for a lock on the queue tables (another session holds them: LOCK TABLE, a schema change, a long transaction); nothing was written: %w", q.lane.Table, err)
	}
	if err != nil && strings.Contains(err.Error(), "Error 1205") {
		return fmt.Errorf("queue: enqueue into %s: waited more than %ds for a lock on the queue tables (another session holds them: LOCK TABLES, a schema change, a long transaction); nothing was written: %w", q.lane.Table, q.lockWait, err)
	}
	return err
}
