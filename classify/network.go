package classify

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"syscall"
)

// errnoDetails names the socket errors that mean the provider could not be
// talked to.
var errnoDetails = []struct {
	errno  syscall.Errno
	detail string
}{
	{syscall.ECONNREFUSED, "connection refused"},
	{syscall.ECONNRESET, "connection reset"},
	{syscall.ECONNABORTED, "connection aborted"},
	{syscall.EPIPE, "broken pipe"},
	{syscall.ETIMEDOUT, "timeout"},
	{syscall.ENETUNREACH, "network unreachable"},
	{syscall.EHOSTUNREACH, "host unreachable"},
	{syscall.ENETDOWN, "network down"},
	{syscall.EHOSTDOWN, "host down"},
}

// network returns a short Detail for a typed DNS, TLS, certificate, socket,
// timeout or EOF error in err's chain; ok is false when there is none.
func network(err error) (detail string, ok bool) {
	if d := tlsDetail(err); d != "" {
		return d, true
	}
	if errors.As(err, new(*net.DNSError)) {
		return "dns lookup failed", true
	}
	var ne net.Error
	if errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return "timeout", true
	}
	for _, e := range errnoDetails {
		if errors.Is(err, e.errno) {
			return e.detail, true
		}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return "connection closed", true
	}
	if errors.As(err, new(*net.OpError)) {
		if d, ok := networkText(err.Error()); ok {
			return d, true
		}
		return "network error", true
	}
	return "", false
}

// tlsDetail names a TLS handshake or certificate failure in err's chain;
// "" when there is none.
func tlsDetail(err error) string {
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, new(x509.UnknownAuthorityError)):
		return "tls: certificate not trusted"
	case errors.As(err, new(x509.HostnameError)):
		return "tls: certificate name mismatch"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "tls: certificate expired"
	case errors.As(err, &invalid), errors.As(err, new(*tls.CertificateVerificationError)):
		return "tls: certificate invalid"
	case errors.As(err, new(tls.RecordHeaderError)):
		return "tls: handshake failed"
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		return "tls: handshake failed" // the peer sent a TLS alert
	}
	return ""
}

// networkTexts recognise network failures in the text of errors that were
// flattened to a string on the way (go-mail's SendError keeps no cause).
// The texts are Go 1.26's: the errno strings of syscall/zerrors_linux_*.go
// (ECONNREFUSED "connection refused", ETIMEDOUT "connection timed out", the
// kernel's SYN timeout, EHOSTUNREACH "no route to host", ENETUNREACH
// "network is unreachable", ...), net's "i/o timeout" (net/net.go), and the
// resolver's "no such host" (net/net.go) and "server misbehaving", "lame
// referral", "no answer from DNS server", "cannot unmarshal DNS message"
// (net/dnsclient_unix.go).
var networkTexts = []struct {
	substr, detail string
}{
	{"connection refused", "connection refused"},
	{"connection reset", "connection reset"},
	{"connection aborted", "connection aborted"},
	{"broken pipe", "broken pipe"},
	{"i/o timeout", "timeout"},
	{"deadline exceeded", "timeout"},
	{"connection timed out", "timeout"},
	{"no route to host", "host unreachable"},
	{"network is unreachable", "network unreachable"},
	{"host is down", "host down"},
	{"network is down", "network down"},
	{"no such host", "dns lookup failed"},
	{"server misbehaving", "dns lookup failed"},
	{"lame referral", "dns lookup failed"},
	{"no answer from dns server", "dns lookup failed"},
	{"cannot unmarshal dns message", "dns lookup failed"},
	{"no suitable address found", "dns lookup failed"},
	{"x509: certificate signed by unknown authority", "tls: certificate not trusted"},
	{"x509: certificate is valid for", "tls: certificate name mismatch"},
	{"x509: certificate has expired", "tls: certificate expired"},
	{"x509: ", "tls: certificate invalid"},
	{"tls: ", "tls: handshake failed"},
	{"does not support starttls", "tls: starttls not offered"},
	{"use of closed network connection", "connection closed"},
	{"unexpected eof", "connection closed"},
	// The C library's resolver (cgo, getaddrinfo) on glibc, musl, macOS
	// and Windows, as Go passes its words on.
	{"temporary failure in name resolution", "dns lookup failed"},
	{"name or service not known", "dns lookup failed"},
	{"nodename nor servname provided", "dns lookup failed"},
	{"no address associated with hostname", "dns lookup failed"},
	{"getaddrinfo", "dns lookup failed"},
	{"no such host is known", "dns lookup failed"},
	// The kernel's refusals of a connect (EADDRNOTAVAIL, EAFNOSUPPORT
	// without IPv6, EACCES and EPERM from a firewall) and Windows' words.
	{"cannot assign requested address", "network unreachable"},
	{"address family not supported", "network unreachable"},
	{"connect: permission denied", "network unreachable"},
	{"connect: operation not permitted", "network unreachable"},
	{"actively refused", "connection refused"},
	{"connection attempt failed", "timeout"},
	{"forcibly closed by the remote host", "connection reset"},
	// An address that cannot be dialled at all (net.AddrError).
	{"missing port in address", "invalid address"},
	{"too many colons in address", "invalid address"},
	{"unknown port", "invalid address"},
}

// resolverText matches the start of a Go resolver error however it was
// wrapped: "lookup smtp.example.com: ..." or "lookup smtp.example.com on
// [::1]:53: ...", with the name a host name, an IPv4 or an IPv6 address.
var resolverText = regexp.MustCompile(`\blookup [^\s]+?( on [^\s]+)?: `)

// dialText matches the start of a Go dial error ("dial tcp 192.0.2.1:25:",
// "dial tcp [2001:db8::25]:587:", "dial tcp: ...", go-mail's "dial
// failed: ..."): whatever follows, the connection was never made.
var dialText = regexp.MustCompile(`\bdial (tcp[46]?|udp[46]?|failed)\b`)

// networkText returns the Detail for a flattened network error text; ok is
// false when text names none.
func networkText(text string) (detail string, ok bool) {
	low := strings.ToLower(text)
	for _, t := range networkTexts {
		if strings.Contains(low, t.substr) {
			return t.detail, true
		}
	}
	// go-mail flattens a drop after DATA to "...: EOF, affected message ID ...".
	if low == "eof" || strings.HasSuffix(low, ": eof") || strings.Contains(low, ": eof,") {
		return "connection closed", true
	}
	switch {
	case resolverText.MatchString(low):
		return "dns lookup failed", true
	case dialText.MatchString(low):
		return "network error", true
	}
	return "", false
}

// networkRule names the rule behind a network Detail.
func networkRule(detail string) string {
	switch detail {
	case "timeout":
		return "net-timeout"
	case "dns lookup failed":
		return "net-dns"
	case "connection refused":
		return "net-refused"
	case "host unreachable", "network unreachable", "host down", "network down":
		return "net-unreachable"
	case "connection reset", "connection aborted", "broken pipe", "connection closed":
		return "net-dropped"
	}
	if strings.HasPrefix(detail, "tls: ") {
		return "net-tls"
	}
	return "net-error"
}
