package bounce

import (
	"bytes"
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"net"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emersion/go-smtp"
	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/suppress"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/verp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"
)

type fixture struct {
	db     *sql.DB
	q      *queue.Queue
	signer *verp.Signer
	addr   string // the listener
	id     int64  // a mail to ann@example.com in lane news
	rp     string // its return path
	msgID  string
	list   *suppress.List
}

func start(t *testing.T, maxSize int64, policy ...suppress.Policy) *fixture {
	t.Helper()
	return startTLS(t, maxSize, nil, policy...)
}

// startTLS is start with the listener offering STARTTLS with tlsConfig
// (none when nil).
func startTLS(t *testing.T, maxSize int64, tlsConfig *tls.Config, policy ...suppress.Policy) *fixture {
	t.Helper()
	ctx := context.Background()
	db, err := dburl.Open("sqlite:" + filepath.Join(t.TempDir(), "q.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	require.NoError(t, queue.Migrate(ctx, db, "news_queue"))
	require.NoError(t, suppress.Migrate(ctx, db))
	require.NoError(t, inbound.Migrate(ctx, db))
	f := &fixture{db: db}
	f.signer, err = verp.New(bytes.Repeat([]byte{9}, 32), "bounces.shop.example")
	require.NoError(t, err)
	f.q, err = queue.New(ctx, db, queue.Lane{Name: "news", Table: "news_queue"}, nil)
	require.NoError(t, err)
	f.id, err = f.q.Enqueue(ctx, db, &transport.Message{From: mail.Address{Address: "news@shop.example"}, To: mail.Address{Address: "ann@example.com"}, Subject: "news", Text: "hi"})
	require.NoError(t, err)
	row, err := f.q.Row(ctx, f.id)
	require.NoError(t, err)
	f.msgID = row.MessageID
	f.rp, err = f.signer.Address("news", f.id)
	require.NoError(t, err)
	f.list, err = suppress.Open(db)
	require.NoError(t, err)
	var pf func(string) suppress.Policy
	if len(policy) > 0 {
		pf = func(string) suppress.Policy { return policy[0] }
	}
	srv, err := NewServer(db, Options{Signer: f.signer, MaxSize: maxSize, Policy: pf, TLSConfig: tlsConfig, Mails: func(ctx context.Context, lane string, id int64) (Mail, error) {
		if lane != "news" {
			return Mail{}, ErrNoMail
		}
		r, err := f.q.Row(ctx, id)
		if errors.Is(err, queue.ErrNotFound) {
			return Mail{}, ErrNoMail
		}
		return Mail{Recipient: r.To, MessageID: r.MessageID, ProviderID: r.ProviderID}, err
	}})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	f.addr = ln.Addr().String()
	return f
}

// fixtureText returns a fixture with its placeholders filled in.
func (f *fixture) fixtureText(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return strings.NewReplacer("BOUNCE_ADDRESS", f.rp, "MESSAGE_ID", f.msgID).Replace(string(b))
}

// send delivers data to rcpt from the null sender and returns the
// server's verdict: nil for 250, else the *smtp.SMTPError.
func (f *fixture) send(t *testing.T, rcpt, data string) error {
	t.Helper()
	c, err := smtp.Dial(f.addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Hello("mx.example.org"))
	require.NoError(t, c.Mail("", nil))
	if err := c.Rcpt(rcpt, nil); err != nil {
		return err
	}
	w, err := c.Data()
	require.NoError(t, err)
	_, _ = w.Write([]byte(data))
	return w.Close()
}

func (f *fixture) events(t *testing.T) []inbound.Event {
	t.Helper()
	s, err := inbound.OpenStore(f.db)
	require.NoError(t, err)
	evs, err := s.Recent(context.Background(), "", 100)
	require.NoError(t, err)
	return evs
}

func (f *fixture) suppressed(t *testing.T) []suppress.Entry {
	t.Helper()
	es, err := f.list.Entries(context.Background(), suppress.Filter{})
	require.NoError(t, err)
	return es
}

func TestFixtures(t *testing.T) {
	for _, c := range []struct {
		file     string
		kind     Kind
		event    string          // "" = no event
		suppress suppress.Reason // "" = nothing suppressed
	}{
		{"postfix-5.1.1.eml", DSN, inbound.Bounced, suppress.HardBounce},
		{"postfix-delayed.eml", DSN, "", ""},
		{"postfix-blocked.eml", DSN, inbound.Blocked, ""},
		{"exim-no-original.eml", Plain, inbound.Bounced, suppress.HardBounce},
		{"exchange-5.1.10.eml", DSN, inbound.Bounced, suppress.HardBounce},
		{"gmail-5.1.1.eml", DSN, inbound.Bounced, suppress.HardBounce},
		{"gmail-empty-status.eml", DSN, "", ""},
		{"sendmail-5.1.1.eml", DSN, inbound.Bounced, suppress.HardBounce},
		{"arf-abuse.eml", Complaint, inbound.Complained, suppress.Complaint},
		{"jmrp-abuse.eml", Complaint, inbound.Complained, suppress.Complaint},
		{"vacation.eml", AutoReply, "", ""},
	} {
		t.Run(c.file, func(t *testing.T) {
			f := start(t, 0)
			text := f.fixtureText(t, c.file)
			assert.Equal(t, c.kind, Parse([]byte(text)).Kind)
			for range 2 { // the second delivery is a duplicate
				require.NoError(t, f.send(t, f.rp, text))
			}
			evs := f.events(t)
			es := f.suppressed(t)
			if c.event == "" {
				assert.Empty(t, evs)
				assert.Empty(t, es)
				return
			}
			require.Len(t, evs, 1, "one event, however often it is delivered")
			e := evs[0]
			assert.Equal(t, c.event, e.Type, e.Detail)
			assert.Equal(t, "ann@example.com", e.Recipient)
			assert.Equal(t, f.msgID, e.MessageID, "linked to the mail by the return path")
			assert.Contains(t, e.Detail, "mail news/")
			assert.Equal(t, "news", e.Lane, "stored with its lane and mail id (the lane's complaint rate counts it)")
			assert.NotZero(t, e.MailID)
			if c.suppress == "" {
				assert.Empty(t, es, "only recipient scope suppresses")
				return
			}
			require.Len(t, es, 1)
			assert.Equal(t, "ann@example.com", es[0].Address)
			assert.Equal(t, c.suppress, es[0].Reason)
			assert.Equal(t, suppress.ScopeAll, es[0].Scope)
		})
	}
}

// TestOnlyTheMailsOwnRecipient: a report naming another address (a
// forged one, sent by the recipient of the mail) suppresses the mail's own
// recipient only.
func TestOnlyTheMailsOwnRecipient(t *testing.T) {
	f := start(t, 0)
	text := strings.ReplaceAll(f.fixtureText(t, "postfix-5.1.1.eml"), "ann@example.com", "victim@example.com")
	require.NoError(t, f.send(t, f.rp, text))
	es := f.suppressed(t)
	require.Len(t, es, 1)
	assert.Equal(t, "ann@example.com", es[0].Address)
}

// TestOneComplaintPerMail: the recipient of a mail knows its return path
// and can send it ARF reports of any Feedback-Type. They are one complaint
// about one mail, counted once in the lane's complaint rate; a report of a
// type that says no complaint (not-spam, auth-failure) or that no standard
// defines adds none, and suppresses nothing.
func TestOneComplaintPerMail(t *testing.T) {
	complaints := func(f *fixture) int {
		n := 0
		for _, e := range f.events(t) {
			if e.Type == inbound.Complained && e.Lane == "news" {
				n++
			}
		}
		return n
	}
	report := func(f *fixture, feedbackType string) string {
		text := f.fixtureText(t, "arf-abuse.eml")
		require.Contains(t, text, "\nFeedback-Type: abuse\n")
		return strings.Replace(text, "\nFeedback-Type: abuse\n", "\nFeedback-Type: "+feedbackType+"\n", 1)
	}

	f := start(t, 0)
	for _, typ := range []string{"not-spam", "auth-failure", "abuse-1", "x"} {
		require.NoError(t, f.send(t, f.rp, report(f, typ)), typ)
	}
	assert.Zero(t, complaints(f), "no complaint among these types")
	assert.Empty(t, f.suppressed(t))

	for _, typ := range []string{"abuse", "fraud", "virus", "other", "abuse-2", "Abuse"} {
		require.NoError(t, f.send(t, f.rp, report(f, typ)), typ)
	}
	assert.Equal(t, 1, complaints(f), "complaints recorded about one mail")
	es := f.suppressed(t)
	require.Len(t, es, 1)
	assert.Equal(t, suppress.Complaint, es[0].Reason)
}

func TestRefusals(t *testing.T) {
	f := start(t, 4096)
	text := f.fixtureText(t, "postfix-5.1.1.eml")
	other, err := verp.New(bytes.Repeat([]byte{8}, 32), "bounces.shop.example")
	require.NoError(t, err)
	forged, err := other.Address("news", f.id)
	require.NoError(t, err)
	for _, rcpt := range []string{forged, "postmaster@bounces.shop.example", strings.Replace(f.rp, ".", ".9", 1)} {
		err := f.send(t, rcpt, text)
		var se *smtp.SMTPError
		require.ErrorAs(t, err, &se, rcpt)
		assert.Equal(t, 550, se.Code, rcpt)
	}
	big := text + strings.Repeat("x", 5000) + "\n"
	err = f.send(t, f.rp, big)
	var se *smtp.SMTPError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 552, se.Code, "over the size bound")
	assert.Empty(t, f.events(t))
	assert.Empty(t, f.suppressed(t))
}

// TestNotRecordedIs451: the 250 comes after the commit; when the
// database cannot record, the answer is a 451 and the sender's retry
// records it.
func TestNotRecordedIs451(t *testing.T) {
	f := start(t, 0)
	ctx := context.Background()
	text := f.fixtureText(t, "postfix-5.1.1.eml")
	_, err := f.db.ExecContext(ctx, `ALTER TABLE `+inbound.Table+` RENAME TO events_away`)
	require.NoError(t, err)
	err = f.send(t, f.rp, text)
	var se *smtp.SMTPError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 451, se.Code)
	assert.Empty(t, f.suppressed(t), "nothing half-written")
	_, err = f.db.ExecContext(ctx, `ALTER TABLE events_away RENAME TO `+inbound.Table)
	require.NoError(t, err)
	require.NoError(t, f.send(t, f.rp, text))
	assert.Len(t, f.events(t), 1)
	assert.Len(t, f.suppressed(t), 1)
}

