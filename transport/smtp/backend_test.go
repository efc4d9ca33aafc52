package smtp_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	gosmtp "github.com/emersion/go-smtp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/internal/netdelay"
)

// The credentials the test server accepts when a script requires AUTH.
const (
	testUser     = "mailer@example.com"
	testPassword = "s3cr3t-p@ss:w/rd%"
)

// stage is a point in the SMTP conversation where a script can act.
type stage string

const (
	atGreeting stage = "greeting"   // before the 220 banner
	atEHLO     stage = "ehlo"       // the EHLO command
	atMail     stage = "mail"       // MAIL FROM
	atRcpt     stage = "rcpt"       // RCPT TO
	afterData  stage = "after-data" // after the DATA terminator was read
)

// action is what the test server does at a stage instead of going on.
type action struct {
	reply string // one reply line, e.g. "550 5.1.1 No such user"
	hang  bool   // never answer
	drop  bool   // close the connection
	// conn limits the action to the conn-th connection the server
	// accepted (1 is the first); 0 means every connection.
	conn int
}

// serverTLS is how the test server offers TLS.
type serverTLS int

const (
	offerSTARTTLS   serverTLS = iota // STARTTLS with a certificate the CA file trusts
	implicitTLS                      // TLS from the first byte, trusted certificate
	noTLS                            // no TLS at all; STARTTLS is not advertised
	untrustedTLS                     // STARTTLS with a certificate from an unknown CA
	implicitUntrust                  // implicit TLS with a certificate from an unknown CA
)

// script says how a test server behaves for every connection.
type script struct {
	at   map[stage]action
	tls  serverTLS
	auth []string // AUTH mechanisms offered and required before MAIL FROM ("PLAIN", "LOGIN"); nil: no AUTH
	// echoAuth makes a refused AUTH quote what the client sent, base64
	// encoded as on the wire, as some servers do.
	echoAuth bool
	// utf8 advertises SMTPUTF8 (RFC 6531).
	utf8 bool
	// delay delivers every write of the server, its replies, that much
	// later, without holding up the next: a server a network round trip
	// of delay away.
	delay time.Duration
	// maxSize advertises SIZE maxSize in the EHLO reply (0: no SIZE).
	maxSize int64
	// noPipelining leaves PIPELINING out of the EHLO reply, which go-smtp
	// always offers. Without TLS only: it edits the bytes on the wire.
	noPipelining bool
}

// received is one mail the test server took: the envelope and the raw data.
type received struct {
	from string
	to   []string
	raw  []byte
}

// server is an in-process SMTP server on 127.0.0.1 built on go-smtp,
// scripted per test. It counts what clients did.
type server struct {
	addr   string
	host   string
	port   int
	caFile string // PEM of the CA that signed the trusted certificate

	srv  *gosmtp.Server
	done chan struct{} // closed when the server stops; ends hangs
	stop func()        // stops the server; idempotent

	mu       sync.Mutex
	script   script
	live     map[net.Conn]bool // open connections
	all      []*trackedConn    // every connection accepted, in order
	maxLive  int               // most connections open at once
	conns    int               // connections accepted
	closed   int               // connections closed
	auths    int               // AUTH exchanges started
	mails    int               // MAIL FROM commands (transactions started)
	rcpts    int               // RCPT TO commands
	datas    int               // DATA bodies read to the terminator
	accepted []received
	queueID  int
}

// startServer starts a test server that follows sc until the test ends.
func startServer(t testing.TB, sc script) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tcp := ln.Addr().(*net.TCPAddr)
	s := &server{addr: tcp.String(), host: "127.0.0.1", port: tcp.Port, script: sc, done: make(chan struct{}), live: map[net.Conn]bool{}}
	c := testCerts(t)
	s.caFile = filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(s.caFile, c.caPEM, 0o600))

	s.srv = gosmtp.NewServer(s)
	s.srv.Domain = "mx.test"
	s.srv.ErrorLog = log.New(io.Discard, "", 0)
	s.srv.AllowInsecureAuth = sc.tls == noTLS
	s.srv.EnableSMTPUTF8 = sc.utf8
	s.srv.MaxMessageBytes = sc.maxSize
	s.srv.ReadTimeout = 10 * time.Second
	s.srv.WriteTimeout = 10 * time.Second
	// Greeting actions happen on the TCP connection, before any implicit
	// TLS handshake; go-smtp must see the *tls.Conn, so TLS goes on top.
	var l net.Listener = &scriptedListener{Listener: ln, s: s}
	switch sc.tls {
	case offerSTARTTLS:
		s.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{c.trusted}}
	case untrustedTLS:
		s.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{c.untrusted}}
	case implicitTLS:
		l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{c.trusted}})
	case implicitUntrust:
		l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{c.untrusted}})
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = s.srv.Serve(l)
	}()
	s.stop = sync.OnceFunc(func() {
		close(s.done)
		// go-smtp's Close only closes listeners that Serve has registered
		// already; closing ours ends a Serve that has not got that far.
		_ = ln.Close()
		_ = s.srv.Close()
		<-served
	})
	t.Cleanup(s.stop)
	return s
}

