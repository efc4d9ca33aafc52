package inbound

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/mailspool/mailspool/suppress"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sendGridBatch = `[
{"email":"gone@example.com","timestamp":1765000000,"event":"bounce","type":"bounce","sg_event_id":"ev-1","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0","reason":"550 5.1.1 The email account does not exist","status":"5.1.1","smtp-id":"<abc@example.com>"},
{"email":"blocked@example.com","timestamp":1765000001,"event":"bounce","type":"blocked","sg_event_id":"ev-2","sg_message_id":"x2.filter","reason":"554 5.7.1 our IP is listed","status":"5.7.1"},
{"email":"later@example.com","timestamp":1765000002,"event":"deferred","sg_event_id":"ev-3","sg_message_id":"x3.filter","response":"450 4.2.1 busy"},
{"email":"spam@example.com","timestamp":1765000003,"event":"spamreport","sg_event_id":"ev-4","sg_message_id":"x4.filter"},
{"email":"ok@example.com","timestamp":1765000004,"event":"delivered","sg_event_id":"ev-5","sg_message_id":"x5.filter","response":"250 OK"},
{"email":"dropped@example.com","timestamp":1765000005,"event":"dropped","sg_event_id":"ev-6","sg_message_id":"x6.filter","reason":"Bounced Address"},
{"email":"bye@example.com","timestamp":1765000006,"event":"unsubscribe","sg_event_id":"ev-7","sg_message_id":"x7.filter"},
{"email":"ok@example.com","timestamp":1765000007,"event":"open","sg_event_id":"ev-8","sg_message_id":"x5.filter"}
]`

func TestSendGridEventsAreVerifiedAndRecorded(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		k, shown := sendGridKey(t)
		key, err := ParseSendGridKey(shown)
		require.NoError(t, err)
		h := testHandler(t, s, nil, key, func(o *Options) { o.UnsubscribeScope = "marketing" })
		body := []byte(sendGridBatch)
		for range 3 {
			rec := post(h, "/webhooks/sendgrid", body, signSendGrid(t, k, body, time.Now()))
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		}
		events, _ := counts(t, s)
		assert.Equal(t, 7, events, "every event but the open, once")
		assert.Equal(t, map[string]suppress.Reason{
			"gone@example.com": suppress.HardBounce, "spam@example.com": suppress.Complaint, "bye@example.com": suppress.Unsubscribe,
		}, suppressedReasons(t, s), "a bounce of type blocked, a deferral and a drop never suppress")
		evs, err := h.store.ForMail(t.Context(), "14c5d75ce93", "")
		require.NoError(t, err)
		require.Len(t, evs, 1, "linked by the X-Message-Id the send was answered with")
		assert.Equal(t, Bounced, evs[0].Type)
		assert.Equal(t, "abc@example.com", evs[0].MessageID)
	})
}

// TestSendGridEventsNotKeptRefuseNothing: an event of a type mailspool
// learns nothing from is passed over whatever it lacks: the account's
// events name no recipient, and refusing the post for them would lose the
// bounce beside them once SendGrid stops sending it again.
func TestSendGridEventsNotKeptRefuseNothing(t *testing.T) {
	s := newSQLite(t)
	k, shown := sendGridKey(t)
	key, err := ParseSendGridKey(shown)
	require.NoError(t, err)
	h := testHandler(t, s, nil, key, nil)
	body := []byte(`[
{"event":"account_status_change","sg_event_id":"acct-1","timestamp":1765000010,"type":"compliance_suspend"},
{"event":"processed","email":"ok@example.com","timestamp":"soon"},
{"email":"gone@example.com","timestamp":1765000000,"event":"bounce","type":"bounce","sg_event_id":"ev-1","sg_message_id":"x1.filter","status":"5.1.1"}
]`)
	rec := post(h, "/webhooks/sendgrid", body, signSendGrid(t, k, body, time.Now()))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	events, _ := counts(t, s)
	assert.Equal(t, 1, events)
	assert.Equal(t, map[string]suppress.Reason{"gone@example.com": suppress.HardBounce}, suppressedReasons(t, s))
}

func TestSendGridBadInputChangesNothing(t *testing.T) {
	s := newSQLite(t)
	k, shown := sendGridKey(t)
	key, err := ParseSendGridKey(shown)
	require.NoError(t, err)
	h := testHandler(t, s, nil, key, func(o *Options) { o.MaxBody = 8 << 10 })
	body := []byte(sendGridBatch)
	altered := append([]byte(nil), body...)
	altered[len(altered)-3] = '9'
	other, _ := sendGridKey(t)
	big := make([]byte, 9<<10)
	for name, c := range map[string]struct {
		body   []byte
		header http.Header
		code   int
	}{
		"a byte altered":   {altered, signSendGrid(t, k, body, time.Now()), http.StatusForbidden},
		"an old timestamp": {body, signSendGrid(t, k, body, time.Now().Add(-time.Hour)), http.StatusForbidden},
		"another key":      {body, signSendGrid(t, other, body, time.Now()), http.StatusForbidden},
		"no signature":     {body, nil, http.StatusForbidden},
		"malformed JSON":   {[]byte(`[{"email":`), signSendGrid(t, k, []byte(`[{"email":`), time.Now()), http.StatusBadRequest},
		"an event without id": {[]byte(`[{"email":"a@example.com","event":"bounce","timestamp":1}]`),
			signSendGrid(t, k, []byte(`[{"email":"a@example.com","event":"bounce","timestamp":1}]`), time.Now()), http.StatusBadRequest},
		"a body over bound": {big, signSendGrid(t, k, big, time.Now()), http.StatusRequestEntityTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			rec := post(h, "/webhooks/sendgrid", c.body, c.header)
			assert.Equal(t, c.code, rec.Code, rec.Body.String())
			events, suppressed := counts(t, s)
			assert.Zero(t, events)
			assert.Zero(t, suppressed)
		})
	}
}

func TestParseSendGridKey(t *testing.T) {
	_, shown := sendGridKey(t)
	_, err := ParseSendGridKey(shown)
	require.NoError(t, err)
	_, err = ParseSendGridKey("-----BEGIN PUBLIC KEY-----\n" + shown + "\n-----END PUBLIC KEY-----\n")
	require.NoError(t, err)

	rk, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(&rk.PublicKey)
	require.NoError(t, err)
	for _, bad := range []string{"", "not base64 !", base64.StdEncoding.EncodeToString([]byte("junk")), base64.StdEncoding.EncodeToString(der)} {
		_, err := ParseSendGridKey(bad)
		assert.Error(t, err, bad)
	}
}
