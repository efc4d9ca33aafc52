package classify

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/transport"
)

func TestErrorNil(t *testing.T) {
	t.Parallel()
	require.NoError(t, Error(nil))
	require.NoError(t, MaybeDelivered(nil))
}

func TestErrorKeepsClassifiedError(t *testing.T) {
	t.Parallel()
	te := &transport.Error{Kind: transport.Permanent, Code: 550, Detail: "no such user"}
	wrapped := fmt.Errorf("smtp: rcpt: %w", te)
	require.True(t, Error(wrapped) == wrapped, "returned as it is")
}

func TestError(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name string
		err  error
		want want
	}{
		// Typed SMTP replies.
		{"textproto 550 wrapped", fmt.Errorf("sending SMTP RCPT TO command: %w", &textproto.Error{Code: 550, Msg: "5.1.1 no such user"}),
			want{permanent, 550, "5.1.1", 0, "no such user"}},
		{"textproto multi-line", &textproto.Error{Code: 550, Msg: "5.1.1 The account does not exist.\n5.1.1 Check the address."},
			want{permanent, 550, "5.1.1", 0, "The account does not exist. Check the address."}},
		{"textproto auth failed", fmt.Errorf("SMTP AUTH failed: %w", &textproto.Error{Code: 535, Msg: "5.7.8 Error: authentication failed"}),
			want{connection, 535, "5.7.8", 0, "Error: authentication failed"}},
		{"textproto 421 at greeting", &textproto.Error{Code: 421, Msg: "4.7.0 Too many connections, try again in 2 minutes"},
			want{temporary, 421, "4.7.0", 120e9, ""}},
		{"textproto unexpected 250", &textproto.Error{Code: 250, Msg: "OK"}, want{temporary, 250, "", 0, "unexpected smtp reply: OK"}},

		// Contexts.
		{"canceled", fmt.Errorf("send: %w", context.Canceled), want{temporary, 0, "", 0, "canceled"}},
		{"deadline", fmt.Errorf("send: %w", context.DeadlineExceeded), want{connection, 0, "", 0, "timeout"}},

		// Typed network errors.
		{"dns not found", &net.DNSError{Err: "no such host", Name: "nonexistent.invalid", IsNotFound: true}, want{connection, 0, "", 0, "dns lookup failed"}},
		{"dns timeout", &net.DNSError{Err: "i/o timeout", Name: "mx.example.com", IsTimeout: true}, want{connection, 0, "", 0, "dns lookup failed"}},
		{"refused", refused, want{connection, 0, "", 0, "connection refused"}},
		{"reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, want{connection, 0, "", 0, "connection reset"}},
		{"broken pipe", &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}, want{connection, 0, "", 0, "broken pipe"}},
		{"unreachable", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}, want{connection, 0, "", 0, "network unreachable"}},
		{"deadline on conn", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, want{connection, 0, "", 0, "timeout"}},
		{"eof", fmt.Errorf("smtp: greeting: %w", io.EOF), want{connection, 0, "", 0, "connection closed"}},
		{"unexpected eof", io.ErrUnexpectedEOF, want{connection, 0, "", 0, "connection closed"}},
		{"closed", &net.OpError{Op: "write", Net: "tcp", Err: net.ErrClosed}, want{connection, 0, "", 0, "connection closed"}},
		{"other op error", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("something odd")}, want{connection, 0, "", 0, "network error"}},
		{"unknown authority", fmt.Errorf("dial: %w", x509.UnknownAuthorityError{}), want{connection, 0, "", 0, "tls: certificate not trusted"}},
		{"expired", x509.CertificateInvalidError{Reason: x509.Expired, Detail: "current time is after notAfter"}, want{connection, 0, "", 0, "tls: certificate expired"}},
		{"invalid", x509.CertificateInvalidError{Reason: x509.NotAuthorizedToSign}, want{connection, 0, "", 0, "tls: certificate invalid"}},
		{"url error keeps the URL out of Detail", &url.Error{Op: "Post", URL: "https://api.example.com/v3/mail/send?token=s3cr3t", Err: refused},
			want{connection, 0, "", 0, "connection refused"}},

		// Replies found in the text of errors that hide them.
		{"go-mail SendError quoted", errors.New(`sending SMTP RCPT TO command: 550 "5.1.1 <x@example.com>: Recipient address rejected: User unknown", affected recipient(s): <x@example.com>`),
			want{permanent, 550, "5.1.1", 0, "<x@example.com>: Recipient address rejected: User unknown"}},
		{"go-mail SendError multi-line quoted", errors.New(`sending SMTP RCPT TO command: 550 "5.1.1 first\n5.1.1 second", affected recipient(s): <x@example.com>`),
			want{permanent, 550, "5.1.1", 0, "first second"}},
		{"go-mail data close 451", errors.New(`closing SMTP DATA writer: 451 "4.3.0 Temporary local problem, please try again"`),
			want{temporary, 451, "4.3.0", 0, "Temporary local problem, please try again"}},
		{"quoted with escapes", errors.New(`sending SMTP MAIL FROM command: 553 "5.1.8 \"bad\" sender\tdomain"`),
			want{connection, 553, "5.1.8", 0, `"bad" sender domain`}},
		{"auth failed unquoted", errors.New("SMTP AUTH failed: 535 5.7.8 Error: authentication failed: authentication failure"),
			want{connection, 535, "5.7.8", 0, "Error: authentication failed: authentication failure"}},
		{"unquoted without enhanced", errors.New("smtp: MAIL FROM: 554 Message rejected: Email address is not verified."),
			want{connection, 554, "", 0, "Message rejected: Email address is not verified."}},
		{"go-smtp SMTPError", errors.New("SMTP error 421: Too many connections"), want{temporary, 421, "", 0, "Too many connections"}},
		{"reply at line start", errors.New("550 5.7.1 Rejected as spam"), want{permanent, 550, "5.7.1", 0, "Rejected as spam"}},
		{"reply on a joined line", errors.Join(errors.New("send failed"), errors.New(`552 "5.3.4 Message too big"`)),
			want{permanent, 552, "5.3.4", 0, "Message too big"}},
		{"second candidate wins", errors.New(`at 10.0.0.1:550, then: 450 "4.2.1 busy"`), want{temporary, 450, "4.2.1", 0, "busy"}},

		// Digits that are not reply codes.
		{"ip address", errors.New("dial tcp 10.0.0.550:25: connect: connection refused"), want{connection, 0, "", 0, "connection refused"}},
		{"port", errors.New("read tcp 127.0.0.1:45501->127.0.0.1:25: read: connection reset by peer"), want{connection, 0, "", 0, "connection reset"}},
		{"queue id", errors.New("smtp: queued as 550ABC but no receipt"), want{temporary, 0, "", 0, ""}},
		{"queue id after colon", errors.New("smtp: id: 550ABC"), want{temporary, 0, "", 0, ""}},
		{"id with hyphen", errors.New("smtp: id: 550-abc"), want{temporary, 0, "", 0, ""}},
		{"timestamp", errors.New("batch 2024-05-01 12:55:01.550 failed"), want{temporary, 0, "", 0, ""}},
		{"longer number", errors.New("smtp: size: 55012 Bytes"), want{temporary, 0, "", 0, ""}},
		{"http status", errors.New("operation error SESv2: SendEmail, https response error StatusCode: 500, RequestID: 1f2e"), want{temporary, 0, "", 0, ""}},
		{"status word", errors.New("request failed, status: 503 Service Unavailable"), want{temporary, 0, "", 0, ""}},
		{"duration", errors.New("slow: took: 450 ms"), want{temporary, 0, "", 0, ""}},
		{"2xx in text", errors.New("smtp: reset: 250 \"2.0.0 Ok\""), want{temporary, 0, "", 0, ""}},

		// Flattened network errors.
		{"starttls not offered", errors.New(`STARTTLS mode set to: "TLSMandatory", but target host does not support STARTTLS`), want{connection, 0, "", 0, "tls: starttls not offered"}},
		{"flattened x509", errors.New("dial failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"), want{connection, 0, "", 0, "tls: certificate not trusted"}},
		{"flattened hostname", errors.New("x509: certificate is valid for mail.example.com, not smtp.example.org"), want{connection, 0, "", 0, "tls: certificate name mismatch"}},
		{"flattened tls", errors.New("tls: first record does not look like a TLS handshake"), want{connection, 0, "", 0, "tls: handshake failed"}},
		{"flattened timeout", errors.New("sending SMTP DATA command: read tcp 127.0.0.1:5000->127.0.0.1:25: i/o timeout"), want{connection, 0, "", 0, "timeout"}},
		{"flattened dns", errors.New("dial tcp: lookup smtp.nonexistent.invalid: no such host"), want{connection, 0, "", 0, "dns lookup failed"}},
		{"flattened eof", errors.New("closing SMTP DATA writer: EOF"), want{connection, 0, "", 0, "connection closed"}},
		{"go-mail flattened eof", errors.New("failed to close SMTP DATA writer: EOF, affected message ID: \"<x@example.com>\""), want{connection, 0, "", 0, "connection closed"}},

		// Unknown.
		{"unknown", errors.New("something odd happened"), want{temporary, 0, "", 0, ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Error(tc.err)
			te := check(t, tc.want, got)
			require.ErrorIs(t, got, tc.err, "the cause is kept")
			require.NotContains(t, te.Detail, "s3cr3t")
			require.NotContains(t, te.Detail, "api.example.com")
		})
	}
}