// url returns an smtp URL for the server with the test credentials (when
// the script requires AUTH) and extra query parameters.
func (s *server) url(query string) string {
	scheme, q := "smtp", []string{}
	switch s.script.tls {
	case implicitTLS, implicitUntrust:
		scheme = "smtps"
	case noTLS:
		q = append(q, "tls=none")
	}
	if s.script.tls != noTLS {
		q = append(q, "ca_file="+s.caFile)
	}
	if query != "" {
		q = append(q, query)
	}
	user := ""
	if s.script.auth != nil {
		user = urlUser(testUser, testPassword)
	}
	return fmt.Sprintf("%s://%s%s?%s", scheme, user, s.addr, strings.Join(q, "&"))
}

// urlUser is the URL user info for name and password, percent-encoded.
func urlUser(name, password string) string {
	return url.UserPassword(name, password).String() + "@"
}

// counts returns connections, AUTH exchanges, MAIL FROM, RCPT TO and DATA bodies seen.
func (s *server) counts() (conns, auths, mails, rcpts, datas int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns, s.auths, s.mails, s.rcpts, s.datas
}

// mail returns the mails accepted so far.
func (s *server) mail() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.accepted...)
}

// oneRecipientEach checks that every mail the server accepted had exactly
// one recipient: no state leaked from one transaction into the next on a
// reused connection.
func oneRecipientEach(t *testing.T, s *server) {
	t.Helper()
	for i, m := range s.mail() {
		assert.Len(t, m.to, 1, "mail %d had recipients %q: state leaked between transactions", i, m.to)
	}
}

// set changes what the server does at st from now on.
func (s *server) set(st stage, a action) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := map[stage]action{st: a}
	for k, v := range s.script.at {
		if k != st {
			at[k] = v
		}
	}
	s.script.at = at
}

// dropAll closes every open connection, as a server does with idle clients.
func (s *server) dropAll() {
	s.mu.Lock()
	var cs []net.Conn
	for c := range s.live {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
	}
}

// connStats returns connections accepted, closed, and the most open at once.
func (s *server) connStats() (conns, closed, maxLive int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns, s.closed, s.maxLive
}

// action returns what the script says at st.
func (s *server) action(st stage) action {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.script.at[st]
}

// act carries out the script at st on c; a nil error means go on.
func (s *server) act(c net.Conn, st stage) error {
	a := s.action(st)
	if tc, ok := c.(*trackedConn); a.conn != 0 && (!ok || tc.n != a.conn) {
		return nil
	}
	switch {
	case a.hang:
		<-s.done
		return errors.New("server stopped")
	case a.drop:
		_ = c.Close()
		return errors.New("dropped")
	case a.reply != "":
		return parseReply(a.reply)
	}
	return nil
}

// parseReply turns "550 5.1.1 text" into the go-smtp error that sends
// exactly that line.
func parseReply(line string) *gosmtp.SMTPError {
	code, rest, _ := strings.Cut(line, " ")
	e := &gosmtp.SMTPError{Message: rest, EnhancedCode: gosmtp.NoEnhancedCode}
	e.Code, _ = strconv.Atoi(code)
	if enh, text, ok := strings.Cut(rest, " "); ok {
		var n [3]int
		if _, err := fmt.Sscanf(enh, "%d.%d.%d", &n[0], &n[1], &n[2]); err == nil && strings.Count(enh, ".") == 2 {
			e.EnhancedCode, e.Message = gosmtp.EnhancedCode(n), text
		}
	}
	return e
}

// scriptedListener carries out the greeting stage itself, before go-smtp
// sends its banner, and counts connections.
type scriptedListener struct {
	net.Listener
	s *server
}

