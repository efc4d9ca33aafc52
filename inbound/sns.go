package inbound

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // SNS SignatureVersion 1 is SHA1withRSA
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// snsMessage is an SNS HTTP(S) delivery: a notification or a
// (un)subscription confirmation.
type snsMessage struct {
	Type             string `json:"Type"`
	MessageID        string `json:"MessageId"`
	Token            string `json:"Token"`
	TopicArn         string `json:"TopicArn"`
	Subject          string `json:"Subject"`
	Message          string `json:"Message"`
	Timestamp        string `json:"Timestamp"`
	SignatureVersion string `json:"SignatureVersion"`
	Signature        string `json:"Signature"`
	SigningCertURL   string `json:"SigningCertURL"`
	SubscribeURL     string `json:"SubscribeURL"`
}

// snsHost is the only host a signing certificate (and a subscription
// confirmation) may come from: sns.<region>.amazonaws.com, or the China
// partition's sns.<region>.amazonaws.com.cn. Nothing else: an attacker
// controls some other *.amazonaws.com names (an S3 bucket's), and a
// checker that accepted any of them let anyone sign their own messages.
var snsHost = regexp.MustCompile(`^sns\.[a-z]{2}(-gov)?-[a-z]+-\d\.amazonaws\.com(\.cn)?$`)

// stringToSign is the canonical text an SNS signature covers.
func (m *snsMessage) stringToSign() string {
	var b strings.Builder
	add := func(k, v string) { b.WriteString(k + "\n" + v + "\n") }
	add("Message", m.Message)
	add("MessageId", m.MessageID)
	if m.Type == "Notification" {
		if m.Subject != "" {
			add("Subject", m.Subject)
		}
		add("Timestamp", m.Timestamp)
		add("TopicArn", m.TopicArn)
		add("Type", m.Type)
		return b.String()
	}
	add("SubscribeURL", m.SubscribeURL)
	add("Timestamp", m.Timestamp)
	add("Token", m.Token)
	add("TopicArn", m.TopicArn)
	add("Type", m.Type)
	return b.String()
}

// snsVerifier checks SNS messages. Its host pattern and HTTP client are
// fixed in production (snsHost, a client without redirects); the tests
// of this package replace them to serve a test certificate.
type snsVerifier struct {
	topics []string
	window time.Duration
	host   *regexp.Regexp
	client *http.Client
	certs  certCache
}

func newSNSVerifier(topics []string, window time.Duration) *snsVerifier {
	return &snsVerifier{
		topics: topics, window: window, host: snsHost,
		client: &http.Client{
			Timeout:       10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// checkURL accepts only https://<an SNS host>/..., no user, no port.
func (v *snsVerifier) checkURL(what, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	// The pattern is matched against host[:port]: the production pattern
	// has no port, so a URL with one is refused too.
	if err != nil || u.Scheme != "https" || u.User != nil || !v.host.MatchString(u.Host) {
		return nil, fmt.Errorf("the %s %q is not an https URL on sns.<region>.amazonaws.com", what, clip(raw, 200))
	}
	return u, nil
}

// verify runs every check that needs no network first (type, topic,
// time, certificate URL), then the signature, fetching the certificate
// only for a message that passed them.
func (v *snsVerifier) verify(ctx context.Context, m *snsMessage, now time.Time) error {
	switch m.Type {
	case "Notification", "SubscriptionConfirmation", "UnsubscribeConfirmation":
	default:
		return fmt.Errorf("unknown SNS message type %q", clip(m.Type, 40))
	}
	if !slices.Contains(v.topics, m.TopicArn) {
		return fmt.Errorf("topic %q is not in serve.ses.topic_arns", clip(m.TopicArn, 256))
	}
	ts, err := time.Parse(time.RFC3339Nano, m.Timestamp)
	if err != nil {
		return errors.New("the Timestamp is not an RFC 3339 time")
	}
	if d := now.Sub(ts); d > v.window || d < -v.window {
		return fmt.Errorf("the Timestamp is %s away from now, outside the %s window", d.Round(time.Second), v.window)
	}
	var h crypto.Hash
	switch m.SignatureVersion {
	case "1":
		h = crypto.SHA1
	case "2":
		h = crypto.SHA256
	default:
		return fmt.Errorf("unknown SignatureVersion %q", clip(m.SignatureVersion, 10))
	}
	sig, err := base64.StdEncoding.DecodeString(m.Signature)
	if err != nil || len(sig) == 0 {
		return errors.New("the Signature is not base64")
	}
	certURL, err := v.checkURL("SigningCertURL", m.SigningCertURL)
	if err != nil {
		return err
	}
	if !strings.HasSuffix(certURL.Path, ".pem") {
		return errors.New("the SigningCertURL does not name a .pem file")
	}
	if m.Type == "SubscriptionConfirmation" {
		if _, err := v.checkURL("SubscribeURL", m.SubscribeURL); err != nil {
			return err
		}
	}
	cert, err := v.cert(ctx, certURL.String(), now)
	if err != nil {
		return err
	}
	key, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return errors.New("the signing certificate's key is not RSA")
	}
	var digest []byte
	if h == crypto.SHA1 {
		sum := sha1.Sum([]byte(m.stringToSign())) //nolint:gosec // SignatureVersion 1
		digest = sum[:]
	} else {
		sum := sha256.Sum256([]byte(m.stringToSign()))
		digest = sum[:]
	}
	if err := rsa.VerifyPKCS1v15(key, h, digest, sig); err != nil {
		return errors.New("the signature does not match")
	}
	return nil
}

// errFetch marks a failure to fetch a certificate: our side or AWS's, not
// the sender's (503, so that SNS retries).
var errFetch = errors.New("fetching the signing certificate")

// maxCertSize bounds a fetched certificate.
const maxCertSize = 64 << 10

// cert returns the certificate at u, from the cache or fetched.
func (v *snsVerifier) cert(ctx context.Context, u string, now time.Time) (*x509.Certificate, error) {
	if c := v.certs.get(u, now); c != nil {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errFetch, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s answered %s", errFetch, req.URL.Host, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxCertSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errFetch, err)
	}
	if len(data) > maxCertSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", errFetch, maxCertSize)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: not a PEM certificate", errFetch)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errFetch, err)
	}
	if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		return nil, errors.New("the signing certificate is not valid now")
	}
	v.certs.put(u, cert)
	return cert, nil
}

// confirm visits a verified SubscriptionConfirmation's SubscribeURL.
func (v *snsVerifier) confirm(ctx context.Context, m *snsMessage) error {
	u, err := v.checkURL("SubscribeURL", m.SubscribeURL)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return fmt.Errorf("confirming the subscription: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("confirming the subscription: %s answered %s", u.Host, resp.Status)
	}
	return nil
}

// certCache keeps fetched certificates by URL until they expire; it
// holds at most maxCerts (SNS rotates its certificate rarely).
type certCache struct {
	mu sync.Mutex
	m  map[string]*x509.Certificate
}

const maxCerts = 32

func (c *certCache) get(u string, now time.Time) *x509.Certificate {
	c.mu.Lock()
	defer c.mu.Unlock()
	cert := c.m[u]
	if cert != nil && now.After(cert.NotAfter) {
		delete(c.m, u)
		return nil
	}
	return cert
}

func (c *certCache) put(u string, cert *x509.Certificate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCerts {
		c.m = map[string]*x509.Certificate{}
	}
	c.m[u] = cert
}
