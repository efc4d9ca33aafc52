package classify

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The errors below are produced by real connections on loopback.

// serve accepts one connection on a fresh loopback listener and hands it
// to handle; it returns the listener's address.
func serve(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		handle(c)
	}()
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestErrorRefusedOnLoopback(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	_, err = net.DialTimeout("tcp", addr, 5*time.Second)
	require.Error(t, err)
	check(t, want{connection, 0, "", 0, "connection refused"}, Error(err))
}

func TestErrorEOFOnLoopback(t *testing.T) {
	t.Parallel()
	addr := serve(t, func(c net.Conn) { c.Close() })
	_, _, err := textproto.NewConn(dial(t, addr)).ReadResponse(220)
	require.Error(t, err)
	check(t, want{connection, 0, "", 0, "connection closed"}, Error(err))
	te := check(t, want{temporary, 0, "", 0, "connection closed"}, MaybeDelivered(err))
	require.True(t, te.MaybeDelivered)
}

func TestErrorTimeoutOnLoopback(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	addr := serve(t, func(c net.Conn) { <-hold; c.Close() })
	c := dial(t, addr)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	_, err := c.Read(make([]byte, 1))
	require.Error(t, err)
	check(t, want{connection, 0, "", 0, "timeout"}, Error(err))
	te := check(t, want{temporary, 0, "", 0, "timeout"}, MaybeDelivered(err))
	require.True(t, te.MaybeDelivered)
}

func TestErrorSMTPReplyOnLoopback(t *testing.T) {
	t.Parallel()
	addr := serve(t, func(c net.Conn) {
		defer c.Close()
		c.Write([]byte("550-5.1.1 The email account that you tried to reach does not exist.\r\n550 5.1.1 Please check the \"address\".\r\n"))
	})
	_, _, err := textproto.NewConn(dial(t, addr)).ReadResponse(250)
	require.Error(t, err)
	w := want{permanent, 550, "5.1.1", 0, `The email account that you tried to reach does not exist. Please check the "address".`}
	check(t, w, Error(err))

	// Go 1.26 prints the reply quoted (550 "5.1.1 ...\n5.1.1 ..."); a
	// library that flattens it to text must classify the same.
	require.Contains(t, err.Error(), `550 "5.1.1 `)
	check(t, w, Error(errors.New("sending SMTP RCPT TO command: "+err.Error())))
}

// quietTLSServer starts an httptest TLS server that does not log handshake
// errors, with its TLS config adjusted by each of tune.
func quietTLSServer(t *testing.T, tune ...func(*tls.Config)) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = &tls.Config{}
	for _, f := range tune {
		f(srv.TLS)
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func TestErrorTLSOnLoopback(t *testing.T) {
	t.Parallel()
	srv := quietTLSServer(t)
	addr := srv.Listener.Addr().String()
	trusted := x509.NewCertPool()
	trusted.AddCert(srv.Certificate())

	t.Run("unknown authority", func(t *testing.T) {
		_, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: x509.NewCertPool()})
		require.Error(t, err)
		check(t, want{connection, 0, "", 0, "tls: certificate not trusted"}, Error(err))
	})
	t.Run("name mismatch", func(t *testing.T) {
		_, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: trusted, ServerName: "smtp.wrong.invalid"})
		require.Error(t, err)
		check(t, want{connection, 0, "", 0, "tls: certificate name mismatch"}, Error(err))
	})
	t.Run("http client keeps the URL out of Detail", func(t *testing.T) {
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool()}}}
		_, err := client.Get(srv.URL + "/v3/mail/send?api_key=s3cr3t")
		require.Error(t, err)
		te := check(t, want{connection, 0, "", 0, "tls: certificate not trusted"}, Error(err))
		require.NotContains(t, te.Detail, "s3cr3t")
	})
	t.Run("server rejects the client", func(t *testing.T) {
		strict := quietTLSServer(t, func(c *tls.Config) {
			c.ClientAuth = tls.RequireAndVerifyClientCert
			c.MaxVersion = tls.VersionTLS12 // the alert then arrives during the handshake
		})
		pool := x509.NewCertPool()
		pool.AddCert(strict.Certificate())
		_, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", strict.Listener.Addr().String(), &tls.Config{RootCAs: pool})
		require.Error(t, err)
		check(t, want{connection, 0, "", 0, "tls: handshake failed"}, Error(err))
	})
	t.Run("plaintext server", func(t *testing.T) {
		plain := serve(t, func(c net.Conn) {
			defer c.Close()
			c.Write([]byte("220 mail.example.com ESMTP Postfix\r\n"))
		})
		_, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", plain, &tls.Config{RootCAs: trusted})
		require.Error(t, err)
		check(t, want{connection, 0, "", 0, "tls: handshake failed"}, Error(err))
	})
}

