package classify

import (
	"regexp"
	"strings"

	"github.com/mailspool/mailspool/transport"
)

// replyFacts is an SMTP reply as the decision table reads it.
type replyFacts struct {
	code int      // basic code, 400-599
	enh  enhanced // enhanced code, zero when absent
	low  string   // the text, lower case, on one line
}

// scope is what a rule says a reply is about.
type scope uint8

const (
	either    scope = iota // the reply's own words tell (aboutRecipient)
	lane                   // our account, credentials, sender or setup
	recipient              // the recipient's account or mailbox
)

// smtpRule is one row of the SMTP decision table (see the package
// documentation).
type smtpRule struct {
	name  string
	kind  transport.Kind
	scope scope
	match func(r *replyFacts) bool
}

// recipient reports whether the reply r, decided by rule, concerns one
// recipient.
func (rule *smtpRule) recipient(r *replyFacts) bool {
	switch rule.scope {
	case lane:
		return false
	case recipient:
		return true
	}
	return aboutRecipient(r)
}

// smtpRules is the SMTP decision table, in order: the first rule that
// matches decides.
var smtpRules = []smtpRule{
	{"smtp-our-account", transport.Connection, lane, ourAccount},
	{"smtp-4xx", transport.Temporary, either, func(r *replyFacts) bool { return r.code < 500 }},
	{"smtp-auth", transport.Connection, lane, authFailure},
	{"smtp-encryption", transport.Connection, lane, encryptionRequired},
	{"smtp-sender", transport.Connection, lane, senderRejected},
	{"smtp-helo", transport.Connection, lane, func(r *replyFacts) bool { return heloText.MatchString(r.low) }},
	{"smtp-relay", transport.Connection, lane, func(r *replyFacts) bool { return relayDenied.MatchString(r.low) }},
	{"smtp-recipient-disabled", transport.Permanent, recipient, recipientDisabled},
	{"smtp-quota-temporary", transport.Temporary, recipient, func(r *replyFacts) bool { return mailboxFull(r) && temporaryQuota.MatchString(r.low) }},
	{"smtp-mailbox-full", transport.Permanent, recipient, mailboxFull},
	{"smtp-routing", transport.Permanent, either, func(r *replyFacts) bool { return r.enh.subject == 4 && r.enh.code != "" }},
	{"smtp-passing", transport.Temporary, either, passing},
	{"smtp-recipient", transport.Permanent, recipient, aboutRecipient},
	{"smtp-5xx", transport.Permanent, either, func(*replyFacts) bool { return true }},
}

// ambiguous decides a 5xx that a lane rule matches but that names the
// recipient ("<bob@example.org>: Recipient address rejected: Authentication
// required"): it may be either, and neither reading may win outright — a
// lane-level reading must not pause the lane for one recipient, a
// recipient reading must not destroy a good mail. Temporary, about the
// recipient.
var ambiguous = smtpRule{"smtp-ambiguous", transport.Temporary, recipient, nil}

// namesRecipient matches the words by which a reply rejects one recipient.
var namesRecipient = regexp.MustCompile(`recipient address rejected|user unknown|unknown user|no such user|mailbox (unavailable|not found|full)`)

// decide returns the first rule of smtpRules that matches r.
func decide(r *replyFacts) *smtpRule {
	for i := range smtpRules {
		rule := &smtpRules[i]
		if !rule.match(r) {
			continue
		}
		if rule.scope == lane && r.code >= 500 && namesRecipient.MatchString(r.low) {
			return &ambiguous
		}
		return rule
	}
	panic("classify: the smtp-5xx rule matches every reply")
}

// accountPhrases name our own account's sending limits or state, never the
// recipient's mailbox: SES "Daily message quota exceeded" and "Sending
// suspended for this account", Gmail "Daily user sending quota exceeded",
// Exchange Online "tenant has exceeded threshold" and "bad outbound sender",
// IAM "is not authorized to perform `ses:SendRawEmail'", SendGrid "Maximum
// credits exceeded", Aliyun DirectMail "Main account unavailable".
var accountPhrases = []string{
	"sending quota", "message quota", "daily quota", "sending limit", "limit for sending", "daily limit",
	"sending suspended", "sending paused", "sending disabled", "sending has been",
	"tenant has exceeded", "bad outbound sender", "not authorized to perform",
	"maximum credits exceeded", "main account unavailable", "spam abuse detected",
}

