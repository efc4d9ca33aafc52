package classify

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// smtpReplies are real replies (Gmail, Outlook/Exchange Online, Postfix,
// Amazon SES SMTP, Yahoo) and edge cases, with their classification.
var smtpReplies = []struct {
	name  string
	reply string
	want  want
}{
	// Success.
	{"250 queued", "250 2.0.0 OK  1700000000 d2si123-v6si.456 - gsmtp", accepted},
	{"354 go ahead", "354  Go ahead d2si123-v6si.456 - gsmtp", accepted},
	{"bare 221", "221", accepted},
	{"multi-line 250 EHLO", "250-smtp.gmail.com at your service\r\n250-SIZE 35882577\r\n250 SMTPUTF8", accepted},

	// Gmail.
	{"gmail 550 5.1.1 multi-line",
		"550-5.1.1 The email account that you tried to reach does not exist. Please try\r\n" +
			"550-5.1.1 double-checking the recipient's email address for typos or\r\n" +
			"550-5.1.1 unnecessary spaces. For more information, go to\r\n" +
			"550 5.1.1  https://support.google.com/mail/?p=NoSuchUser d2si1234567ejc.123 - gsmtp",
		want{permanent, 550, "5.1.1", 0, "The email account that you tried to reach does not exist. Please try double-checking the recipient's email address for typos or unnecessary spaces. For more information, go to https://support.googl..."}},
	{"gmail 452 4.2.2 over quota",
		"452-4.2.2 The email account that you tried to reach is over quota. Please direct\r\n452 4.2.2 the recipient to https://support.google.com/mail/?p=OverQuotaTemp - gsmtp",
		want{temporary, 452, "4.2.2", 0, ""}},
	{"gmail 552 5.2.2 over quota and inactive", "552-5.2.2 The email account that you tried to reach is over quota and inactive.", want{permanent, 552, "5.2.2", 0, ""}},
	{"gmail 550 5.2.1 recipient disabled", "550-5.2.1 The email account that you tried to reach is disabled. https://support.google.com/mail/?p=DisabledUser", want{permanent, 550, "5.2.1", 0, ""}},
	{"gmail 450 4.2.1 receiving rate", "450-4.2.1 The user you are trying to contact is receiving mail at a rate that prevents additional messages from being delivered. Please resend your message at a later time.", want{temporary, 450, "4.2.1", 0, ""}},
	{"gmail 421 4.7.0 try again later", "421-4.7.0 Try again later, closing connection. (EHLO) d2si123-v6si.456 - gsmtp", want{temporary, 421, "4.7.0", 0, ""}},
	{"gmail 421 4.7.28 rate limited", "421-4.7.28 [192.0.2.1] Our system has detected an unusual rate of unsolicited mail originating from your IP address. To protect our users from spam, mail sent from your IP address has been temporarily rate limited.", want{temporary, 421, "4.7.28", 0, ""}},
	{"gmail 550 5.7.1 spam", "550-5.7.1 [192.0.2.1] Our system has detected that this message is likely unsolicited mail. To reduce the amount of spam sent to Gmail, this message has been blocked.", want{permanent, 550, "5.7.1", 0, ""}},
	{"gmail 550 5.7.26 unauthenticated sender", "550-5.7.26 This mail has been blocked because the sender is unauthenticated. Gmail requires all senders to authenticate with either SPF or DKIM.", want{temporary, 550, "5.7.26", 0, ""}},
	{"gmail 550 5.7.1 dmarc", "550 5.7.1 Unauthenticated email from example.com is not accepted due to domain's DMARC policy.", want{temporary, 550, "5.7.1", 0, ""}},
	{"gmail 552 5.7.0 security issue", "552-5.7.0 This message was blocked because its content presents a potential security issue.", want{permanent, 552, "5.7.0", 0, ""}},
	{"gmail 552 5.3.4 size", "552-5.3.4 Your message exceeded Google's message size limits.", want{permanent, 552, "5.3.4", 0, ""}},
	{"gmail 530 5.7.0 auth required", "530-5.7.0 Authentication Required. Learn more at\r\n530 5.7.0  https://support.google.com/mail/?p=WantAuthError", want{connection, 530, "5.7.0", 0, "Authentication Required. Learn more at https://support.google.com/mail/?p=WantAuthError"}},
	{"gmail 530 5.7.0 starttls", "530 5.7.0 Must issue a STARTTLS command first. d2si123 - gsmtp", want{connection, 530, "5.7.0", 0, ""}},
	{"gmail 535 5.7.8 bad credentials", "535-5.7.8 Username and Password not accepted. For more information, go to\r\n535 5.7.8  https://support.google.com/mail/?p=BadCredentials", want{connection, 535, "5.7.8", 0, ""}},
	{"gmail 550 5.4.5 sending quota", "550 5.4.5 Daily user sending quota exceeded. d2si123 - gsmtp", want{connection, 550, "5.4.5", 0, ""}},

	// Outlook / Exchange Online.
	{"outlook 550 5.5.0 mailbox unavailable", "550 5.5.0 Requested action not taken: mailbox unavailable (S2017062302). [DM6NAM11FT0.eop-nam11.prod.protection.outlook.com]", want{permanent, 550, "5.5.0", 0, ""}},
	{"exchange 550 5.1.10 recipient not found", "550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup", want{permanent, 550, "5.1.10", 0, ""}},
	{"outlook 550 5.7.1 block list", "550 5.7.1 Unfortunately, messages from [192.0.2.1] weren't sent. Please contact your Internet service provider since part of their network is on our block list (S3150).", want{temporary, 550, "5.7.1", 0, ""}},
	{"outlook 451 4.7.500 server busy", "451 4.7.500 Server busy. Please try again later from [192.0.2.1]. (S77714) [AM4PR0.eurprd04.prod.outlook.com]", want{temporary, 451, "4.7.500", 0, ""}},
	{"exchange 550 5.7.705 tenant threshold", "550 5.7.705 Access denied, tenant has exceeded threshold", want{connection, 550, "5.7.705", 0, ""}},
	{"exchange 550 5.7.708 traffic not accepted", "550 5.7.708 Service unavailable. Access denied, traffic not accepted from this IP.", want{connection, 550, "5.7.708", 0, ""}},
	{"exchange 550 5.7.750 unregistered domains", "550 5.7.750 Service unavailable. Client blocked from sending from unregistered domains.", want{connection, 550, "5.7.750", 0, ""}},
	{"exchange 550 5.7.64 relay denied", "550 5.7.64 TenantAttribution; Relay Access Denied [SN1NAM02FT0.eop-nam02.prod.protection.outlook.com]", want{connection, 550, "5.7.64", 0, ""}},
	{"exchange 550 5.7.54 unable to relay", "550 5.7.54 SMTP; Unable to relay recipient in non-accepted domain", want{connection, 550, "5.7.54", 0, ""}},
	{"exchange 535 5.7.3 auth unsuccessful", "535 5.7.3 Authentication unsuccessful [BN6PR1101CA0.namprd11.prod.outlook.com]", want{connection, 535, "5.7.3", 0, ""}},
	{"exchange 550 5.1.8 bad outbound sender", "550 5.1.8 Access denied, bad outbound sender.", want{connection, 550, "5.1.8", 0, ""}},
	{"exchange 554 5.2.0 quota exceeded", "554 5.2.0 STOREDRV.Deliver.Exception:QuotaExceededException.MapiExceptionShutoffQuotaExceeded; Failed to process message due to a permanent exception", want{permanent, 554, "5.2.0", 0, ""}},

	// Postfix.
	{"postfix 554 5.7.1 relay access denied", "554 5.7.1 <bob@example.org>: Relay access denied", want{connection, 554, "5.7.1", 0, "<bob@example.org>: Relay access denied"}},
	{"postfix 550 5.1.1 user unknown", "550 5.1.1 <nobody@example.org>: Recipient address rejected: User unknown in local recipient table", want{permanent, 550, "5.1.1", 0, ""}},
	{"postfix 450 4.1.8 sender domain", "450 4.1.8 <a@nonexistent.example>: Sender address rejected: Domain not found", want{temporary, 450, "4.1.8", 0, ""}},
	{"postfix 554 5.7.1 spamhaus", "554 5.7.1 Service unavailable; Client host [192.0.2.1] blocked using zen.spamhaus.org; https://www.spamhaus.org/query/ip/192.0.2.1", want{temporary, 554, "5.7.1", 0, ""}},
	{"postfix 552 5.3.4 size", "552 5.3.4 Message size exceeds fixed limit", want{permanent, 552, "5.3.4", 0, ""}},
	{"postfix 535 5.7.8 auth failed", "535 5.7.8 Error: authentication failed: authentication failure", want{connection, 535, "5.7.8", 0, ""}},
	{"postfix 530 5.7.0 starttls", "530 5.7.0 Must issue a STARTTLS command first", want{connection, 530, "5.7.0", 0, ""}},
	{"postfix 504 5.5.2 helo", "504 5.5.2 <localhost>: Helo command rejected: need fully-qualified hostname", want{connection, 504, "5.5.2", 0, ""}},
	{"postfix 452 4.3.1 storage", "452 4.3.1 Insufficient system storage", want{temporary, 452, "4.3.1", 0, ""}},
	{"postfix 421 4.4.2 timeout", "421 4.4.2 mail.example.com Error: timeout exceeded", want{temporary, 421, "4.4.2", 0, ""}},
	{"postfix 554 5.5.1 no valid recipients", "554 5.5.1 Error: no valid recipients", want{permanent, 554, "5.5.1", 0, ""}},
	{"postfix 552 5.2.2 quota exceeded", "552 5.2.2 <user@example.org>: Recipient address rejected: Quota exceeded", want{permanent, 552, "5.2.2", 0, ""}},

	// Amazon SES SMTP interface (no enhanced codes).
	{"ses 554 not verified", "554 Message rejected: Email address is not verified. The following identities failed the check in region US-EAST-1: sender@example.com", want{connection, 554, "", 0, ""}},
	{"ses 454 sending rate", "454 Throttling failure: Maximum sending rate exceeded.", want{temporary, 454, "", 0, ""}},
	{"ses 454 daily quota", "454 Throttling failure: Daily message quota exceeded.", want{connection, 454, "", 0, ""}},
	{"ses 535 credentials", "535 Authentication Credentials Invalid", want{connection, 535, "", 0, ""}},
	{"ses 554 suspended", "554 Sending suspended for this account. For more information, please check the inbox of the email address associated with your AWS account.", want{connection, 554, "", 0, ""}},
	{"ses 554 iam", "554 Access denied: User `arn:aws:iam::123456789012:user/ses-smtp-user' is not authorized to perform `ses:SendRawEmail' on resource `arn:aws:ses:us-east-1:123456789012:identity/example.com'", want{connection, 554, "", 0, ""}},
	{"ses 554 duplicate header", "554 Transaction failed: Duplicate header 'Subject'.", want{permanent, 554, "", 0, ""}},
	{"ses 451 timeout", "451 Timeout waiting for data from client.", want{temporary, 451, "", 0, ""}},

	// Yahoo.
	{"yahoo 421 deferred", "421 4.7.0 [TSS04] Messages from 192.0.2.1 temporarily deferred due to unexpected volume or user complaints - 4.16.55.1; see https://postmaster.yahooinc.com/error-codes", want{temporary, 421, "4.7.0", 0, ""}},
	{"yahoo 554 5.7.9 policy", "554 5.7.9 Message not accepted for policy reasons.  See https://postmaster.yahooinc.com/error-codes", want{temporary, 554, "5.7.9", 0, ""}},
	{"yahoo 553 5.7.2 permanently deferred", "553 5.7.2 [TSS09] All messages from 192.0.2.1 will be permanently deferred; Retrying will NOT succeed. See https://postmaster.yahooinc.com/error-codes", want{temporary, 553, "5.7.2", 0, ""}},
	{"yahoo 554 invalid enhanced 6.6.0", "554 6.6.0 Error sending message for delivery.", want{temporary, 554, "", 0, "6.6.0 Error sending message for delivery."}},

	// The conformance suite's replies.
	{"conformance 421", "421 4.7.0 Too many concurrent SMTP connections from this IP address; please try again later", want{temporary, 421, "4.7.0", 0, ""}},
	{"conformance 451", "451 4.3.0 Temporary local problem, please try again", want{temporary, 451, "4.3.0", 0, ""}},
	{"conformance 552", "552 5.2.2 Mailbox full", want{permanent, 552, "5.2.2", 0, "Mailbox full"}},
	{"conformance 553", "553 5.1.3 The recipient address is not a valid RFC 5321 address", want{permanent, 553, "5.1.3", 0, ""}},
	{"conformance 554", "554 5.7.1 Message rejected: the content looks like spam", want{permanent, 554, "5.7.1", 0, ""}},

	// RFC 4954 / RFC 5248 codes on the sending side.
	{"534 mechanism too weak", "534 5.7.9 Authentication mechanism is too weak", want{connection, 534, "5.7.9", 0, ""}},
	{"538 encryption required", "538 5.7.11 Encryption required for requested authentication mechanism", want{connection, 538, "5.7.11", 0, ""}},
	{"554 5.7.13 account disabled (a recipient)", "554 5.7.13 User account disabled", want{permanent, 554, "5.7.13", 0, ""}},
	{"454 4.7.0 temporary auth failure", "454 4.7.0 Temporary authentication failure", want{temporary, 454, "4.7.0", 0, ""}},
	{"550 5.7.0 authentication needed", "550 5.7.0 Authentication is required to send mail", want{connection, 550, "5.7.0", 0, ""}},
	{"550 your account suspended", "550 5.7.0 Your account has been suspended for abuse", want{connection, 550, "5.7.0", 0, ""}},
	{"550 sender not verified", "550 5.7.1 Sender address not verified", want{connection, 550, "5.7.1", 0, ""}},

	// A lane rule's words in a reply that names the recipient: neither
	// Permanent (it may be our login) nor Connection (it may be one
	// recipient).
	{"recipient rejected for want of auth", "554 5.7.1 <bob@example.org>: Recipient address rejected: Authentication required", want{temporary, 554, "5.7.1", 0, ""}},

	// 5xx that say the condition passes.
	{"550 too many connections", "550 5.7.1 Too many connections from your host", want{temporary, 550, "5.7.1", 0, ""}},
	{"554 throttled", "554 5.7.1 Message throttled, slow down", want{temporary, 554, "5.7.1", 0, ""}},
	{"550 rate limit with hint", "550 5.7.1 Sending rate limited, retry in 1 hour", want{temporary, 550, "5.7.1", time.Hour, ""}},

	// Retry hints.
	{"hint try again in 5 minutes", "450 4.7.1 Client host rejected: try again in 5 minutes", want{temporary, 450, "4.7.1", 5 * time.Minute, ""}},
	{"hint retry after 120 seconds", "421 4.7.0 Rate limited, retry after 120 seconds", want{temporary, 421, "4.7.0", 120 * time.Second, ""}},
	{"hint wait 30s", "451 4.7.1 Greylisted, please wait 30s and come back", want{temporary, 451, "4.7.1", 30 * time.Second, ""}},
	{"hint absurd is capped", "421 4.7.0 try again in 99999999999 hours", want{temporary, 421, "4.7.0", MaxRetryAfter, ""}},
	{"no hint in try again later", "421 4.7.0 try again later", want{temporary, 421, "4.7.0", 0, ""}},

	// Enhanced codes: accepted and rejected shapes; class disagreement.
	{"enhanced 9.9.9 rejected", "550 9.9.9 whatever", want{temporary, 550, "", 0, "9.9.9 whatever"}},
	{"enhanced 5.1 rejected", "550 5.1 bad", want{temporary, 550, "", 0, "5.1 bad"}},
	{"enhanced 5.1.1.1 rejected", "550 5.1.1.1 bad", want{temporary, 550, "", 0, "5.1.1.1 bad"}},
	{"enhanced 5.1.1000 rejected", "550 5.1.1000 bad", want{temporary, 550, "", 0, "5.1.1000 bad"}},
	{"enhanced glued to text rejected", "550 5.1.1bad", want{temporary, 550, "", 0, "5.1.1bad"}},
	{"enhanced alone", "550 5.1.1", want{permanent, 550, "5.1.1", 0, ""}},
	{"basic 550 governs enhanced 4.2.1", "550 4.2.1 Mailbox busy", want{permanent, 550, "4.2.1", 0, ""}},
	{"basic 451 governs enhanced 5.7.1", "451 5.7.1 Rejected by policy", want{temporary, 451, "5.7.1", 0, ""}},
	{"bare 550", "550", want{temporary, 550, "", 0, ""}},
	{"hyphen continuation without code", "550-5.1.1 first line\r\n   second line", want{permanent, 550, "5.1.1", 0, "first line second line"}},

	// Detail is one clean short line.
	{"control characters removed", "550 5.1.1 bad\x00user\tname\x7f!", want{permanent, 550, "5.1.1", 0, "bad user name !"}},
	{"long text capped", "550 5.1.1 " + strings.Repeat("é", 300), want{permanent, 550, "5.1.1", 0, strings.Repeat("é", 98) + "..."}},

	// Empty and unparsable.
	{"empty", "", want{temporary, 0, "", 0, "empty smtp reply"}},
	{"blank", " \r\n ", want{temporary, 0, "", 0, "empty smtp reply"}},
	{"no code", "hello there", want{temporary, 0, "", 0, "unparsable smtp reply: hello there"}},
	{"enhanced without basic", "5.1.1 no such user", want{temporary, 0, "", 0, ""}},
	{"code 1xx", "199 odd", want{temporary, 0, "", 0, ""}},
	{"code 6xx", "600 odd", want{temporary, 0, "", 0, ""}},
	{"two digits", "55", want{temporary, 0, "", 0, ""}},
	{"code glued to text", "550x no", want{temporary, 0, "", 0, ""}},
	{"four digits", "5500 no", want{temporary, 0, "", 0, ""}},
}

