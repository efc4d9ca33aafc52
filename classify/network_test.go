package classify

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"testing"
	"time"

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
