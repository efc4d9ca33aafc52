package main

import (
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/fake"
	"github.com/mailspool/mailspool/transport/sendgrid"
	"github.com/mailspool/mailspool/transport/ses"
	"github.com/mailspool/mailspool/transport/smtp"
)

// transports is every adapter this program ships, by URL scheme.
func transports() *transport.Mux {
	var m transport.Mux
	m.Register(fake.Scheme, fake.URLOpener{})
	m.Register(smtp.Scheme, smtp.URLOpener{})
	m.Register(smtp.SchemeTLS, smtp.URLOpener{})
	m.Register(ses.Scheme, ses.URLOpener{})
	m.Register(sendgrid.Scheme, sendgrid.URLOpener{})
	return &m
}
