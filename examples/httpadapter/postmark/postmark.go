// Package postmark is a mailspool transport adapter for Postmark's email
// API (POST /email), written outside the mailspool module as an example
// of an adapter: see mailspool's docs/ADAPTERS.md.
//
//	postmark://?token_env=POSTMARK_SERVER_TOKEN
//	postmark://?token_env=POSTMARK_SERVER_TOKEN&stream=broadcast&timeout=20s
//
// The server token comes from the environment variable token_env names
// (never from the URL, so that it stays out of config files and logs).
// endpoint replaces https://api.postmarkapp.com (for tests).
package postmark

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/mail"
	"net/url"
	"os"
	"sync/atomic"
	"time"

	"github.com/mailspool/mailspool/classify"
	"github.com/mailspool/mailspool/transport"
)

// Scheme is the URL scheme of the adapter.
const Scheme = "postmark"

// DefaultEndpoint is Postmark's API.
const DefaultEndpoint = "https://api.postmarkapp.com"

// URLOpener opens Postmark transports; its zero value is ready to use.
type URLOpener struct {
	// TLSConfig, when set, is the client's TLS configuration (tests).
	TLSConfig *tls.Config
}

// OpenTransportURL opens a transport as u describes.
func (o URLOpener) OpenTransportURL(_ context.Context, u *url.URL) (transport.Transport, error) {
	if err := transport.CheckQuery(u, "token_env", "endpoint", "stream", "timeout"); err != nil {
		return nil, err
	}
	if _, has := u.User.Password(); has {
		return nil, fmt.Errorf("postmark: URL %q has a password: give the server token in an environment variable named by token_env", transport.RedactURL(u))
	}
	q := u.Query()
	env := q.Get("token_env")
	if env == "" {
		return nil, fmt.Errorf("postmark: URL %q has no token_env (the environment variable holding the server token)", transport.RedactURL(u))
	}
	token := os.Getenv(env)
	if token == "" {
		return nil, fmt.Errorf("postmark: environment variable %s (token_env) is empty or unset", env)
	}
	endpoint := DefaultEndpoint
	if e := q.Get("endpoint"); e != "" {
		eu, err := url.Parse(e)
		if err != nil || (eu.Scheme != "https" && eu.Scheme != "http") || eu.Host == "" {
			return nil, fmt.Errorf("postmark: endpoint %q is not an http(s) URL", transport.Redact(e))
		}
		endpoint = e
	}
	timeout := 30 * time.Second
	if v := q.Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("postmark: timeout %q is not a positive duration such as 10s", v)
		}
		timeout = d
	}
	stream := q.Get("stream")
	if stream == "" {
		stream = "outbound"
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if o.TLSConfig != nil {
		tr.TLSClientConfig = o.TLSConfig
	}
	return &Transport{token: token, endpoint: endpoint + "/email", stream: stream, client: &http.Client{Transport: tr, Timeout: timeout}}, nil
}

// Transport sends through Postmark. It is safe for concurrent use.
type Transport struct {
	token, endpoint, stream string
	client                  *http.Client
	closed                  atomic.Bool
}

// request is Postmark's POST /email body.
type request struct {
	From          string       `json:"From"`
	To            string       `json:"To"`
	ReplyTo       string       `json:"ReplyTo,omitempty"`
	Subject       string       `json:"Subject"`
	TextBody      string       `json:"TextBody,omitempty"`
	HTMLBody      string       `json:"HtmlBody,omitempty"`
	Headers       []header     `json:"Headers,omitempty"`
	Attachments   []attachment `json:"Attachments,omitempty"`
	MessageStream string       `json:"MessageStream"`
}

type header struct {
	Name  string `json:"Name"`
	Value string `json:"Value"`
}

type attachment struct {
	Name        string `json:"Name"`
	Content     string `json:"Content"` // base64
	ContentType string `json:"ContentType"`
	ContentID   string `json:"ContentID,omitempty"` // "cid:..." for inline
}

