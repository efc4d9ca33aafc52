package inbound

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/suppress"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Permanent bounce, identity-notification format: two bounced recipients
// out of three destinations, the first destination not among them.
const sesPermanentBounce = `{"notificationType":"Bounce","bounce":{"bounceType":"Permanent","bounceSubType":"General",
"bouncedRecipients":[{"emailAddress":"gone@example.com","action":"failed","status":"5.1.1","diagnosticCode":"smtp; 550 5.1.1 user unknown"},
{"emailAddress":"Also.Gone@Example.com","action":"failed","status":"5.1.1","diagnosticCode":"smtp; 550 5.1.1 no such mailbox"}],
"timestamp":"2026-12-06T00:59:00.000Z","feedbackId":"0102-bounce"},
"mail":{"timestamp":"2026-12-06T00:58:00.000Z","messageId":"0102018f-ses-id","source":"shop@example.com",
"destination":["first@example.com","gone@example.com","Also.Gone@Example.com"],"commonHeaders":{"messageId":"<abc123@example.com>"}}}`

// A complaint, event-publishing format.
const sesComplaint = `{"eventType":"Complaint","complaint":{"complainedRecipients":[{"emailAddress":"angry@example.com"}],
"timestamp":"2026-12-06T01:00:00.000Z","feedbackId":"0102-complaint","complaintFeedbackType":"abuse"},
"mail":{"messageId":"0102018f-ses-id2","destination":["angry@example.com"]}}`

const sesTransient = `{"eventType":"Bounce","bounce":{"bounceType":"Transient","bounceSubType":"MailboxFull",
"bouncedRecipients":[{"emailAddress":"full@example.com","status":"4.2.2"}],"timestamp":"2026-12-06T01:00:00.000Z"},
"mail":{"messageId":"0102018f-ses-id3","destination":["full@example.com"]}}`

func notification(message, id string, at time.Time) *snsMessage {
	return &snsMessage{Type: "Notification", MessageID: id, TopicArn: testTopic, Message: message, Timestamp: at.UTC().Format("2006-01-02T15:04:05.000Z")}
}

func TestSESNotificationsAreVerifiedAndRecorded(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		sig := newSigner(t)
		h := testHandler(t, s, sig, nil, nil)
		now := time.Now()

		bounce := notification(sesPermanentBounce, "sns-1", now)
		sig.sign(t, bounce, "1") // SignatureVersion 1: SHA1withRSA
		for range 3 {            // the same notification posted three times
			rec := post(h, "/webhooks/ses", mustJSON(t, bounce), nil)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		}
		complaint := notification(sesComplaint, "sns-2", now)
		complaint.Subject = "Amazon SES Email Event Notification"
		sig.sign(t, complaint, "2") // SignatureVersion 2: SHA256withRSA
		rec := post(h, "/webhooks/ses", mustJSON(t, complaint), nil)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		soft := notification(sesTransient, "sns-3", now)
		sig.sign(t, soft, "2")
		rec = post(h, "/webhooks/ses", mustJSON(t, soft), nil)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())

		events, _ := counts(t, s)
		assert.Equal(t, 4, events, "one event per recipient, the repeated posts deduplicated")
		assert.Equal(t, map[string]suppress.Reason{
			"gone@example.com": suppress.HardBounce, "also.gone@example.com": suppress.HardBounce, "angry@example.com": suppress.Complaint,
		}, suppressedReasons(t, s), "bounced and complained recipients, never destination[0], never a soft bounce")
		assert.EqualValues(t, 1, sig.fetches.Load(), "the certificate is fetched once and cached")

		evs, err := h.store.ForMail(context.Background(), "0102018f-ses-id", "")
		require.NoError(t, err)
		require.Len(t, evs, 2)
		assert.Equal(t, Bounced, evs[0].Type)
		assert.Equal(t, "abc123@example.com", evs[0].MessageID)
		assert.Contains(t, evs[0].Detail, "Permanent General 5.1.1")
		evs, err = h.store.ForMail(context.Background(), "", "<abc123@example.com>")
		require.NoError(t, err)
		assert.Len(t, evs, 2, "linked by our own Message-ID too")
	})
}

