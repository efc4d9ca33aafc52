// Package classify turns what providers and networks answer into
// classified *transport.Error values. STUB: being written; signatures are final.
package classify

import (
	"net/http"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// SMTPReply classifies a raw SMTP reply (one line or many).
func SMTPReply(reply string) error {
	return &transport.Error{Kind: transport.Temporary, Detail: reply}
}

// SMTP classifies an SMTP reply already split into its parts by a library.
func SMTP(code int, enhanced, text string) error {
	return &transport.Error{Kind: transport.Temporary, Code: code, Enhanced: enhanced, Detail: text}
}

// Error classifies any Go error from a dial, TLS handshake, SMTP library or HTTP client.
func Error(err error) error {
	if err == nil {
		return nil
	}
	return &transport.Error{Kind: transport.Temporary, Err: err}
}

// HTTP classifies an HTTP response.
func HTTP(status int, header http.Header, body []byte) error {
	if status < 400 {
		return nil
	}
	return &transport.Error{Kind: transport.Temporary, Code: status}
}

// MaybeDelivered classifies err as Temporary with MaybeDelivered set.
func MaybeDelivered(err error) error {
	return &transport.Error{Kind: transport.Temporary, MaybeDelivered: true, Err: err}
}

// RetryAfter parses a Retry-After header value (seconds or HTTP-date).
func RetryAfter(value string, now time.Time) time.Duration { return 0 }
