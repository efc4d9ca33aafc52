package config

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/composite"
)

// OpenTransport opens a lane's transport: a transport URL through mux,
// or a composite, failover(...) or roundrobin(...) (docs/TRANSPORTS.md),
// whose members mux opens and whose member health is shared through db
// (nil: kept in this process only). A member going down is logged at
// error level, with the error that took it down.
func OpenTransport(ctx context.Context, mux *transport.Mux, db *sql.DB, lane, raw string, log *slog.Logger) (transport.Transport, error) {
	if !composite.IsComposite(raw) {
		return mux.OpenTransport(ctx, raw)
	}
	if log == nil {
		log = slog.Default()
	}
	opts := composite.Options{Lane: lane, Logger: log, OnDown: func(member string, err error) {
		log.Error("lane member down: its mail goes to the other members until a probe finds it back", "lane", lane, "member", member, "err", err.Error())
	}}
	if db != nil {
		h, err := composite.NewSQL(db)
		if err != nil {
			return nil, err
		}
		opts.Health = h
	}
	return composite.Open(ctx, raw, mux, opts)
}

// compositeMaxSize is the smallest default size limit of a composite's
// members, so that a mail fits whichever member sends it.
func compositeMaxSize(raw string) (int, error) {
	sp, err := composite.Parse(raw)
	if err != nil {
		return 0, err
	}
	size := 0
	for _, m := range sp.Members {
		if s := DefaultMaxSize(m.URL); size == 0 || s < size {
			size = s
		}
	}
	return size, nil
}

// checkComposite checks a lane's composite transport's syntax when the
// config is loaded, so that a bad one is an error naming the lane.
func checkComposite(name, raw string) error {
	if !composite.IsComposite(raw) {
		return nil
	}
	if _, err := composite.Parse(raw); err != nil {
		return fmt.Errorf("config: lanes.%s.transport: %w", name, err)
	}
	return nil
}