func (l *scriptedListener) Accept() (net.Conn, error) {
	for {
		raw, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.s.script.delay > 0 { // script.delay never changes after start
			raw = netdelay.Wrap(raw, l.s.script.delay)
		}
		c := &trackedConn{Conn: raw, s: l.s}
		l.s.mu.Lock()
		l.s.conns++
		c.n = l.s.conns
		l.s.all = append(l.s.all, c)
		l.s.live[c] = true
		l.s.maxLive = max(l.s.maxLive, len(l.s.live))
		l.s.mu.Unlock()
		a := l.s.action(atGreeting)
		switch {
		case a.hang:
			go func() { <-l.s.done; _ = c.Close() }()
		case a.drop:
			_ = c.Close()
		case a.reply != "":
			go func() {
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = io.WriteString(c, a.reply+"\r\n")
				_ = c.Close()
			}()
		default:
			return c, nil
		}
	}
}

// trackedConn counts its Close in the server and keeps what went over it,
// read by read and write by write.
type trackedConn struct {
	net.Conn
	s    *server
	n    int // 1 for the first connection the server accepted
	once sync.Once
	wire []wireEvent // guarded by s.mu
}

// wireEvent is one Read or Write on a trackedConn.
type wireEvent struct {
	client bool // the client sent b (a Read); else the server did (a Write)
	b      []byte
}

func (c *trackedConn) Write(p []byte) (int, error) {
	if c.s.script.noPipelining { // script.noPipelining never changes after start
		// go-smtp always offers PIPELINING, as the first keyword after
		// the greeting line of its EHLO reply.
		if q := bytes.Replace(p, []byte("250-PIPELINING\r\n"), nil, 1); len(q) < len(p) {
			c.record(false, q)
			_, err := c.Conn.Write(q)
			return len(p), err
		}
	}
	c.record(false, p)
	return c.Conn.Write(p)
}

func (c *trackedConn) record(client bool, b []byte) {
	c.s.mu.Lock()
	c.wire = append(c.wire, wireEvent{client: client, b: append([]byte(nil), b...)})
	c.s.mu.Unlock()
}

func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.record(true, p[:n])
	}
	return n, err
}

// commands returns the verbs the client sent on each connection, in order
// (the message after the server's 354 left out). Only meaningful without TLS:
// the connection sees TLS records, not commands.
func (s *server) commands() [][]string {
	var all [][]string
	for _, groups := range s.groups() {
		var verbs []string
		for _, g := range groups {
			verbs = append(verbs, g...)
		}
		all = append(all, verbs)
	}
	return all
}

// groups returns the verbs the client sent on each connection, grouped by
// the read that took them: the commands of a group were all sent before
// the server answered any of them. Without TLS only, as commands.
func (s *server) groups() [][][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all [][][]string
	for _, c := range s.all {
		var groups [][]string
		inData, partial := false, ""
		for _, e := range c.wire {
			if !e.client {
				// The message follows the server's 354, never before.
				inData = inData || bytes.HasPrefix(e.b, []byte("354")) || bytes.Contains(e.b, []byte("\r\n354"))
				continue
			}
			lines := strings.Split(partial+string(e.b), "\r\n")
			partial = lines[len(lines)-1] // "" when the chunk ends a line
			var verbs []string
			for _, line := range lines[:len(lines)-1] {
				switch {
				case inData:
					inData = line != "."
				case line != "":
					verb, _, _ := strings.Cut(line, " ")
					verbs = append(verbs, strings.ToUpper(verb))
				}
			}
			if len(verbs) > 0 {
				groups = append(groups, verbs)
			}
		}
		all = append(all, groups)
	}
	return all
}

// say writes line to the n-th connection (1 is the first) under the SMTP
// server, unasked, as a server does before it hangs up on an idle client.
func (s *server) say(n int, line string) error {
	s.mu.Lock()
	c := s.all[n-1]
	s.mu.Unlock()
	_, err := io.WriteString(c.Conn, line+"\r\n")
	return err
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		c.s.closed++
		delete(c.s.live, c)
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}

// NewSession implements gosmtp.Backend; it runs at EHLO.
func (s *server) NewSession(c *gosmtp.Conn) (gosmtp.Session, error) {
	if err := s.act(c.Conn(), atEHLO); err != nil {
		return nil, err
	}
	return &session{s: s, conn: c.Conn()}, nil
}

// session is one client session on the test server.
type session struct {
	s      *server
	conn   net.Conn
	authed bool
	from   string
	to     []string
}

func (ss *session) AuthMechanisms() []string { return ss.s.script.auth }

