package classify

import (
	"regexp"
	"strings"

	"github.com/mailspool/mailspool/transport"
)

// smtpKind decides the kind of a 4xx or 5xx reply from its basic code, its
// enhanced code and its lower-cased text, by the rules in the package
// documentation, in that order.
func smtpKind(code int, enh enhanced, low string) transport.Kind {
	class := code / 100
	if enh.class == 4 || enh.class == 5 {
		class = enh.class
	}
	switch {
	case ourAccount(enh, low):
		return transport.Connection
	case class == 4:
		return transport.Temporary
	case authOrTLS(code, enh, low), relayDenied.MatchString(low), strings.Contains(low, "not verified"):
		return transport.Connection
	case transient.MatchString(low), overQuota(enh, low):
		return transport.Temporary
	default:
		return transport.Permanent
	}
}

// accountPhrases name our own account's sending limits or state, never the
// recipient's mailbox: SES "Daily message quota exceeded" and "Sending
// suspended for this account", Gmail "Daily user sending quota exceeded",
// Exchange Online "tenant has exceeded threshold" and "bad outbound sender",
// IAM "is not authorized to perform `ses:SendRawEmail'".
var accountPhrases = []string{
	"sending quota", "message quota", "daily quota", "sending limit", "limit for sending", "daily limit",
	"sending suspended", "sending paused", "sending disabled", "sending has been",
	"tenant has exceeded", "bad outbound sender", "not authorized to perform",
}

// accountState matches "your account has been suspended" and the like. It is
// only trusted when the enhanced code does not point at the recipient
// (x.1.x addressing, x.2.x mailbox): Gmail's "5.2.1 The email account that
// you tried to reach is disabled" is about the recipient.
var accountState = regexp.MustCompile(`\baccount\b[^.;]{0,40}\b(suspended|disabled|blocked|paused|deactivated)\b`)

// ourAccount reports whether the reply says our account or tenant is over
// its limits, blocked or suspended.
func ourAccount(enh enhanced, low string) bool {
	for _, p := range accountPhrases {
		if strings.Contains(low, p) {
			return true
		}
	}
	// Exchange Online: 5.7.705 tenant over threshold, 5.7.708 traffic not
	// accepted from this IP, 5.7.750 unregistered sending domains.
	if enh.is(7, 705) || enh.is(7, 708) || enh.is(7, 750) {
		return true
	}
	return enh.subject != 1 && enh.subject != 2 && accountState.MatchString(low)
}

// authOrTLS reports whether a 5xx reply asks for authentication or
// encryption, or rejects our credentials (RFC 4954, RFC 5248 x.7.8-x.7.14).
func authOrTLS(code int, enh enhanced, low string) bool {
	switch code {
	case 530, 534, 535, 538:
		return true
	}
	if enh.is(7, 8) {
		return true
	}
	// x.7.9-x.7.14 (mechanism too weak, encryption needed, password
	// transition, account disabled, trust required), except where Yahoo
	// sends "554 5.7.9 Message not accepted for policy reasons".
	if enh.subject == 7 && enh.detail >= 9 && enh.detail <= 14 && !strings.Contains(low, "policy") {
		return true
	}
	if enh.is(7, 0) && strings.Contains(low, "authenticat") {
		return true
	}
	return strings.Contains(low, "starttls") || strings.Contains(low, "encryption required") || strings.Contains(low, "tls required")
}

// relayDenied matches a refusal to relay: we are not authenticated, or the
// account may not send for that domain (Postfix "Relay access denied",
// Exchange "Unable to relay recipient in non-accepted domain").
var relayDenied = regexp.MustCompile(`\brelay(ing)?( access)? (denied|not (permitted|allowed)|disallowed|prohibited)|unable to relay|not permitted to relay|do not relay`)

// transient matches 5xx texts that describe rate or frequency limits or
// say the condition is temporary.
var transient = regexp.MustCompile(`too many|throttl|try (again )?later|temporar|rate[ -]?limit|\brate\b.{0,20}\bexceeded|\bfrequency\b|(try again|retry) (in|after) \d`)

// overQuota reports a 5xx about the recipient's storage quota, which the
// recipient can clear ("552 5.2.2 ... Quota exceeded"), with no enhanced
// code or an x.2.x one. Other x.2.x replies, such as "552 5.2.2 Mailbox
// full", stay Permanent.
func overQuota(enh enhanced, low string) bool {
	if enh.code != "" && enh.subject != 2 {
		return false
	}
	return strings.Contains(low, "quota") || strings.Contains(low, "exceeded storage")
}
