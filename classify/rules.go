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
	at   string   // the command the reply answered ("MAIL", "RCPT", ...), "" when unknown
	// relay: the lane submits through a relay (AUTH, a submission port, an
	// ESP's SMTP endpoint), not to the recipient's own mail server.
	relay bool
}

// byEvidence stands for "the reply's own words and codes tell" in the
// scope of a rule (see evidence).
const byEvidence = transport.Scope(255)

// smtpRule is one row of the SMTP decision table (see the package
// documentation).
type smtpRule struct {
	name  string
	kind  transport.Kind
	scope transport.Scope // byEvidence: decided by evidence
	match func(r *replyFacts) bool
}

// scopeOf returns the scope of the reply r, decided by rule.
func (rule *smtpRule) scopeOf(r *replyFacts) transport.Scope {
	if rule.scope != byEvidence {
		return rule.scope
	}
	return evidence(r, r.code >= 500)
}

// smtpRules is the SMTP decision table, in order: the first rule that
// matches decides. A 5xx is Permanent only by a rule of recipient or
// message scope, which needs evidence about the recipient or the message.
var smtpRules = []smtpRule{
	{"smtp-our-account", transport.Connection, transport.ScopeSender, ourAccount},
	{"smtp-4xx", transport.Temporary, byEvidence, func(r *replyFacts) bool { return r.code < 500 }},
	{"smtp-at-auth", transport.Connection, transport.ScopeLane, func(r *replyFacts) bool { return r.at == "AUTH" }},
	{"smtp-recipient-policy", transport.Permanent, transport.ScopeRecipient, recipientPolicy},
	{"smtp-auth", transport.Connection, transport.ScopeLane, authFailure},
	{"smtp-encryption", transport.Connection, transport.ScopeLane, encryptionRequired},
	{"smtp-sender", transport.Connection, transport.ScopeSender, senderRejected},
	{"smtp-helo", transport.Connection, transport.ScopeLane, func(r *replyFacts) bool { return heloText.MatchString(r.low) }},
	{"smtp-relay", transport.Connection, transport.ScopeLane, func(r *replyFacts) bool { return relayDenied.MatchString(r.low) }},
	{"smtp-mail-from", transport.Temporary, transport.ScopeSender, func(r *replyFacts) bool { return r.at == "MAIL" && evidence(r, true) != transport.ScopeMessage }},
	{"smtp-recipient-disabled", transport.Permanent, transport.ScopeRecipient, recipientDisabled},
	{"smtp-quota-temporary", transport.Temporary, transport.ScopeRecipient, func(r *replyFacts) bool { return mailboxFull(r) && temporaryQuota.MatchString(r.low) }},
	{"smtp-mailbox-full", transport.Permanent, transport.ScopeRecipient, mailboxFull},
	{"smtp-sender-policy", transport.Temporary, transport.ScopeSender, func(r *replyFacts) bool { return evidence(r, true) == transport.ScopeSender }},
	{"smtp-passing", transport.Temporary, transport.ScopeTransient, passing},
	{"smtp-routing", transport.Permanent, transport.ScopeRecipient, func(r *replyFacts) bool { return r.enh.subject == 4 && evidence(r, true) == transport.ScopeRecipient }},
	{"smtp-recipient", transport.Permanent, transport.ScopeRecipient, func(r *replyFacts) bool { return evidence(r, true) == transport.ScopeRecipient }},
	{"smtp-message", transport.Permanent, transport.ScopeMessage, func(r *replyFacts) bool { return evidence(r, true) == transport.ScopeMessage }},
	{"smtp-5xx", transport.Temporary, transport.ScopeTransient, func(*replyFacts) bool { return true }},
}

// ambiguous decides a 5xx that a lane rule matches but that names the
// recipient ("<bob@example.org>: Recipient address rejected: Authentication
// required"): it may be either, and neither reading may win outright — a
// lane-level reading must not pause the lane for one recipient, a
// recipient reading must not destroy a good mail. Temporary, about the
// recipient.
var ambiguous = smtpRule{"smtp-ambiguous", transport.Temporary, transport.ScopeRecipient, nil}