func (ss *session) Auth(mech string) (sasl.Server, error) {
	ss.s.mu.Lock()
	ss.s.auths++
	ss.s.mu.Unlock()
	check := func(user, password string) error {
		if user != testUser || password != testPassword {
			msg := "Authentication credentials invalid"
			if ss.s.script.echoAuth {
				sent := "\x00" + user + "\x00" + password
				if mech == "LOGIN" {
					sent = password
				}
				msg += " for " + base64.StdEncoding.EncodeToString([]byte(sent))
			}
			return &gosmtp.SMTPError{Code: 535, EnhancedCode: gosmtp.EnhancedCode{5, 7, 8}, Message: msg}
		}
		ss.authed = true
		return nil
	}
	switch mech {
	case "PLAIN":
		return sasl.NewPlainServer(func(_, user, password string) error { return check(user, password) }), nil
	case "LOGIN":
		return &loginServer{check: check}, nil
	}
	return nil, gosmtp.ErrAuthUnknownMechanism
}

func (ss *session) Mail(from string, _ *gosmtp.MailOptions) error {
	ss.s.mu.Lock()
	ss.s.mails++
	ss.s.mu.Unlock()
	if ss.s.script.auth != nil && !ss.authed { // script.auth never changes after start
		return &gosmtp.SMTPError{Code: 530, EnhancedCode: gosmtp.EnhancedCode{5, 7, 0}, Message: "Authentication required"}
	}
	if err := ss.s.act(ss.conn, atMail); err != nil {
		return err
	}
	ss.from = from
	return nil
}

func (ss *session) Rcpt(to string, _ *gosmtp.RcptOptions) error {
	ss.s.mu.Lock()
	ss.s.rcpts++
	ss.s.mu.Unlock()
	if err := ss.s.act(ss.conn, atRcpt); err != nil {
		return err
	}
	ss.to = append(ss.to, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	ss.s.mu.Lock()
	ss.s.datas++
	ss.s.mu.Unlock()
	if err := ss.s.act(ss.conn, afterData); err != nil {
		return err
	}
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	ss.s.accepted = append(ss.s.accepted, received{from: ss.from, to: ss.to, raw: raw})
	ss.s.queueID++
	return &gosmtp.SMTPError{Code: 250, EnhancedCode: gosmtp.EnhancedCode{2, 0, 0}, Message: fmt.Sprintf("OK: queued as Q%d", ss.s.queueID)}
}

func (ss *session) Reset() { ss.from, ss.to = "", nil }

func (ss *session) Logout() error { return nil }

// loginServer is the server side of AUTH LOGIN, which go-sasl lacks.
type loginServer struct {
	check func(user, password string) error
	user  string
	step  int
}

func (l *loginServer) Next(response []byte) ([]byte, bool, error) {
	l.step++
	switch l.step {
	case 1:
		if len(response) > 0 { // initial response: the user name
			l.user, l.step = string(response), 2
			return []byte("Password:"), false, nil
		}
		return []byte("Username:"), false, nil
	case 2:
		l.user = string(response)
		return []byte("Password:"), false, nil
	default:
		return nil, true, l.check(l.user, string(response))
	}
}

// certs are the test PKI: a CA whose PEM goes into ca_file, a server
// certificate it signed, and one signed by a CA nobody trusts; both for
// 127.0.0.1 and localhost.
type certs struct {
	caPEM              []byte
	trusted, untrusted tls.Certificate
}

var (
	certsOnce sync.Once
	certsVal  certs
	certsErr  error
)

func testCerts(t testing.TB) certs {
	t.Helper()
	certsOnce.Do(func() { certsVal, certsErr = makeCerts() })
	require.NoError(t, certsErr)
	return certsVal
}

func makeCerts() (certs, error) {
	ca, caKey, caPEM, err := makeCA("mailspool test CA")
	if err != nil {
		return certs{}, err
	}
	other, otherKey, _, err := makeCA("untrusted test CA")
	if err != nil {
		return certs{}, err
	}
	trusted, err := makeLeaf(ca, caKey)
	if err != nil {
		return certs{}, err
	}
	untrusted, err := makeLeaf(other, otherKey)
	if err != nil {
		return certs{}, err
	}
	return certs{caPEM: caPEM, trusted: trusted, untrusted: untrusted}, nil
}

func makeCA(name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func makeLeaf(ca *x509.Certificate, caKey *ecdsa.PrivateKey) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "mx.test"},
		DNSNames:     []string{"localhost", "mx.test"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
