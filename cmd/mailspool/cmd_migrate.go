package main

import (
	"context"
	"fmt"

	"github.com/mailspool/mailspool/config"
	"github.com/mailspool/mailspool/queue"
)

func runMigrate(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "migrate", "[--db URL] [--config FILE]")
	var sf storeFlags
	sf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, db, err := sf.open()
	if err != nil {
		return err
	}
	defer db.Close()
	if err := queue.Migrate(ctx, db, config.Tables(cfg.Lanes)...); err != nil {
		return err
	}
	for _, l := range cfg.Lanes {
		fmt.Fprintf(e.stdout, "lane %s: table %s is at schema version %d\n", l.Lane.Name, l.Lane.Table, queue.SchemaVersion())
	}
	return nil
}