// namesRecipient matches the words by which a reply rejects one recipient.
var namesRecipient = regexp.MustCompile(`recipient address rejected|user unknown|unknown user|no such user|mailbox (unavailable|not found|full)`)

// namesOnlySender reports a reply that rejects our sender address and no
// recipient: Postfix's "<shop@example.com>: Sender address rejected: User
// unknown in local recipient table" (reject_unlisted_sender) names a user,
// but the user is our sender.
func namesOnlySender(r *replyFacts) bool {
	return strings.Contains(r.low, "sender address rejected") && !strings.Contains(r.low, "recipient address rejected")
}

// decide returns the first rule of smtpRules that matches r.
func decide(r *replyFacts) *smtpRule {
	for i := range smtpRules {
		rule := &smtpRules[i]
		if !rule.match(r) {
			continue
		}
		if rule.kind == transport.Connection && r.code >= 500 && r.at != "MAIL" && namesRecipient.MatchString(r.low) && !namesOnlySender(r) {
			return &ambiguous
		}
		return rule
	}
	panic("classify: the smtp-5xx rule matches every reply")
}

// evidence returns what a reply's codes and words show it is about:
// ScopeRecipient, ScopeMessage or ScopeSender, and ScopeTransient when they
// show none of these. The order matters: the enhanced code first, then
// words about our sending IP and domain authentication (a block list's
// name has "spam" in it), then the recipient's, then the message's. At
// MAIL FROM nothing can be about the recipient: there is none yet.
// final is false for a 4xx, where only the codes and the recipient's and
// message's words count (a greylisting "client host" is not a reputation).
func evidence(r *replyFacts, final bool) transport.Scope {
	e := r.enh
	mail := r.at == "MAIL"
	switch {
	case e.code == "":
	case e.is(3, 4), e.subject == 6, e.is(2, 3):
		return transport.ScopeMessage
	case e.is(1, 7), e.is(1, 8), e.subject == 7 && e.detail >= 23 && e.detail <= 27:
		return transport.ScopeSender
	case mail, e.is(1, 0), e.is(2, 0):
		// x.1.0 and x.2.0 say "some address" and "some mailbox": the
		// words tell which.
	case e.subject == 1, e.subject == 2, e.is(7, 13), e.is(4, 4):
		return transport.ScopeRecipient
	}
	switch {
	case mail && aboutMessage(r):
		return transport.ScopeMessage
	case mail && final:
		return transport.ScopeSender
	case mail:
		return transport.ScopeTransient
	case greylisted.MatchString(r.low), !final && rateText.MatchString(r.low):
		// Greylisting names the recipient or the client, a 4xx rate names
		// our IP ("too many connections from this IP"): both are about now.
		return transport.ScopeTransient
	case senderPolicyText.MatchString(r.low):
		return transport.ScopeSender
	case recipientText.MatchString(r.low) || (r.enh.subject == 4 && loopText.MatchString(r.low)):
		return transport.ScopeRecipient
	case aboutMessage(r):
		return transport.ScopeMessage
	case final && (policyText.MatchString(r.low) || (r.relay && relaySenderText.MatchString(r.low))):
		return transport.ScopeSender
	}
	return transport.ScopeTransient
}

// senderPolicyText matches a reply about our sending IP's reputation or
// our domain's authentication (SPF, DKIM, DMARC, reverse DNS): a block
// list, "your IP", "client host ... blocked".
var senderPolicyText = regexp.MustCompile(`\bspf\b|\bdkim\b|\bdmarc\b|sender is unauthenticated|not pass authentication|authentication checks|reverse dns|reverse hostname|\bptr\b|blocked using|block ?list|black ?list|deny ?list|\bdnsbl\b|\brbl\b|spamhaus|spamcop|barracuda|sorbs|cloudmark|senderscore|\breputation\b|your ip|sending ip|sender ip|client host|\bip address\b|from this ip|(ip|host) \[?\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}|\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}.{0,12}\bblocked\b|spoof|blocked senders?|envelope (blocked|rejected)|block(ed)? for spam|for spamming`)