// answer is Postmark's response body.
type answer struct {
	MessageID string `json:"MessageID"`
	ErrorCode int    `json:"ErrorCode"`
	Message   string `json:"Message"`
}

// Send makes one POST /email.
func (t *Transport) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	if t.closed.Load() {
		return transport.Receipt{}, &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Detail: "postmark: transport closed", Err: transport.ErrClosed}
	}
	if err := m.Validate(); err != nil {
		return transport.Receipt{}, &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeMessage, Detail: err.Error(), Err: err}
	}
	id := m.MessageID
	if id == "" {
		id = transport.NewMessageID(m.From.Address)
	}
	body := request{
		From: addr(m.From), To: addr(m.To), Subject: m.Subject, TextBody: m.Text, HTMLBody: m.HTML, MessageStream: t.stream,
		Headers: []header{{Name: "Message-ID", Value: "<" + id + ">"}},
	}
	if m.ReplyTo.Address != "" {
		body.ReplyTo = addr(m.ReplyTo)
	}
	for _, h := range m.Headers {
		body.Headers = append(body.Headers, header{Name: h.Name, Value: h.Value})
	}
	for _, a := range m.Attachments {
		pa := attachment{Name: a.Filename, Content: base64.StdEncoding.EncodeToString(a.Data), ContentType: a.ContentType}
		if a.Inline {
			pa.ContentID = "cid:" + a.ContentID
		}
		body.Attachments = append(body.Attachments, pa)
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return transport.Receipt{}, &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeMessage, Detail: "postmark: encoding the request", Err: err}
	}
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) { wrote.Store(i.Err == nil) }})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.endpoint, bytes.NewReader(raw))
	if err != nil {
		return transport.Receipt{}, &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Detail: "postmark: bad endpoint", Err: err}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Postmark-Server-Token", t.token)
	resp, err := t.client.Do(req)
	if err != nil {
		err = unwrapURL(err)
		if wrote.Load() {
			// The whole mail was handed over: Postmark may have it.
			return transport.Receipt{}, classify.MaybeDelivered(err)
		}
		return transport.Receipt{}, classify.Error(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return transport.Receipt{}, classify.MaybeDelivered(unwrapURL(err))
	}
	var a answer
	_ = json.Unmarshal(data, &a)
	if resp.StatusCode == http.StatusOK && a.ErrorCode == 0 {
		return transport.Receipt{MessageID: a.MessageID, Response: a.Message}, nil
	}
	return transport.Receipt{}, classifyAnswer(resp, data, a)
}

// classifyAnswer maps Postmark's errors: 422 with ErrorCode 406 (the
// recipient is inactive: hard bounce, spam complaint, suppression) and
// 300 (invalid request) are about the recipient and the message; 401 (a
// bad server token) is the lane's; the rest (429, 5xx) as package
// classify says for HTTP.
func classifyAnswer(resp *http.Response, data []byte, a answer) error {
	if resp.StatusCode == http.StatusUnauthorized {
		// ErrorCode 10: the server token is wrong or revoked.
		return &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Code: resp.StatusCode, Rule: "postmark-401", Detail: a.Message}
	}
	if resp.StatusCode == http.StatusUnprocessableEntity {
		switch a.ErrorCode {
		case 406:
			return &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeRecipient, Code: resp.StatusCode, Rule: "postmark-406", Detail: a.Message}
		case 300:
			return &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeMessage, Code: resp.StatusCode, Rule: "postmark-300", Detail: a.Message}
		}
	}
	return classify.HTTP(resp.StatusCode, resp.Header, data)
}

// unwrapURL drops net/http's *url.Error, whose text repeats the endpoint.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func addr(a mail.Address) string { return a.String() }

// Close releases idle connections; it is idempotent.
func (t *Transport) Close() error {
	if !t.closed.Swap(true) {
		t.client.CloseIdleConnections()
	}
	return nil
}
