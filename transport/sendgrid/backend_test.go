package sendgrid_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"net/textproto"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/conformance"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/sendgrid"
)

// v3Request is the part of a v3 mail/send body the harness reads, written
// from SendGrid's API reference rather than the SDK's types.
type v3Request struct {
	Personalizations []struct {
		To []struct {
			Email string `json:"email"`
			Name  string `json:"name"`
		} `json:"to"`
		Subject string `json:"subject"`
	} `json:"personalizations"`
	From struct {
		Email string `json:"email"`
		Name  string `json:"name"`
	} `json:"from"`
	ReplyTo *struct {
		Email string `json:"email"`
		Name  string `json:"name"`
	} `json:"reply_to"`
	Subject string `json:"subject"`
	Content []struct {
		Type  string `json:"type"`
		Value string `json:"value"`
	} `json:"content"`
	Headers     map[string]string `json:"headers"`
	Attachments []struct {
		Content     string `json:"content"`
		Type        string `json:"type"`
		Filename    string `json:"filename"`
		Disposition string `json:"disposition"`
		ContentID   string `json:"content_id"`
	} `json:"attachments"`
}

func toReceived(req *v3Request) conformance.Received {
	p := req.Personalizations[0]
	got := conformance.Received{
		From:     req.From.Email,
		FromName: req.From.Name,
		ToName:   p.To[0].Name,
		Subject:  req.Subject,
		Header:   textproto.MIMEHeader{},
	}
	if p.Subject != "" {
		got.Subject = p.Subject
	}
	for _, to := range p.To {
		got.To = append(got.To, to.Email)
	}
	for _, c := range req.Content {
		switch c.Type {
		case "text/plain":
			got.Text = c.Value
		case "text/html":
			got.HTML = c.Value
		}
	}
	for k, v := range req.Headers {
		got.Header.Add(k, v)
	}
	for _, a := range req.Attachments {
		data, _ := base64.StdEncoding.DecodeString(a.Content)
		got.Attachments = append(got.Attachments, transport.Attachment{Filename: a.Filename, ContentType: a.Type, Data: data,
			Inline: a.Disposition == "inline", ContentID: a.ContentID})
	}
	if req.ReplyTo != nil {
		got.Header.Set("Reply-To", (&mail.Address{Name: req.ReplyTo.Name, Address: req.ReplyTo.Email}).String())
	}
	return got
}

// writeErrors answers with SendGrid's v3 error body.
func writeErrors(w http.ResponseWriter, status int, messages ...string) {
	type apiError struct {
		Message string  `json:"message"`
		Field   *string `json:"field"`
		Help    *string `json:"help"`
	}
	var body struct {
		Errors []apiError `json:"errors"`
	}
	for _, m := range messages {
		body.Errors = append(body.Errors, apiError{Message: m})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// scripted is an API that answers every request with one fixed response
// and counts the requests.
type scripted struct {
	status int
	header http.Header
	body   string
	calls  atomic.Int32
}

func (s *scripted) open(t *testing.T) *sendgrid.Transport {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		for k, vs := range s.header {
			w.Header()[k] = vs
		}
		w.WriteHeader(s.status)
		_, _ = io.WriteString(w, s.body)
	}))
	t.Cleanup(srv.Close)
	tr, err := sendgrid.Open(context.Background(), &sendgrid.Options{APIKey: testKey, Endpoint: srv.URL, Timeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