// rateText matches a rate or concurrency limit: in a 4xx it is about now,
// whatever it says of our IP.
var rateText = regexp.MustCompile(`too many|rate[ -]?limit|\brate\b|throttl|frequency|concurrent`)

// greylisted matches a greylisting deferral, which names the recipient or
// the client but is about now.
var greylisted = regexp.MustCompile(`gr[ae]ylist`)

// policyText matches a reply that refuses on a policy of the receiver
// without saying which part of the mail broke it: our sender's.
var policyText = regexp.MustCompile(`\bpolic(y|ies)\b|not accepted from|prohibited|denied|\bsender'?s?\b`)

// relaySenderText matches what a relay's reply says about us as a sender:
// our sender, our domain, our account.
var relaySenderText = regexp.MustCompile(`sender|from address|mail from|envelope|domain|account|identity|\bfrom\b`)

// messageText matches a reply about this message's content, size or form.
var messageText = regexp.MustCompile(`message (size|length|too (big|large))|size (limit|exceed)|too (big|large)|exceeds? (the )?(maximum|max|size|fixed|limit)|virus|viral|malware|infected|attachment|unsolicited|\bspam\b|content|malformed|header|bare lf|line (is )?too long|8-?bit|\bmime\b|message (is|was|has been) (blocked|rejected|refused)|bulk mail|phishing`)

// aboutMessage reports whether a reply's words are about this message: its
// size, form or content.
func aboutMessage(r *replyFacts) bool {
	return messageText.MatchString(r.low)
}

// loopText matches a mail loop or a route that cannot reach the recipient.
var loopText = regexp.MustCompile(`hops|loop|unroutable|no route|unable to route|no mx|mx (record|lookup)`)

// recipientPolicyText matches a recipient (a group, a mailbox) that
// accepts mail only from some senders: Exchange's RESOLVER.RST.AuthRequired
// ("the group accepts only authenticated senders"), "you are not allowed
// to send mail to <addr>", "you may not have permission to post messages
// to the group".
var recipientPolicyText = regexp.MustCompile(`resolver\.rst\.|not (allowed|authori[sz]ed|permitted) to (send|post|e-?mail)( (e-?)?mail| messages?)? to\b|permission to (post|send)( messages?)? to|sendernotauthenticatedfor`)

