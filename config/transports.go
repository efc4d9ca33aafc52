package config

import (
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/fake"
	"github.com/mailspool/mailspool/transport/sendgrid"
	"github.com/mailspool/mailspool/transport/ses"
	"github.com/mailspool/mailspool/transport/smtp"
)

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
