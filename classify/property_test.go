package classify

import (
	"math/rand"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/quick"

	"github.com/mailspool/mailspool/transport"
)

// neutralWords say nothing about the recipient or the message: they are
// about our sender, the policy, the moment, the lane, or nothing at all.
// None of the table's recipient or message phrases can be built from them
// (no "user", "mailbox", "recipient", "address", "message", "content",
// "spam", "quota", "exist", "to", "too", ...).
var neutralWords = strings.Fields(`access denied rejected refused policy policies sender senders
service unavailable blocked local error requested action not taken transaction failed
administrative prohibition your our ip domain reputation spf dkim dmarc try again later please
contact postmaster see https://help.example/e123 [192.0.2.1] 198.51.100.7 <ops@shop.example>
relay authentication required tls starttls helo rate limit suspended smtp server connection
protocol syntax command internal reason permanently temporarily for the by of a in is has been
rejecting blocklisted listed rbl spamhaus envelope from domain-based ip-based ; : - ( ) # , .
5.7.1 LPN007_102 IB508 OFR004_405 G31 BL000000 [TSS04] closing channel unexpected failure`)

// neutralEnhanced are enhanced codes whose subject and detail are about
// no recipient and no message: other, routing failures that are not about
// the recipient's domain, protocol, policy (x.7.13 and Exchange's
// x.7.133-136 aside), and the sender's x.1.7 and x.1.8.
var neutralEnhanced = []string{"", "", "5.0.0", "5.1.0", "5.1.7", "5.1.8", "5.2.0", "5.3.0", "5.3.2", "5.4.0",
	"5.4.1", "5.4.7", "5.5.0", "5.5.1", "5.5.2", "5.7.0", "5.7.1", "5.7.8", "5.7.9", "5.7.23", "5.7.26", "5.7.27",
	"5.7.57", "5.7.606", "4.7.0", "4.4.2", "4.3.0"}

// unprovenReply is a 4xx or 5xx reply built from neutral words and a
// neutral enhanced code, as one of a session.
type unprovenReply struct {
	Code     int
	Enhanced string
	Text     string
	Session  Session
}

// Generate implements quick.Generator.
func (unprovenReply) Generate(r *rand.Rand, size int) reflect.Value {
	words := make([]string, 1+r.Intn(max(1, min(size, 14))))
	for i := range words {
		words[i] = neutralWords[r.Intn(len(neutralWords))]
	}
	u := unprovenReply{
		Code:     400 + r.Intn(200),
		Enhanced: neutralEnhanced[r.Intn(len(neutralEnhanced))],
		Text:     strings.Join(words, " "),
		Session:  Session{Relay: r.Intn(2) == 0, Command: []string{"", "MAIL", "RCPT", "DATA", "AUTH"}[r.Intn(5)]},
	}
	return reflect.ValueOf(u)
}

func (u unprovenReply) reply() string {
	return strings.Join(strings.Fields(strconv.Itoa(u.Code)+" "+u.Enhanced+" "+u.Text), " ")
}

// TestNoEvidenceIsNeverPermanent is the scope principle as a property: a
// reply whose enhanced code and text carry no evidence about the
// recipient or the message is never Permanent, whatever its basic code,
// its words about our sender or the lane, and the session it came from;
// and a Permanent verdict always has recipient or message scope.
func TestNoEvidenceIsNeverPermanent(t *testing.T) {
	t.Parallel()
	property := func(u unprovenReply) bool {
		te := asError(u.Session.SMTPReply(u.reply()))
		if te == nil {
			t.Logf("no error for %q", u.reply())
			return false
		}
		if te.Kind == transport.Permanent {
			t.Logf("%q (%+v) is permanent by %s", u.reply(), u.Session, te.Rule)
			return false
		}
		// The same reply inside a Go error, as a library wraps it.
		we := asError(u.Session.Error(errorText("smtp: rcpt: " + u.reply())))
		if we != nil && we.Kind == transport.Permanent {
			t.Logf("wrapped %q is permanent by %s", u.reply(), we.Rule)
			return false
		}
		return true
	}
	if err := quick.Check(property, &quick.Config{MaxCount: 1500}); err != nil {
		t.Fatal(err)
	}
}

// errorText is an error with the given text.
type errorText string

func (e errorText) Error() string { return string(e) }