// TestSESEachRecipientIsItsOwnEvent: an event's id is the SNS message
// and the recipient, and must stay one per recipient where the column
// cannot hold the address as it is: two long addresses that begin alike
// (cut at the column's size they were one id, and the second bounce was
// dropped as a duplicate) and, on MySQL's ASCII column, two addresses
// that differ only in letters outside ASCII. A repeat of the notification
// is still one event per recipient.
func TestSESEachRecipientIsItsOwnEvent(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		sig := newSigner(t)
		h := testHandler(t, s, sig, nil, nil)
		domain := strings.Repeat("x", 60) + "." + strings.Repeat("y", 60) + "." + strings.Repeat("z", 40)
		addrs := []string{"user@" + domain + ".a.example", "user@" + domain + ".b.example", "jürgen@example.de", "jörgen@example.de"}
		var recipients, destination []string
		for _, a := range addrs {
			require.Less(t, len(a), 254)
			recipients = append(recipients, `{"emailAddress":"`+a+`","status":"5.1.1"}`)
			destination = append(destination, `"`+a+`"`)
		}
		msg := `{"notificationType":"Bounce","bounce":{"bounceType":"Permanent","bounceSubType":"General",
"bouncedRecipients":[` + strings.Join(recipients, ",") + `],"timestamp":"2026-12-06T00:59:00.000Z"},
"mail":{"messageId":"0102018f-long","destination":[` + strings.Join(destination, ",") + `]}}`
		n := notification(msg, "6c1f0a52-3b1e-5d6c-9f1a-2b7e8c0d4e11", time.Now()) // an SNS MessageId is a UUID
		sig.sign(t, n, "2")
		for range 2 {
			rec := post(h, "/webhooks/ses", mustJSON(t, n), nil)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		}
		events, _ := counts(t, s)
		assert.Equal(t, len(addrs), events)
		got := suppressedReasons(t, s)
		for _, a := range addrs {
			assert.Equal(t, suppress.HardBounce, got[a], a)
		}
		assert.Len(t, got, len(addrs))
	})
}

// TestSESNotSpamIsNoComplaint: a complaint of feedback type not-spam (the
// recipient says the mail is not spam) or auth-failure (a report on the
// sender's authentication) records no complaint, which the lane's
// complaint rate would count, and suppresses nothing.
func TestSESNotSpamIsNoComplaint(t *testing.T) {
	s := newSQLite(t)
	sig := newSigner(t)
	h := testHandler(t, s, sig, nil, nil)
	for i, typ := range []string{"not-spam", "auth-failure"} {
		n := notification(strings.Replace(sesComplaint, `"abuse"`, `"`+typ+`"`, 1), fmt.Sprintf("sns-ns-%d", i), time.Now())
		sig.sign(t, n, "2")
		rec := post(h, "/webhooks/ses", mustJSON(t, n), nil)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	}
	events, suppressed := counts(t, s)
	assert.Zero(t, events)
	assert.Zero(t, suppressed)
}

func TestSESBadInputChangesNothing(t *testing.T) {
	s := newSQLite(t)
	sig := newSigner(t)
	h := testHandler(t, s, sig, nil, func(o *Options) { o.MaxBody = 16 << 10 })
	now := time.Now()
	good := notification(sesPermanentBounce, "sns-1", now)
	sig.sign(t, good, "2")

	cases := map[string]struct {
		body  func() []byte
		code  int
		fetch bool // the checks before the signature pass: the certificate may be fetched
	}{
		"a byte altered": {body: func() []byte {
			m := *good
			m.Message = strings.Replace(m.Message, "gone@", "gon3@", 1)
			return mustJSON(t, &m)
		}, code: http.StatusForbidden, fetch: true},
		"a foreign topic, validly signed": {body: func() []byte {
			m := *good
			m.TopicArn = "arn:aws:sns:eu-west-1:666666666666:attacker"
			sig.sign(t, &m, "2")
			return mustJSON(t, &m)
		}, code: http.StatusForbidden},
		"an old timestamp": {body: func() []byte {
			m := *notification(sesPermanentBounce, "sns-1", now.Add(-time.Hour))
			sig.sign(t, &m, "2")
			return mustJSON(t, &m)
		}, code: http.StatusForbidden},
		"a certificate on another host": {body: func() []byte {
			m := *good
			m.SigningCertURL = "https://evil.example" + strings.TrimPrefix(sig.certURL, sig.srv.URL)
			sig.sign(t, &m, "2")
			return mustJSON(t, &m)
		}, code: http.StatusForbidden},
		"a certificate over http": {body: func() []byte {
			m := *good
			m.SigningCertURL = strings.Replace(sig.certURL, "https://", "http://", 1)
			sig.sign(t, &m, "2")
			return mustJSON(t, &m)
		}, code: http.StatusForbidden},
		"an unknown signature version": {body: func() []byte {
			m := *good
			m.SignatureVersion = "3"
			return mustJSON(t, &m)
		}, code: http.StatusForbidden},
		"malformed JSON":    {body: func() []byte { return []byte(`{"Type":"Notification",`) }, code: http.StatusBadRequest},
		"a body over bound": {body: func() []byte { return bytes.Repeat([]byte(" "), 17<<10) }, code: http.StatusRequestEntityTooLarge},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			before := sig.fetches.Load()
			rec := post(h, "/webhooks/ses", c.body(), nil)
			assert.Equal(t, c.code, rec.Code, rec.Body.String())
			events, suppressed := counts(t, s)
			assert.Zero(t, events)
			assert.Zero(t, suppressed)
			if !c.fetch {
				assert.Equal(t, before, sig.fetches.Load(), "no outbound fetch for a rejected message")
			}
		})
	}
	req, _ := http.NewRequest(http.MethodGet, "/webhooks/ses", nil)
	rec := httptestRecorder(h, req)
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}