// dialFailures are Go's words for a dial or a resolver failure (net,
// syscall, the cgo resolver on glibc, musl, macOS and Windows), with IPv4
// and IPv6 addresses.
var dialFailures = []string{
	"dial tcp 192.0.2.1:587: connect: connection refused",
	"dial tcp [2001:db8::25]:587: connect: connection refused",
	"dial tcp [2001:db8::25]:25: connect: network is unreachable",
	"dial tcp [fe80::1%eth0]:25: connect: no route to host",
	"dial tcp 192.0.2.1:465: i/o timeout",
	"dial tcp [2001:db8::550]:465: i/o timeout",
	"dial tcp 192.0.2.1:587: connect: cannot assign requested address",
	"dial tcp [2001:db8::1]:587: connect: address family not supported by protocol",
	"dial tcp 192.0.2.1:25: connect: permission denied",
	"dial tcp 192.0.2.1:25: connect: operation not permitted",
	"dial tcp: address smtp.example.com: missing port in address",
	"dial tcp: address 2001:db8::1:587: too many colons in address",
	"dial tcp: lookup smtp.example.com: no such host",
	"dial tcp: lookup smtp.example.com on [::1]:53: no such host",
	"dial tcp: lookup smtp.example.com on 127.0.0.53:53: server misbehaving",
	"dial tcp: lookup smtp.example.com on [2001:4860:4860::8888]:53: read udp [2001:db8::2]:41414->[2001:4860:4860::8888]:53: i/o timeout",
	"dial tcp: lookup smtp.example.com on [::1]:53: read udp [::1]:50000->[::1]:53: read: connection refused",
	"dial tcp: lookup smtp.example.com: Temporary failure in name resolution",
	"dial tcp: lookup smtp.example.com: Name or service not known",
	"dial tcp: lookup smtp.example.com: nodename nor servname provided, or not known",
	"dial tcp: lookup smtp.example.com: No address associated with hostname",
	"dial tcp: lookup smtp.example.com: getaddrinfow: The requested name is valid, but no data of the requested type was found.",
	"dial tcp: lookup smtp.example.com: no such host is known.",
	"dial tcp: lookup smtp.example.com on 10.0.0.2:53: dial udp 10.0.0.2:53: connect: network is unreachable",
	"dial tcp: lookup smtp.example.com: dnsquery: DNS name does not exist.",
	"dial tcp 192.0.2.1:587: connectex: No connection could be made because the target machine actively refused it.",
	"dial tcp 192.0.2.1:587: connectex: A connection attempt failed because the connected party did not properly respond after a period of time, or established connection failed because connected host has failed to respond.",
	"lookup smtp.example.com: no such host",
	"lookup 2001:db8::25: unrecognized address",
}

// TestDialAndResolverFailuresAreLaneConnection: a dial or resolver failure,
// in any wrapper that keeps or flattens it (go-mail's "dial failed: %w",
// its SendError text, net/smtp's bare error, this package's adapters'
// "smtp: connect host:port: ..."), is Connection of lane scope, never
// Temporary and never read as an SMTP reply, whatever digits its addresses
// hold.
func TestDialAndResolverFailuresAreLaneConnection(t *testing.T) {
	t.Parallel()
	wrappers := []func(string) error{
		func(s string) error { return errors.New(s) },                                                       // net/smtp returns the dial error as it is
		func(s string) error { return fmt.Errorf("dial failed: %w", errors.New(s)) },                        // go-mail's client.DialWithContext
		func(s string) error { return errors.New("failed to dial to SMTP server: " + s) },                   // a flattened SendError
		func(s string) error { return fmt.Errorf("smtp: connect smtp.example.com:587: %w", errors.New(s)) }, // transport/smtp's setupError
	}
	for _, text := range dialFailures {
		for i, wrap := range wrappers {
			te := asError(Error(wrap(text)))
			require.NotNil(t, te, text)
			assert.Equal(t, connection, te.Kind, "wrapper %d: kind of %q (%s)", i, text, te.Rule)
			assert.Equal(t, lane, te.Scope, "wrapper %d: scope of %q", i, text)
			assert.Zero(t, te.Code, "wrapper %d: %q read as a reply", i, text)
		}
	}
	// The typed forms, as net returns them.
	v6 := &net.TCPAddr{IP: net.ParseIP("2001:db8::25"), Port: 587}
	for _, err := range []error{
		&net.OpError{Op: "dial", Net: "tcp", Addr: v6, Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}},
		&net.OpError{Op: "dial", Net: "tcp", Addr: v6, Err: &os.SyscallError{Syscall: "connect", Err: syscall.EADDRNOTAVAIL}},
		&net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "missing port in address", Addr: "smtp.example.com"}},
		&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "smtp.example.com", Server: "[::1]:53", IsNotFound: true}},
		&net.DNSError{Err: "server misbehaving", Name: "smtp.example.com", Server: "10.0.0.2:53", IsTemporary: true},
	} {
		for _, wrapped := range []error{err, fmt.Errorf("dial failed: %w", err), &url.Error{Op: "Post", URL: "https://email.eu-west-1.amazonaws.com/", Err: err}} {
			te := asError(Error(wrapped))
			require.NotNil(t, te)
			assert.Equal(t, connection, te.Kind, "kind of %v (%s)", wrapped, te.Rule)
			assert.Equal(t, lane, te.Scope, "scope of %v", wrapped)
		}
	}
}
