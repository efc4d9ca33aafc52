// Package httpapi is what the adapters that send over an HTTP API (SES,
// SendGrid) share: a client that never follows redirects, the trace that
// tells a request fully written from one never sent, the classification of
// a failure without an answer and of a status that is not a success, and
// the closed state.
package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"

	"github.com/mailspool/mailspool/classify"
	"github.com/mailspool/mailspool/transport"
)

// Client is an HTTP client for one transport, and that transport's closed
// state. It is safe for concurrent use.
type Client struct {
	// HTTP never follows redirects: a redirected POST would be a second
	// attempt. It has no timeout of its own; each Send bounds its context.
	HTTP   *http.Client
	closed atomic.Bool
}

// idlePerHost is how many connections a Client keeps open between
// requests: as many as it may have requests at once, within reason (the
// worker's send concurrency, 8 by default). net/http keeps 2 per host
// unless told otherwise, and the AWS SDK 10; an adapter talks to one host
// only, so over HTTP/1.1 with more sends at once than that nearly every
// request paid a new TCP and TLS handshake (269 connections for 320
// requests, 16 at a time, in TestConcurrentRequestsKeepTheirConnections).
// Over HTTP/2, which both transports try first, requests share one
// connection and the limit does not matter. Idle connections still close
// after the transport's IdleConnTimeout.
const idlePerHost = 100

// NewClient returns a Client over tr, which it takes (it raises tr's idle
// connection limits to idlePerHost); nil tr means a clone of
// http.DefaultTransport.
func NewClient(tr *http.Transport) *Client {
	if tr == nil {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	tr.MaxIdleConnsPerHost = max(tr.MaxIdleConnsPerHost, idlePerHost)
	if tr.MaxIdleConns != 0 { // 0 is no limit
		tr.MaxIdleConns = max(tr.MaxIdleConns, idlePerHost)
	}
	return &Client{HTTP: &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}
}

// CheckOpen returns nil until Close, then the error Send returns after
// Close: Connection with [transport.ErrClosed] in its chain.
func (c *Client) CheckOpen() error {
	if c.closed.Load() {
		return &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Rule: "transport-closed", Err: transport.ErrClosed}
	}
	return nil
}

// Close makes CheckOpen fail and closes the idle connections. It is
// idempotent.
func (c *Client) Close() {
	c.closed.Store(true)
	c.HTTP.CloseIdleConnections()
}

// TraceWrite returns ctx with a trace of the request sent under it, and a
// func that reports whether the whole request, body included, was written:
// from then on a missing answer may hide an accepted mail.
func TraceWrite(ctx context.Context) (context.Context, func() bool) {
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			if i.Err == nil {
				wrote.Store(true)
			}
		},
	})
	return ctx, wrote.Load
}

// NoAnswer classifies a request that got no HTTP answer (refused, TLS,
// timeout, reset, cancelled context): Temporary with MaybeDelivered when
// the whole request had been written, else as [classify.Error] maps err.
func NoAnswer(err error, wrote bool) error {
	if wrote {
		return classify.MaybeDelivered(err)
	}
	return classify.Error(err)
}

// StatusError classifies an answer whose status is not a success with the
// generic table of [classify.HTTP] (body may be nil). A redirect, which
// classify does not count as a failure, is Connection: the client never
// follows one and the provider's API does not send one, so the endpoint is
// wrong.
func StatusError(status int, header http.Header, body []byte) *transport.Error {
	var e *transport.Error
	if errors.As(classify.HTTP(status, header, body), &e) {
		return e
	}
	return &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Code: status, Rule: "http-redirect",
		Detail: "unexpected answer " + strconv.Itoa(status) + " " + http.StatusText(status) + " from the endpoint (redirects are not followed)"}
}
