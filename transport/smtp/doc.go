// Package smtp is the mailspool transport that hands mail to an SMTP
// submission server, over github.com/wneessen/go-mail.
//
// # URL
//
//	smtp://user:password@host:587?tls=starttls&timeout=30s
//	smtps://user@host:465?password_env=SMTP_PASSWORD
//	smtp://localhost:25?tls=none
//
// The user name and password are URL-encoded in the user info. The scheme
// "smtp" means STARTTLS and "smtps" implicit TLS (the tls parameter may say
// the same again; smtps with another tls value is an error). Every query
// parameter maps to one field of [Options]; an unknown parameter is an error:
//
//	tls           starttls (default for smtp), implicit (default for smtps), or none
//	timeout       per-command I/O timeout, a Go duration (default 30s)
//	helo          name sent in EHLO (default: this machine's host name)
//	server_name   name the server certificate must match (default: the URL host)
//	ca_file       PEM file of CA certificates to trust instead of the system roots
//	password_env  name of an environment variable holding the password,
//	              read when the transport is opened (instead of a password in the URL)
//	idle_timeout  how long an idle connection is kept for reuse (default 30s)
//	pool          most connections open at once (default 4)
//
// The port defaults to 587, or 465 with implicit TLS.
//
// # TLS and credentials
//
// TLS is mandatory unless the URL says tls=none. With STARTTLS, a server that
// does not offer it, or whose certificate does not verify, fails the send
// after EHLO: no AUTH, MAIL FROM or DATA is ever sent in clear. Credentials
// are sent (AUTH PLAIN, or LOGIN when PLAIN is not offered) only over a
// verified TLS connection; with tls=none a user name is accepted only for a
// loopback host (localhost, 127.0.0.0/8, ::1), such as a local relay.
//
// # Connections
//
// Consecutive sends reuse a connection; at most pool connections are open
// at once, and a Send waits for one to come free. Idle connections are
// closed after idle_timeout.
//
// A mail on a reused connection costs its transaction alone: MAIL FROM,
// RCPT TO, DATA and the message. No RSET follows a delivered mail (the 250
// after the data ends the transaction). When the server offers PIPELINING
// (RFC 2920), MAIL FROM, RCPT TO and DATA go out together, so a mail costs
// two round trips, the envelope and the message; every reply is still
// read and checked.
//
// A connection taken from the pool is checked by a look at its socket, not
// by a NOOP round trip. The look finds a connection the server closed;
// only when the server wrote something unasked (a 421 before hanging up)
// is it asked with NOOP. A reused connection whose MAIL FROM gets no reply
// or a 421 was let go by the server: nothing of the mail was taken, and it
// goes out on another connection within the same Send.
//
// A refusal (a 4xx or 5xx reply other than 421, such as 550 for an unknown
// recipient) keeps the connection: an RSET ends the transaction, unless
// the refusal was the reply to the whole mail, which ends it already.
// After any other error or a timeout the connection is dropped, so a
// broken session never fails the next message.
//
// # Outcomes
//
// Send makes one delivery attempt (one SMTP transaction past MAIL FROM; the
// stale connection above is the only case that starts a second) and
// honours its context at every stage. Replies, network, TLS and timeout
// errors are classified by package classify; a drop or stall after the DATA terminator
// is Temporary with MaybeDelivered set. The Receipt's MessageID is the
// Message-ID header the mail went out with and its Response the server's
// 250 reply ("2.0.0 OK: queued as ..."). No error text contains the
// password.
package smtp