func TestSMTPReply(t *testing.T) {
	t.Parallel()
	for _, tc := range smtpReplies {
		t.Run(tc.name, func(t *testing.T) {
			check(t, tc.want, SMTPReply(tc.reply))
		})
	}
}

func TestSMTPReplyDetailIsShortAndClean(t *testing.T) {
	t.Parallel()
	for _, tc := range smtpReplies {
		te := asError(SMTPReply(tc.reply))
		if te == nil {
			continue
		}
		require.LessOrEqual(t, len(te.Detail), maxDetail, tc.name)
		require.NotContains(t, te.Detail, "\n", tc.name)
		require.NotContains(t, te.Detail, "\r", tc.name)
		if te.Enhanced != "" {
			require.NotContains(t, te.Detail, te.Enhanced+" ", "%s: enhanced code repeated in %q", tc.name, te.Detail)
		}
	}
}

func TestSMTP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		code     int
		enhanced string
		text     string
		want     want
	}{
		{"go-mail code and enhanced, no text", 550, "5.1.1", "", want{permanent, 550, "5.1.1", 0, ""}},
		{"go-mail 451 after data", 451, "4.3.0", "", want{temporary, 451, "4.3.0", 0, ""}},
		{"enhanced parsed from text", 550, "", "5.1.1 No such user", want{permanent, 550, "5.1.1", 0, "No such user"}},
		{"enhanced given and repeated in text", 535, "5.7.8", "5.7.8 Error: authentication failed", want{connection, 535, "5.7.8", 0, "Error: authentication failed"}},
		{"invalid enhanced replaced from text", 554, "bogus", "5.7.1 Rejected as spam", want{permanent, 554, "5.7.1", 0, "Rejected as spam"}},
		{"enhanced with spaces", 452, " 4.2.2 ", "Over quota", want{temporary, 452, "4.2.2", 0, "Over quota"}},
		{"textproto multi-line text", 550, "", "5.1.1 The email account does not exist.\n5.1.1 Please check the address.", want{permanent, 550, "5.1.1", 0, "The email account does not exist. Please check the address."}},
		{"different enhanced on a later line kept", 550, "", "5.1.1 first\n5.7.1 second", want{permanent, 550, "5.1.1", 0, "first 5.7.1 second"}},
		{"only code 421", 421, "", "", want{temporary, 421, "", 0, ""}},
		{"success 250", 250, "2.0.0", "OK", accepted},
		{"success 354", 354, "", "Go ahead", accepted},
		{"code 0", 0, "", "no reply", want{temporary, 0, "", 0, "invalid smtp reply code 0: no reply"}},
		{"code 600", 600, "", "", want{temporary, 0, "", 0, ""}},
		{"code 199", 199, "", "", want{temporary, 0, "", 0, ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			check(t, tc.want, SMTP(tc.code, tc.enhanced, tc.text))
		})
	}
}
