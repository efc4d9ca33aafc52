package queue

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"sync"

	"github.com/mailspool/mailspool/transport"
)

// Where a mail's attachments are stored (schema version 10).
//
// They are rows of the lane's files table, <table>_files, written in the
// enqueue's transaction and deleted with the mail's row by Cleanup. Each
// file is cut into chunks of at most fileChunk bytes, a row each, keyed by
// (mail_id, part, chunk): a statement never carries more than a chunk, so
// that MySQL's max_allowed_packet (16 MiB by default) does not bound the
// size of an attachment, and a reader holds one chunk of the driver's
// buffer at a time. The mail's row counts its files in its attachments
// column; a mail without any costs the claim nothing more.
//
// The worker reads a mail's files when it starts sending it, not at the
// claim, so that only the mails being sent hold their files in memory
// (Worker.send), and it lets them go once the send returns.

// fileChunk is the most bytes of a file stored in one row.
const fileChunk = 1 << 20

// insertFiles writes m's attachments as the files of mail id.
func (q *Queue) insertFiles(ctx context.Context, exec DBTX, id int64, m *transport.Message) error {
	stmt := `INSERT INTO ` + q.files + ` (mail_id, part, chunk, filename, content_type, content_id, inline, size, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	if !q.d.sqlite {
		stmt = q.d.lockBounded(stmt, q.lockWait)
	}
	for part, a := range m.Attachments {
		inline := 0
		if a.Inline {
			inline = 1
		}
		for chunk, off := 0, 0; off < len(a.Data); chunk, off = chunk+1, off+fileChunk {
			data := a.Data[off:min(off+fileChunk, len(a.Data))]
			if _, err := exec.ExecContext(ctx, stmt, id, part, chunk, a.Filename, a.ContentType, a.ContentID, inline, len(a.Data), data); err != nil {
				return fmt.Errorf("queue: enqueue into %s: writing attachment %d (%s): %w", q.lane.Table, part, a.Filename, q.lockError(err))
			}
		}
	}
	return nil
}

// loadFiles reads the n attachments of mail id, in the order they were
// given. Fewer than n (rows deleted by hand) is an error: the mail is never
// sent without them.
func (q *Queue) loadFiles(ctx context.Context, id int64, n int) ([]transport.Attachment, error) {
	rows, err := q.db.QueryContext(ctx, q.d.rebind(`SELECT part, chunk, filename, content_type, content_id, inline, size, data FROM `+q.files+` WHERE mail_id = ? ORDER BY part, chunk`), id)
	if err != nil {
		return nil, fmt.Errorf("queue: reading the attachments of mail %d: %w", id, err)
	}
	defer rows.Close()
	var files []transport.Attachment
	for rows.Next() {
		var part, chunk, inline, size int
		var a transport.Attachment
		var data sql.RawBytes
		if err := rows.Scan(&part, &chunk, &a.Filename, &a.ContentType, &a.ContentID, &inline, &size, &data); err != nil {
			return nil, fmt.Errorf("queue: reading the attachments of mail %d: %w", id, err)
		}
		if chunk == 0 {
			if part != len(files) {
				break // a part is missing: the count below says so
			}
			a.Inline = inline != 0
			a.Data = make([]byte, 0, size)
			files = append(files, a)
		}
		if len(files) == 0 {
			break
		}
		f := &files[len(files)-1]
		if part != len(files)-1 || len(f.Data)+len(data) > size {
			return nil, fmt.Errorf("queue: mail %d: attachment %d (%s) is stored out of order or larger than its size", id, part, f.Filename)
		}
		f.Data = append(f.Data, data...)
		fileGarbage.add(len(data)) // the driver's copy of the chunk
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue: reading the attachments of mail %d: %w", id, err)
	}
	complete := len(files) == n
	for i := range files {
		complete = complete && len(files[i].Data) == cap(files[i].Data)
	}
	if !complete {
		return nil, &missingFilesError{id: id, table: q.lane.Table + "_files"}
	}
	return files, nil
}

// fileGarbage counts the bytes of attachments this process has let go of
// since the Go collector last ran, and runs it when they reach gcAfter.
//
// Why: the collector lets the heap grow to twice what was live after its
// last cycle (GOGC=100) before it runs again. A worker sending large
// attachments has most of its live heap in their bytes, and every byte of
// them turns into garbage twice per mail: the driver's copy of each
// stored chunk once it is appended, and the whole file once the send
// returns. Left alone, that garbage fills the headroom, and the worker's
// resident memory reaches about twice the files in flight (ten 20 MB
// mails, 8 in flight: 1.5 - 1.6 times their encoded size over the usual
// footprint, docs/BENCHMARKS.md). A cycle after every gcAfter bytes keeps
// the garbage near gcAfter instead. The goroutine whose bytes reach gcAfter
// runs the cycle, and the others that let go of attachment bytes meanwhile
// wait for it, so that readers of files cannot outrun the collector.
// Marking costs what the heap's pointers cost, not its byte slices: a
// cycle every 32 MiB of attachments is cheap beside reading and encoding
// them, and mail without attachments never waits here.
var fileGarbage garbageCounter

// gcAfter is how many bytes of attachments let go start a collection.
const gcAfter = 32 << 20

type garbageCounter struct {
	mu    sync.Mutex
	bytes int
}

// add counts n bytes let go, and collects when they reach gcAfter.
func (g *garbageCounter) add(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.bytes += n; g.bytes >= gcAfter {
		g.bytes = 0
		runtime.GC()
	}
}

// release lets go of the attachments of m, a mail whose send returned,
// and counts them.
func (g *garbageCounter) release(m *transport.Message) {
	n := 0
	for i := range m.Attachments {
		n += len(m.Attachments[i].Data)
	}
	m.Attachments = nil
	g.add(n)
}

// missingFilesError: a mail's attachments are not all in its files table.
type missingFilesError struct {
	id    int64
	table string
}

func (e *missingFilesError) Error() string {
	return fmt.Sprintf("queue: mail %d: its attachments are missing from %s (deleted by hand?); it is never sent without them", e.id, e.table)
}

// AttachmentInfo describes one stored attachment of a mail, without its bytes.
type AttachmentInfo struct {
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	Size        int    `json:"size"`
	Inline      bool   `json:"inline,omitempty"`
	ContentID   string `json:"content_id,omitempty"`
}

// Attachments lists the attachments of mail id, in order, without reading
// their bytes.
func (q *Queue) Attachments(ctx context.Context, id int64) ([]AttachmentInfo, error) {
	rows, err := q.db.QueryContext(ctx, q.d.rebind(`SELECT filename, content_type, content_id, inline, size FROM `+q.files+` WHERE mail_id = ? AND chunk = 0 ORDER BY part`), id)
	if err != nil {
		return nil, fmt.Errorf("queue: reading the attachments of mail %d: %w", id, err)
	}
	defer rows.Close()
	var out []AttachmentInfo
	for rows.Next() {
		var a AttachmentInfo
		var inline int
		if err := rows.Scan(&a.Filename, &a.ContentType, &a.ContentID, &inline, &a.Size); err != nil {
			return nil, fmt.Errorf("queue: reading the attachments of mail %d: %w", id, err)
		}
		a.Inline = inline != 0
		out = append(out, a)
	}
	return out, rows.Err()
}
