package queue_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/mail"
	"os"
	"path/filepath"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/fake"
)

// The application writes the mail in the same transaction as the business
// write; a worker sends it later.
func ExampleQueue_Enqueue() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "mailspool-example-")
	defer os.RemoveAll(dir)
	db, err := dburl.Open("sqlite:" + filepath.Join(dir, "app.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	_, _ = db.ExecContext(ctx, `CREATE TABLE users (email TEXT PRIMARY KEY)`)
	if err := queue.Migrate(ctx, db); err != nil {
		fmt.Println(err)
		return
	}
	q, err := queue.New(ctx, db, queue.Lane{}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}

	// The sign-up request: the user and the welcome mail commit together.
	tx, _ := db.BeginTx(ctx, nil)
	_, _ = tx.ExecContext(ctx, `INSERT INTO users (email) VALUES (?)`, "ann@example.com")
	id, err := q.Enqueue(ctx, tx, &transport.Message{
		From:    mail.Address{Name: "Shop", Address: "noreply@shop.example"},
		To:      mail.Address{Name: "Ann", Address: "ann@example.com"},
		Subject: "Welcome",
		Text:    "Hello Ann!",
	}, queue.ClientIP("192.0.2.7"), queue.Template("welcome"))
	if err != nil {
		_ = tx.Rollback()
		fmt.Println(err)
		return
	}
	_ = tx.Commit()
	fmt.Println("queued mail", id)

	// The worker (normally "mailspool worker"): here it stops after one mail.
	w, _ := queue.NewWorker(q, fake.New(nil), &queue.WorkerOptions{
		MaxMessages: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err := w.Run(ctx); err != nil {
		fmt.Println(err)
	}
	row, _ := q.Row(ctx, id)
	fmt.Println(row.Status, row.Attempts)
	// Output:
	// queued mail 1
	// sent 1
}