// recipientPolicy reports a 5xx (not at MAIL FROM) from a recipient that
// accepts mail only from some senders, or Exchange's x.7.133-x.7.136
// (the sender was not authenticated for this group, mailbox, public folder
// or user).
func recipientPolicy(r *replyFacts) bool {
	if r.at == "MAIL" {
		return false
	}
	return (r.enh.subject == 7 && r.enh.detail >= 133 && r.enh.detail <= 136) || recipientPolicyText.MatchString(r.low)
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
// User has no permission", Exchange's "Client does not have permissions to
// submit to this server"). It avoids the receiver's SPF/DKIM/DMARC wording ("the sender
// is unauthenticated", "fails to pass authentication checks").
var authText = regexp.MustCompile(`authentication (is )?required|must authenticate|not authenticated|authentication (failed|failure|unsuccessful|credentials invalid)|fail(ed)? authentication|invalid login|login fail|unauthenticated (senders|mail) not allowed|smtp authentication|authori[sz]ation required|\bauth error\b|smtpclientauthentication|user has no permission|permissions? to submit`)

// authFailure reports whether a 5xx reply asks for authentication or
// rejects our credentials (RFC 4954 codes 530, 534, 535, 538; RFC 5248
// x.7.8, x.7.9, x.7.12, x.7.14; x.7.13 when given to AUTH; Exchange Online
// x.7.57 and x.7.139).
func authFailure(r *replyFacts) bool {
	switch r.code {
	case 525:
		// RFC 4954's "525 5.7.13 User account disabled" answers AUTH (then
		// smtp-at-auth decides); elsewhere a receiving server's x.7.13 is
		// the recipient's account (recipientDisabled).
		return !r.enh.is(7, 13)
	case 526, 530, 534, 535, 538:
		// Postal answers "530 From/Sender name is not valid" after DATA: our
		// sender, not our login.
		return !senderText.MatchString(r.low) || authText.MatchString(r.low)
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
var senderText = regexp.MustCompile(`not verified|sender identity|sender address rejected|invalid sender|sender verify failed|emetteur invalide|relaying disallowed as|sender name is not valid|send ?as ?denied|not owned by|sender login mismatch|not logged in|mail ?from (address )?must (equal|be same as)|same as authori[sz]ation user|conform with authentication|local user only|permissions? to send as|not allowed to send|not authori[sz]ed to send from|isn't allowed to send|unregistered domain|host denies the sender|sender is unvalidated|sender is rejected`)

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
var relayDenied = regexp.MustCompile(`\brelay(ing)?( access)? (denied|not (permitted|allowed)|disallowed|prohibited)|unable to relay|not permitted to relay|do not relay|denies relay|relay check|as a relay|not in my list of allowed (rcpt)?hosts`)

// recipientState matches a recipient account or mailbox that is disabled,
// discontinued, suspended or locked.
var recipientState = regexp.MustCompile(`\b(account|mailbox|user|recipient|addressee)\b[^.;]{0,60}\b(disabled|discontinued|suspended|deactivated|inactive|locked|frozen)\b|accountdisabled|userdisabled`)

// recipientDisabled reports a 5xx saying the recipient's account or
// mailbox is disabled or suspended (x.2.1, x.7.13 from a receiving server,
// or the words).
func recipientDisabled(r *replyFacts) bool {
	if rateText.MatchString(r.low) {
		return false // a mailbox receiving too fast (Gmail's 550 5.2.1) is busy, not disabled
	}
	return r.enh.is(2, 1) || r.enh.is(7, 13) || recipientState.MatchString(r.low)
}

// quotaText matches a full mailbox or an exceeded storage quota.
var quotaText = regexp.MustCompile(`quota|mailbox (is )?full|storage allocation|exceeded storage|insufficient storage|overquota|too many (mails|messages) on the server|storage space`)

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

// transientText matches 5xx texts that describe rate or frequency limits or
// say the condition is temporary.
var transientText = regexp.MustCompile(`too many|throttl|try (again )?later|temporar|rate[ -]?limit|\brate\b.{0,20}\bexceeded|\bfrequency\b|(try again|retry) (in|after) \d|receiving mail (at a rate|too quickly)`)

// passing reports a 5xx about a rate or a condition that passes. A mail
// loop ("too many hops") does not pass.
func passing(r *replyFacts) bool {
	return transientText.MatchString(r.low) && !strings.Contains(r.low, "hops") && !strings.Contains(r.low, "loop")
}

// recipientText matches replies that name the recipient: its address, its
// mailbox, its user.
var recipientText = regexp.MustCompile(`recipient (temporarily )?(address|mailbox|account|user|unknown|not found|rejected|invalid|unavailable|unallocated|does not exist|inactive|disabled|blocked|overquota)|recipient'?s (address|mailbox|account)|(invalid|unknown|bad|no such) (recipient|user|address|mailbox)|mailbox|addressee|\buser (unknown|not found|not known|does ?n[o']t exist|is unknown|account (is )?(invalid|unknown))|account that you tried|(does|dos) ?n[o']t exist|(does|dos) ?n[o']t have (a|an) (mailbox|account)|not exist|address rejected|not our customer|no valid recipients?|unroute?able address|not a valid (e-?mail )?address|address (could not be|not) found|invalid-recipient|no-domain|block-rcpt`)