// accountState matches "your account has been suspended" and the like:
// only an account the reply calls ours (yours, the sender's, the sending
// one), never "the account that you tried to reach".
var accountState = regexp.MustCompile(`\b(your|sender'?s?|sending)\b[^.;]{0,20}\baccount\b[^.;]{0,40}\b(suspended|disabled|blocked|paused|deactivated|locked)\b`)

// ourAccount reports whether the reply says our account, tenant or sending
// IP is over its limits, blocked or suspended.
func ourAccount(r *replyFacts) bool {
	for _, p := range accountPhrases {
		if strings.Contains(r.low, p) {
			return true
		}
	}
	// Exchange Online: 5.7.501 spam abuse detected (outbound), 5.7.511
	// banned sender, 5.7.705 tenant over threshold, 5.7.708 traffic not
	// accepted from this IP, 5.7.750 unregistered sending domains.
	for _, d := range []int{501, 511, 705, 708, 750} {
		if r.enh.is(7, d) {
			return true
		}
	}
	return accountState.MatchString(r.low)
}

// authText matches replies that ask for authentication or reject our
// credentials, or say SMTP is not enabled for our account (NetEase's "550
// User has no permission"). It avoids the receiver's SPF/DKIM/DMARC wording ("the sender
// is unauthenticated", "fails to pass authentication checks").
var authText = regexp.MustCompile(`authentication (is )?required|must authenticate|not authenticated|authentication (failed|failure|unsuccessful|credentials invalid)|fail(ed)? authentication|invalid login|login fail|unauthenticated (senders|mail) not allowed|smtp authentication|authori[sz]ation required|\bauth error\b|smtpclientauthentication|user has no permission`)

// authFailure reports whether a 5xx reply asks for authentication or
// rejects our credentials (RFC 4954 codes 530, 534, 535, 538; RFC 5248
// x.7.8, x.7.9, x.7.12, x.7.14; x.7.13 when given to AUTH; Exchange Online
// x.7.57 and x.7.139).
func authFailure(r *replyFacts) bool {
	switch r.code {
	case 525, 526, 530, 534, 535, 538:
		return true
	}
	e := r.enh
	switch {
	case e.is(7, 8), e.is(7, 12), e.is(7, 14), e.is(7, 57), e.is(7, 139):
		return true
	case e.is(7, 9):
		// Yahoo answers "554 5.7.9 Message not accepted for policy reasons".
		return !strings.Contains(r.low, "policy")
	case e.is(7, 13):
		// The registry's "user account disabled" (after AUTH, code 525);
		// receiving servers use it for a disabled recipient, which
		// recipientDisabled takes.
		return strings.Contains(r.low, "authenticat")
	case e.is(7, 0) && strings.Contains(r.low, "authenticat"):
		return true
	}
	return authText.MatchString(r.low)
}

// encryptionRequired reports a 5xx that demands TLS (x.7.10, x.7.11,
// "Must issue a STARTTLS command first").
func encryptionRequired(r *replyFacts) bool {
	if r.enh.is(7, 10) || r.enh.is(7, 11) {
		return true
	}
	return strings.Contains(r.low, "starttls") || strings.Contains(r.low, "encryption required") || strings.Contains(r.low, "tls required")
}

// senderText matches replies that reject our sender identity: not
// verified at the provider, not owned by or not matching the logged-in
// user, not allowed to send as that address, or a sending domain not set
// up.
var senderText = regexp.MustCompile(`not verified|sender identity|sender address rejected|not owned by|sender login mismatch|not logged in|mail ?from (address )?must (equal|be same as)|same as authori[sz]ation user|conform with authentication|local user only|permissions? to send as|not allowed to send|not authori[sz]ed to send from|isn't allowed to send|unregistered domain|host denies the sender|sender is unvalidated|sender is rejected`)

