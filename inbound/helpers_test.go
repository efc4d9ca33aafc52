package inbound

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // SignatureVersion 1
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailspool/mailspool/suppress"
	"github.com/stretchr/testify/require"
)

// testTopic is the topic the tests allow.
const testTopic = "arn:aws:sns:eu-west-1:123456789012:mailspool-ses"

// signer is a test certificate authority's SNS signing certificate,
// served from an httptest TLS server, and the key that signs with it.
type signer struct {
	key     *rsa.PrivateKey
	srv     *httptest.Server
	certURL string
	fetches atomic.Int64 // GETs of the certificate
	confirm atomic.Int64 // GETs of the subscribe URL
}

var (
	caOnce sync.Once
	caKey  *rsa.PrivateKey
	caCert *x509.Certificate
)

// testCA makes, once, a CA that issues the signing certificates.
func testCA(t *testing.T) (*rsa.PrivateKey, *x509.Certificate) {
	caOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		require.NoError(t, err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mailspool test CA"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
		require.NoError(t, err)
		caKey = k
		caCert, err = x509.ParseCertificate(der)
		require.NoError(t, err)
	})
	return caKey, caCert
}

func newSigner(t *testing.T) *signer {
	t.Helper()
	ck, cc := testCA(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "sns.eu-west-1.amazonaws.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, cc, &key.PublicKey, ck)
	require.NoError(t, err)
	pemCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	s := &signer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/SimpleNotificationService-test.pem", func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		_, _ = w.Write(pemCert)
	})
	mux.HandleFunc("/confirm", func(w http.ResponseWriter, r *http.Request) {
		s.confirm.Add(1)
		_, _ = w.Write([]byte("<ConfirmSubscriptionResponse/>"))
	})
	s.srv = httptest.NewTLSServer(mux)
	t.Cleanup(s.srv.Close)
	s.certURL = s.srv.URL + "/SimpleNotificationService-test.pem"
	return s
}

// sign fills m's signature fields, version "1" or "2".
func (s *signer) sign(t *testing.T, m *snsMessage, version string) {
	t.Helper()
	m.SignatureVersion = version
	if m.SigningCertURL == "" {
		m.SigningCertURL = s.certURL
	}
	var sig []byte
	var err error
	if version == "1" {
		sum := sha1.Sum([]byte(m.stringToSign())) //nolint:gosec // SignatureVersion 1
		sig, err = rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA1, sum[:])
	} else {
		sum := sha256.Sum256([]byte(m.stringToSign()))
		sig, err = rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA256, sum[:])
	}
	require.NoError(t, err)
	m.Signature = base64.StdEncoding.EncodeToString(sig)
}

// testHandler is a handler on db that trusts s's server: the one place
// where the certificate host pattern and HTTP client are replaced.
func testHandler(t *testing.T, s store, sig *signer, sgKey *ecdsa.PublicKey, mutate func(*Options)) *Handler {
	t.Helper()
	o := Options{SESTopics: []string{testTopic}, SendGridKey: sgKey}
	if mutate != nil {
		mutate(&o)
	}
	h, err := NewHandler(s.db, o)
	require.NoError(t, err)
	if h.sns != nil && sig != nil {
		h.sns.host = regexp.MustCompile(`^127\.0\.0\.1:\d+$`)
		client := sig.srv.Client()
		client.CheckRedirect = h.sns.client.CheckRedirect
		h.sns.client = client
	}
	return h
}

func post(h http.Handler, path string, body []byte, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// counts returns the rows of the events table and of the suppression list.
func counts(t *testing.T, s store) (events, suppressed int) {
	t.Helper()
	require.NoError(t, s.db.QueryRow(`SELECT COUNT(*) FROM `+Table).Scan(&events))
	require.NoError(t, s.db.QueryRow(`SELECT COUNT(*) FROM `+suppress.Table).Scan(&suppressed))
	return events, suppressed
}

func suppressedReasons(t *testing.T, s store) map[string]suppress.Reason {
	t.Helper()
	l, err := suppress.Open(s.db)
	require.NoError(t, err)
	es, err := l.Entries(context.Background(), suppress.Filter{})
	require.NoError(t, err)
	out := map[string]suppress.Reason{}
	for _, e := range es {
		out[e.Address] = e.Reason
	}
	return out
}

// sendGridKey is a generated P-256 key and the verification key SendGrid
// would show for it.
func sendGridKey(t *testing.T) (*ecdsa.PrivateKey, string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	require.NoError(t, err)
	return k, base64.StdEncoding.EncodeToString(der)
}

// signSendGrid returns the signature headers of body at ts.
func signSendGrid(t *testing.T, k *ecdsa.PrivateKey, body []byte, ts time.Time) http.Header {
	t.Helper()
	stamp := strconv.FormatInt(ts.Unix(), 10)
	sum := sha256.Sum256(append([]byte(stamp), body...))
	sig, err := ecdsa.SignASN1(rand.Reader, k, sum[:])
	require.NoError(t, err)
	return http.Header{
		sendGridSignatureHeader: {base64.StdEncoding.EncodeToString(sig)},
		sendGridTimestampHeader: {stamp},
	}
}

func httptestRecorder(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}