func TestMaybeDelivered(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		err   error
		want  want
		maybe bool
	}{
		{"eof after data", fmt.Errorf("smtp: data: %w", io.EOF), want{temporary, 0, "", 0, "connection closed"}, true},
		{"timeout after data", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, want{temporary, 0, "", 0, "timeout"}, true},
		{"reset after body", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, want{temporary, 0, "", 0, "connection reset"}, true},
		{"deadline", context.DeadlineExceeded, want{temporary, 0, "", 0, "timeout"}, true},
		{"canceled", context.Canceled, want{temporary, 0, "", 0, "canceled"}, true},
		{"unknown", errors.New("something odd"), want{temporary, 0, "", 0, ""}, true},
		{"go-mail data close without code", errors.New("closing SMTP DATA writer: EOF"), want{temporary, 0, "", 0, "connection closed"}, true},
		{"classified without a code", &transport.Error{Kind: transport.Connection, Detail: "timeout", RetryAfter: 5e9, Err: os.ErrDeadlineExceeded},
			want{temporary, 0, "", 5e9, "timeout"}, true},
		{"textproto 451 is an answer", &textproto.Error{Code: 451, Msg: "4.3.0 Temporary local problem"}, want{temporary, 451, "4.3.0", 0, ""}, false},
		{"textproto 554 is an answer", fmt.Errorf("data: %w", &textproto.Error{Code: 554, Msg: "5.7.1 Message rejected as spam"}), want{permanent, 554, "5.7.1", 0, ""}, false},
		{"reply in text is an answer", errors.New(`closing SMTP DATA writer: 552 "5.3.4 Message too big"`), want{permanent, 552, "5.3.4", 0, ""}, false},
		{"classified with a code", &transport.Error{Kind: transport.Permanent, Code: 550, Enhanced: "5.7.1"}, want{permanent, 550, "5.7.1", 0, ""}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := MaybeDelivered(tc.err)
			te := check(t, tc.want, got)
			require.Equal(t, tc.maybe, te.MaybeDelivered)
			var cause *transport.Error
			if !errors.As(tc.err, &cause) {
				require.ErrorIs(t, got, tc.err, "the cause is kept")
			} else if cause.Err != nil {
				require.ErrorIs(t, got, cause.Err, "the classified error's cause is kept")
			}
		})
	}
}
