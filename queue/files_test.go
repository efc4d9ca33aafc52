package queue

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/transport"
)

// mailWithFiles returns a test mail with an inline image and two
// attachments, one larger than a chunk of the files table and given
// without a content type.
func mailWithFiles(to string) *transport.Message {
	m := testMessage(to)
	m.HTML = `<p>Hello</p><img src="cid:logo@shop.example">`
	big := make([]byte, 2*fileChunk+12345)
	for i := range big {
		big[i] = byte(i*31 + i/7)
	}
	copy(big, "%PDF-1.4\n")
	m.Attachments = []transport.Attachment{
		{Filename: "logo.png", ContentType: "image/png", Data: []byte("\x89PNG\r\n\x1a\nlogo"), Inline: true, ContentID: "logo@shop.example"},
		{Filename: "Rechnung März.pdf", Data: big},
		{Filename: "notes.txt", ContentType: "text/plain; charset=utf-8", Data: []byte("hello\r\n")},
	}
	return m
}

// recorder is a transport that keeps a copy of each message it sends.
type recorder struct {
	mu   sync.Mutex
	sent []transport.Message
}

func (r *recorder) Send(_ context.Context, m *transport.Message) (transport.Receipt, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := *m
	c.Attachments = nil
	for _, a := range m.Attachments {
		a.Data = bytes.Clone(a.Data)
		c.Attachments = append(c.Attachments, a)
	}
	r.sent = append(r.sent, c)
	return transport.Receipt{MessageID: m.MessageID}, nil
}
func (r *recorder) Close() error { return nil }

func (r *recorder) messages() []transport.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]transport.Message(nil), r.sent...)
}

// TestAttachmentsStoredAndSent: a mail's attachments are stored in the
// enqueue's transaction (a rollback leaves none), sent as they were given
// (the missing content type sniffed at enqueue), listed without their
// bytes, and deleted with the mail by cleanup.
func TestAttachmentsStoredAndSent(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{MaxSize: 8 << 20}, clock)

		tx, err := s.db.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = q.Enqueue(ctx, tx, mailWithFiles("rolled@example.com"))
		require.NoError(t, err)
		require.NoError(t, tx.Rollback())
		assert.Zero(t, countRows(t, s.db, q.files, "1=1"), "a rolled-back enqueue leaves no attachment")

		m := mailWithFiles("ann@example.com")
		tx, err = s.db.BeginTx(ctx, nil)
		require.NoError(t, err)
		id, err := q.Enqueue(ctx, tx, m)
		require.NoError(t, err)
		plain, err := q.Enqueue(ctx, tx, testMessage("bob@example.com"))
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		assert.Empty(t, m.Attachments[1].ContentType, "the caller's message is not changed")

		infos, err := q.Attachments(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, []AttachmentInfo{
			{Filename: "logo.png", ContentType: "image/png", Size: 12, Inline: true, ContentID: "logo@shop.example"},
			{Filename: "Rechnung März.pdf", ContentType: "application/pdf", Size: 2*fileChunk + 12345},
			{Filename: "notes.txt", ContentType: "text/plain; charset=utf-8", Size: 7},
		}, infos)

		rec := &recorder{}
		w, err := NewWorker(q, rec, &WorkerOptions{Batch: 10, Concurrency: 2, CleanupInterval: -1, Logger: quietLogger()})
		require.NoError(t, err)
		n, err := oneBatch(ctx, w, 10)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		sent := rec.messages()
		require.Len(t, sent, 2)
		for _, got := range sent {
			if got.To.Address == "bob@example.com" {
				assert.Empty(t, got.Attachments, "mail %d has none", plain)
				continue
			}
			require.Len(t, got.Attachments, 3)
			for i, a := range got.Attachments {
				want := m.Attachments[i]
				if want.ContentType == "" {
					want.ContentType = "application/pdf"
				}
				assert.Equal(t, want, a, "attachment %d arrives as given", i)
			}
		}

		clock.Advance(31 * 24 * time.Hour)
		_, err = q.Cleanup(ctx, Retention{}, nil)
		require.NoError(t, err)
		assert.Zero(t, countRows(t, s.db, q.table, "1=1"))
		assert.Zero(t, countRows(t, s.db, q.files, "1=1"), "cleanup deletes the attachments with their mail")
	})
}

// TestAttachmentsMissingFailTheMail: a mail whose stored attachments were
// deleted by hand is never sent without them: it fails as unsendable.
func TestAttachmentsMissingFailTheMail(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{MaxSize: 8 << 20}, nil)
		id, err := q.Enqueue(ctx, s.db, mailWithFiles("cy@example.com"))
		require.NoError(t, err)
		_, err = s.db.Exec(q.d.rebind(`DELETE FROM `+q.files+` WHERE mail_id = ? AND part = 1 AND chunk = 1`), id)
		require.NoError(t, err)
		rec := &recorder{}
		w, err := NewWorker(q, rec, &WorkerOptions{CleanupInterval: -1, Logger: quietLogger()})
		require.NoError(t, err)
		_, err = oneBatch(ctx, w, 10)
		require.NoError(t, err)
		assert.Empty(t, rec.messages(), "nothing was sent")
		row, err := q.Row(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, "failed", row.Status)
		assert.Contains(t, row.LastError, "attachments are missing")
	})
}

// TestEnqueueTooLarge: the lane's limit is on the encoded size, base64's
// growth included, and a mail over it is refused with a typed error before
// anything is written.
func TestEnqueueTooLarge(t *testing.T) {
	t.Parallel()
	s := newSQLiteStore(t)
	ctx := context.Background()
	q := newQueue(t, s.db, Lane{MaxSize: 1 << 20}, nil)
	m := testMessage("dee@example.com")
	m.Attachments = []transport.Attachment{{Filename: "a.bin", Data: make([]byte, 900<<10)}} // 1.2 MiB in base64
	_, err := q.Enqueue(ctx, s.db, m)
	var tl *TooLargeError
	require.True(t, errors.As(err, &tl), "%v", err)
	assert.ErrorIs(t, err, ErrTooLarge)
	assert.ErrorIs(t, err, ErrInvalid)
	assert.Greater(t, tl.Size, 1<<20)
	assert.Zero(t, countRows(t, s.db, q.table, "1=1"))
	assert.Zero(t, countRows(t, s.db, q.files, "1=1"))
}

func gcCycles() uint32 {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	return s.NumGC
}

// TestFileGarbageRunsTheCollector: attachment bytes let go are counted
// across mails, and the call that brings them to gcAfter returns after a
// collection has run, with the count started again.
func TestFileGarbageRunsTheCollector(t *testing.T) {
	var g garbageCounter
	g.add(gcAfter / 2)
	m := &transport.Message{Attachments: []transport.Attachment{{Data: make([]byte, gcAfter/4)}, {Data: make([]byte, gcAfter/4-1)}}}
	g.release(m)
	assert.Nil(t, m.Attachments)
	assert.Equal(t, gcAfter-1, g.bytes, "counted, no collection yet")
	before := gcCycles()
	g.add(1)
	assert.Greater(t, gcCycles(), before, "a collection ran before add returned")
	assert.Zero(t, g.bytes)
}