// TestMailGone: a bounce for a mail no longer in the queue is recorded
// under the report's recipient and suppresses nothing.
func TestMailGone(t *testing.T) {
	f := start(t, 0)
	rp, err := f.signer.Address("news", f.id+1000)
	require.NoError(t, err)
	text := strings.ReplaceAll(f.fixtureText(t, "postfix-5.1.1.eml"), f.rp, rp)
	require.NoError(t, f.send(t, rp, text))
	evs := f.events(t)
	require.Len(t, evs, 1)
	assert.Equal(t, "ann@example.com", evs[0].Recipient)
	assert.Contains(t, evs[0].Detail, "no longer in the queue")
	assert.Empty(t, f.suppressed(t))
}

type capture struct{ returnPaths chan string }

func (c capture) Send(_ context.Context, m *transport.Message) (transport.Receipt, error) {
	c.returnPaths <- m.ReturnPath
	return transport.Receipt{MessageID: "p-1"}, nil
}
func (capture) Close() error { return nil }

// TestWorkerSendsTheReturnPath: a lane with a return path sends each mail
// with its own VERP address as envelope sender, and the bounce that comes
// back to it finds the mail.
func TestWorkerSendsTheReturnPath(t *testing.T) {
	f := start(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lane := queue.Lane{Name: "news", Table: "news_queue", ReturnPath: func(id int64) string {
		a, _ := f.signer.Address("news", id)
		return a
	}}
	q, err := queue.New(ctx, f.db, lane, nil)
	require.NoError(t, err)
	tr := capture{returnPaths: make(chan string, 1)}
	w, err := queue.NewWorker(q, tr, &queue.WorkerOptions{CleanupInterval: -1})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	rp := <-tr.returnPaths // waits for the send, not a clock
	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, f.rp, rp)
	require.NoError(t, f.send(t, rp, f.fixtureText(t, "gmail-5.1.1.eml")))
	evs := f.events(t)
	require.Len(t, evs, 1)
	assert.Equal(t, "p-1", evs[0].ProviderMessageID, "linked to the provider id the worker stored")
	assert.Len(t, f.suppressed(t), 1)
}

// TestLanePolicy: the lane's suppression policy applies to what its
// bounces teach: hard bounces off records the event and suppresses nothing.
func TestLanePolicy(t *testing.T) {
	f := start(t, 0, suppress.Policy{HardBounce: suppress.Off})
	require.NoError(t, f.send(t, f.rp, f.fixtureText(t, "postfix-5.1.1.eml")))
	assert.Len(t, f.events(t), 1)
	assert.Empty(t, f.suppressed(t))
}