// senderRejected reports a 5xx about our sender address or identity,
// including x.1.7 (bad sender's address syntax), x.1.8 (bad sender's system
// address) and Exchange Online's x.7.60 (send-as denied).
func senderRejected(r *replyFacts) bool {
	if r.enh.is(1, 7) || r.enh.is(1, 8) || r.enh.is(7, 60) {
		return true
	}
	return senderText.MatchString(r.low) && !strings.Contains(r.low, "recipient address rejected")
}

// heloText matches a rejected HELO/EHLO greeting: ours is empty, not a
// fully-qualified name, or not resolvable.
var heloText = regexp.MustCompile(`\b(helo|ehlo)\b|helohost`)

// relayDenied matches a refusal to relay: we are not authenticated, or the
// account may not send for that domain (Postfix "Relay access denied",
// Exchange "Unable to relay recipient in non-accepted domain").
var relayDenied = regexp.MustCompile(`\brelay(ing)?( access)? (denied|not (permitted|allowed)|disallowed|prohibited)|unable to relay|not permitted to relay|do not relay|denies relay|relay check`)

// recipientState matches a recipient account or mailbox that is disabled,
// discontinued, suspended or locked.
var recipientState = regexp.MustCompile(`\b(account|mailbox|user|recipient|addressee)\b[^.;]{0,60}\b(disabled|discontinued|suspended|deactivated|inactive|locked|frozen)\b|accountdisabled|userdisabled`)

// recipientDisabled reports a 5xx saying the recipient's account or
// mailbox is disabled or suspended (x.2.1, x.7.13 from a receiving server,
// or the words).
func recipientDisabled(r *replyFacts) bool {
	return r.enh.is(2, 1) || r.enh.is(7, 13) || recipientState.MatchString(r.low)
}

// quotaText matches a full mailbox or an exceeded storage quota.
var quotaText = regexp.MustCompile(`quota|mailbox (is )?full|storage allocation|exceeded storage|insufficient storage|overquota`)

// mailboxFull reports a 5xx about the recipient's mailbox being full: x.2.2
// or the words, with no enhanced code or an x.2.x one.
func mailboxFull(r *replyFacts) bool {
	if r.enh.is(2, 2) {
		return true
	}
	return (r.enh.code == "" || r.enh.subject == 2) && quotaText.MatchString(r.low)
}

// temporaryQuota matches a quota text that says it will pass (Gmail's
// "OverQuotaTemp", "temporarily over quota", "try again later").
var temporaryQuota = regexp.MustCompile(`temp|try again|later`)

// transient matches 5xx texts that describe rate or frequency limits or
// say the condition is temporary.
var transient = regexp.MustCompile(`too many|throttl|try (again )?later|temporar|rate[ -]?limit|\brate\b.{0,20}\bexceeded|\bfrequency\b|(try again|retry) (in|after) \d`)

// passing reports a 5xx about a rate or a condition that passes. A mail
// loop ("too many hops") does not pass.
func passing(r *replyFacts) bool {
	return transient.MatchString(r.low) && !strings.Contains(r.low, "hops") && !strings.Contains(r.low, "loop")
}

// recipientText matches replies that name the recipient: its address, its
// mailbox, its user.
var recipientText = regexp.MustCompile(`recipient|mailbox|addressee|\buser\b|account that you tried|no such (user|address)|(does|dos) ?n[o']t (exist|have)|not exist|\brcpt\b|unknown (user|address)|invalid (user|address)|address rejected`)

// aboutRecipient reports whether a reply concerns the recipient: an x.1.x
// code other than the sender's x.1.7 and x.1.8, an x.2.x (mailbox) code,
// x.7.13 from a receiving server, or a text naming the recipient, its
// mailbox or its user.
func aboutRecipient(r *replyFacts) bool {
	e := r.enh
	if e.code != "" && ((e.subject == 1 && e.detail != 7 && e.detail != 8) || e.subject == 2 || e.is(7, 13)) {
		return true
	}
	return recipientText.MatchString(r.low)
}