func TestSESSubscriptionConfirmedOnlyForAllowedTopics(t *testing.T) {
	s := newSQLite(t)
	sig := newSigner(t)
	h := testHandler(t, s, sig, nil, nil)
	sub := &snsMessage{Type: "SubscriptionConfirmation", MessageID: "sub-1", Token: "tok", TopicArn: testTopic,
		Message: "You have chosen to subscribe", SubscribeURL: sig.srv.URL + "/confirm?Token=tok",
		Timestamp: time.Now().UTC().Format(time.RFC3339)}
	foreign := *sub
	foreign.TopicArn = "arn:aws:sns:eu-west-1:666666666666:attacker"
	sig.sign(t, &foreign, "1")
	rec := post(h, "/webhooks/ses", mustJSON(t, &foreign), nil)
	assert.Equal(t, http.StatusForbidden, rec.Code)
	assert.Zero(t, sig.confirm.Load())
	assert.Zero(t, sig.fetches.Load())

	elsewhere := *sub
	elsewhere.SubscribeURL = "https://attacker.example/confirm"
	sig.sign(t, &elsewhere, "1")
	rec = post(h, "/webhooks/ses", mustJSON(t, &elsewhere), nil)
	assert.Equal(t, http.StatusForbidden, rec.Code)
	assert.Zero(t, sig.confirm.Load())

	sig.sign(t, sub, "1")
	rec = post(h, "/webhooks/ses", mustJSON(t, sub), nil)
	assert.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.EqualValues(t, 1, sig.confirm.Load())
}

// TestSNSHostIsStrict checks the production pattern, which the other tests
// replace to reach their httptest server.
func TestSNSHostIsStrict(t *testing.T) {
	v := newSNSVerifier([]string{testTopic}, time.Minute)
	for _, ok := range []string{
		"https://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem",
		"https://sns.eu-central-2.amazonaws.com/SimpleNotificationService-abc.pem",
		"https://sns.us-gov-west-1.amazonaws.com/x.pem",
		"https://sns.cn-north-1.amazonaws.com.cn/x.pem",
	} {
		_, err := v.checkURL("SigningCertURL", ok)
		assert.NoError(t, err, ok)
	}
	for _, bad := range []string{
		"http://sns.us-east-1.amazonaws.com/x.pem",
		"https://s3.amazonaws.com/attacker/x.pem",
		"https://attacker.s3.amazonaws.com/x.pem",
		"https://sns.us-east-1.amazonaws.com.attacker.example/x.pem",
		"https://sns.us-east-1.amazonaws.com:8443/x.pem",
		"https://user@sns.us-east-1.amazonaws.com/x.pem",
		"https://sns.amazonaws.com/x.pem",
		"https://evilsns.us-east-1.amazonaws.com/x.pem",
		"https://sns.us-east-1.amazonaws.com%2F@attacker.example/x.pem",
	} {
		_, err := v.checkURL("SigningCertURL", bad)
		assert.Error(t, err, bad)
	}
	assert.Equal(t, snsHost, v.host)
}
