package config

import (
	"strings"

	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/fake"
	"github.com/mailspool/mailspool/transport/sendgrid"
	"github.com/mailspool/mailspool/transport/ses"
	"github.com/mailspool/mailspool/transport/smtp"
)

// DefaultMaxSize is the size limit of a lane whose config names none,
// from its transport URL's scheme: what Amazon SES (40 MB) or SendGrid
// (30 MB) takes, and for SMTP and the fake transport.MaxEncodedSize (an
// SMTP server's own SIZE is checked at each send); for a composite, the
// smallest of its members'.
func DefaultMaxSize(transportURL string) int {
	if size, err := compositeMaxSize(transportURL); err == nil {
		return size
	}
	scheme, _, _ := strings.Cut(transportURL, "://")
	switch strings.ToLower(scheme) {
	case ses.Scheme:
		return ses.MaxMessageSize
	case sendgrid.Scheme:
		return sendgrid.MaxMessageSize
	}
	return transport.MaxEncodedSize
}

// Transports returns a Mux of every adapter this module ships, by URL
// scheme: fake, smtp, smtps, ses and sendgrid.
func Transports() *transport.Mux {
	var m transport.Mux
	m.Register(fake.Scheme, fake.URLOpener{})
	m.Register(smtp.Scheme, smtp.URLOpener{})
	m.Register(smtp.SchemeTLS, smtp.URLOpener{})
	m.Register(ses.Scheme, ses.URLOpener{})
	m.Register(sendgrid.Scheme, sendgrid.URLOpener{})
	return &m
}
