package classify

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/transport"
)

// recorded is one reply recorded from a provider's documentation or a
// public bounce, with where it was found. recipient is whether the reply
// concerns one recipient (it must never feed a lane's breaker); rule is the
// built-in rule that must decide it.
type recorded struct {
	reply  string
	source string
	kind   transport.Kind
	scope  transport.Scope
	rule   string
}

// recordedReplies are real replies for the five classes that went wrong.
// The text is as recorded (server names and addresses as published).
var recordedReplies = []recorded{
	// 1. Our login, account or sender configuration under a 5xx: never
	// Permanent, and lane-level.
	{"550 5.7.501 Access denied, spam abuse detected. For more information please go to http://go.microsoft.com/fwlink/?LinkId=526653",
		"https://pastebin.com/BkSdGH0x (Exchange Online outbound NDR)", connection, sender, "smtp-our-account"},
	{"550 5.7.705 Access denied, tenant has exceeded threshold",
		"https://learn.microsoft.com/en-us/Exchange/mail-flow-best-practices/non-delivery-reports-in-exchange-online/fix-error-code-5-7-700-through-5-7-750", connection, sender, "smtp-our-account"},
	{"550 5.7.708 Service unavailable. Access denied, traffic not accepted from this IP. For more information please go to http://go.microsoft.com/fwlink/?LinkId=526653",
		"https://mxio.io/learn/errors/ip-blocked-o365-5-7-708", connection, sender, "smtp-our-account"},
	{"550 5.7.511 Access denied, banned sender[74.208.4.197]. To request removal from this list please forward this message to delist@messaging.microsoft.com.",
		"https://pastebin.com/JEGXAxrE (Exchange Online)", connection, sender, "smtp-our-account"},
	{"550 The from address does not match a verified Sender Identity. Mail cannot be sent until this error is resolved. Visit https://sendgrid.com/docs/for-developers/sending-email/sender-identity/ to see the Sender Identity requirements",
		"https://github.com/sahat/hackathon-starter/issues/1083 (SendGrid SMTP relay)", connection, sender, "smtp-sender"},
	{"550 Unauthenticated senders not allowed",
		"https://github.com/sendgrid/docs/issues/6473 (SendGrid SMTP relay)", connection, lane, "smtp-auth"},
	{"451 Authentication failed: Maximum credits exceeded",
		"https://www.twilio.com/docs/sendgrid/for-developers/sending-email/smtp-errors-and-troubleshooting", connection, sender, "smtp-our-account"},
	{"530 5.7.57 Client not authenticated to send mail. [BN1P110CA0052.NAMP110.PROD.OUTLOOK.COM 2023-11-29T14:52:57.126Z 08DBE7319275F6BA]",
		"https://pastebin.com/SuB30vi5 (Exchange Online, in reply to MAIL FROM)", connection, lane, "smtp-auth"},
	{"535 5.7.139 Authentication unsuccessful, SmtpClientAuthentication is disabled for the Tenant. Visit https://aka.ms/smtp_auth_disabled for more information. [MN2PR05CA0004.namprd05.prod.outlook.com 2023-09-12T20:59:57.214Z 08DBB276B7E699C4]",
		"https://github.com/simonrob/email-oauth2-proxy/issues/193 (Exchange Online: SMTP sending not enabled)", connection, lane, "smtp-auth"},
	{"550 5.7.60 SMTP; Client does not have permissions to send as this sender [BY2PR1001MB1094.namprd10.prod.outlook.com]",
		"https://pastebin.com/wtU9XT6T (Exchange Online send-as denied)", connection, sender, "smtp-sender"},
	{"550 5.7.1 Client does not have permissions to send as this sender",
		"https://pastebin.com/NYQrmvhJ (Exchange)", connection, sender, "smtp-sender"},
	{"553 5.7.1 <user2@example.com>: Sender address rejected: not owned by user user2@example.com",
		"https://github.com/r-raymond/nixos-mailserver/issues/9 (Postfix reject_sender_login_mismatch)", connection, sender, "smtp-sender"},
	{"553 5.7.1 <administrator@miab.my.domain>: Sender address rejected: not logged in",
		"https://github.com/mail-in-a-box/mailinabox/pull/1463 (Postfix)", connection, sender, "smtp-sender"},
	{"553 5.7.1 Sender address rejected: not owned by auth user.",
		"https://github.com/splitbrain/dokuwiki-plugin-smtp/issues/38 (Yandex)", connection, sender, "smtp-sender"},
	{"553 Mail from must equal authorized user",
		"https://github.com/xuxueli/xxl-job/issues/3858 (NetEase smtp.163.com)", connection, sender, "smtp-sender"},
	{"553 Local user only,163 smtp5,HdxpCgA3f+63sTNhtiNZDA--.2001S2 1630777785",
		"https://github.com/ruanyf/weather-action/issues/5 (NetEase smtp.163.com)", connection, sender, "smtp-sender"},
	{"501 mail from address must be same as authorization user",
		"https://github.com/nodeSolidServer/node-solid-server/issues/1281 (QQ Mail)", connection, sender, "smtp-sender"},
	{"550 User has no permission",
		"https://github.com/open-falcon/mail-provider/issues/6 and testerSunshine/12306 issue 62 (NetEase: SMTP not enabled for the account, answered to AUTH)", connection, lane, "smtp-auth"},
	{"535 Error: authentication failed",
		"https://github.com/xuess/puppeteer-sign/issues/2 (NetEase and QQ Mail)", connection, lane, "smtp-auth"},
	{"535 Authentication failure.",
		"Aliyun DirectMail SMTP error codes, as mirrored at http://cryptsofthecoliseum.com/article-show-50-294.html", connection, lane, "smtp-auth"},
	{"551 Main account unavailable",
		"Aliyun DirectMail SMTP error codes, as mirrored at http://cryptsofthecoliseum.com/article-show-50-294.html", connection, sender, "smtp-our-account"},
	{"552 Daily sending quota exceeded",
		"Aliyun DirectMail SMTP error codes, as mirrored at http://cryptsofthecoliseum.com/article-show-50-294.html", connection, sender, "smtp-our-account"},
	{"526 Authentication failure[1]",
		"http://sh-aliyun.com/index.php/Products/detail/cid/0/pid/87.html (Aliyun enterprise mail: too many failed logins)", connection, lane, "smtp-auth"},
	{"541 This account isn't allowed to send email",
		"http://sh-aliyun.com/index.php/Products/detail/cid/0/pid/87.html (Aliyun enterprise mail)", connection, sender, "smtp-sender"},
	{"530 Authentication required",
		"https://github.com/Billionmail/BillionMail/issues/156 (Amazon SES SMTP, in reply to MAIL FROM)", connection, lane, "smtp-auth"},
	{"550 Unauthenticated mail not allowed from this range",
		"https://github.com/NixOS/infra/issues/668", connection, lane, "smtp-auth"},
	{"503 Administrative prohibition -- authorization required. Users in your domain are not allowed to send email without authorization. See http://help.mail.ru/mail-help/mailer/popsmtp for details.",
		"https://pastebin.com/xDPN2fTF (mail.ru)", connection, lane, "smtp-auth"},
	{"525 5.7.13 User account disabled",
		"RFC 5248 / IANA SMTP enhanced status codes registry: X.7.13 with basic code 525", permanent, recipient, "smtp-recipient-disabled"},
	{"501 Syntactically invalid HELO argument(s)",
		"https://github.com/BookStackApp/BookStack/issues/2384 (Exim)", connection, lane, "smtp-helo"},
	{"501 5.5.4 Empty HELO/EHLO argument not allowed, closing connection.",
		"https://github.com/ietf-tools/datatracker/issues/10244 (Gmail)", connection, lane, "smtp-helo"},
	{"550 Access denied - Invalid HELO name (See RFC2821 4.1.1.1)",
		"https://github.com/zone-eu/zone-mta/issues/162", connection, lane, "smtp-helo"},
	{"554 5.7.1 <barman@svp-pgbarman-01.svp.prod>: Sender address rejected: Access denied",
		"https://pastebin.com/gf1TwE62 (Postfix)", connection, sender, "smtp-sender"},
	{"554 5.7.1 <wedge@live.ca>: Relay access denied",
		"https://pastebin.com/cuaSEAAq (Postfix)", connection, lane, "smtp-relay"},

	// 2. The recipient's account disabled, discontinued or suspended:
	// Permanent and about one recipient, never Connection.
	{"550 5.7.13 STOREDRV.Deliver.Exception:AccountDisabledException.MapiExceptionADUserDisabledAndHidden",
		"https://tamingdns.com/bounce-decoder/550-5-7-13-user-account-disabled (Microsoft 365)", permanent, recipient, "smtp-recipient-disabled"},
	{"554 delivery error: dd Sorry your message to ***@yahoo.com.cn cannot be delivered. This account has been disabled or discontinued.",
		"http://help.szhot.com/text_show.php?id=170 (Yahoo)", permanent, recipient, "smtp-recipient-disabled"},
	{"550 User suspended",
		"https://www.icoremail.vip/support/index.php?cate_id=84&page=5&start=0 (Coremail, the server of NetEase's mail)", permanent, recipient, "smtp-recipient-disabled"},
	{"550 user is locked.",
		"https://blog.sina.com.cn/s/blog_8dc13ec50101fxxr.html", permanent, recipient, "smtp-recipient-disabled"},
	{"550 5.2.1 The email account that you tried to reach is disabled.",
		"https://www.dbmailserver.com/tui-xin-address-not-exist.htm (Gmail)", permanent, recipient, "smtp-recipient-disabled"},
	{"550 Mailbox not found. http://service.mail.qq.com/cgi-bin/help?subtype=1&&id=20022&&no=1000728",
		"https://www.dbmailserver.com/tui-xin-address-not-exist.htm (QQ Mail)", permanent, recipient, "smtp-recipient"},
	{"550 Mailbox unavailable or access denied",
		"https://smtp.codes/qq (QQ Mail)", permanent, recipient, "smtp-recipient"},
	{"550 User not found: 12345@163.com",
		"https://www.dbmailserver.com/tui-xin-address-not-exist.htm (NetEase)", permanent, recipient, "smtp-recipient"},
	{"550 5.4.1 [trinik.lemon@dhs.ga.gov]: Recipient address rejected: Access denied [CY1GCC01FT007.eop-gcc01.prod.protection.outlook.com]",
		"https://pastebin.com/32NXKByX (Exchange Online)", permanent, recipient, "smtp-routing"},
	{"550 5.1.1 <user@erg.school>: Recipient address rejected: User unknown in virtual mailbox table",
		"https://git.erg.school/PostERG/xamxam/src/commit/19784090a3b6e29b349e4b9994b2edacf0ed699b/docs/SMTP_550_POSTFIX_FIX.md (Postfix)", permanent, recipient, "smtp-recipient"},
	{"550 Requested action not taken: mailbox unavailable",
		"https://www.dbmailserver.com/tui-xin-address-not-exist.htm", permanent, recipient, "smtp-recipient"},
	{"554 RCPT (account) dosn't exist",
		"http://sh-aliyun.com/index.php/Products/detail/cid/0/pid/87.html (Aliyun enterprise mail)", permanent, recipient, "smtp-recipient"},

	// 3. An x.4.x enhanced code under a 5xx: the basic code governs.
	{"554 5.4.14 Hop count exceeded - possible mail loop ATTR34 [HE1EUR01FT063.eop-EUR01.prod.protection.outlook.com]",
		"https://pastebin.com/0aCSGeph (Exchange Online)", permanent, recipient, "smtp-routing"},
	{"554 5.4.6 Too many hops 26 (25 max): from <root@mail.st9.os3.su> via mail.st12.os3.su, to <loop@mail.st9.os3.su>",
		"https://pastebin.com/5Rq8y8Nw (sendmail)", permanent, recipient, "smtp-routing"},
	{"554 5.4.0 Error: too many hops",
		"https://pastebin.com/idVrs1bX (Postfix)", permanent, recipient, "smtp-routing"},

	// The mailbox-full rule, decided here and followed by the conformance
	// suite: Permanent unless the text says the quota is temporary.
	{"552 5.2.2 Mailbox full",
		"the conformance suite's smtp-552 reply (RFC 3463 X.2.2 \"Mailbox full\")", permanent, recipient, "smtp-mailbox-full"},
	{"552 mailbox is full",
		"http://sh-aliyun.com/index.php/Products/detail/cid/0/pid/87.html (Aliyun enterprise mail)", permanent, recipient, "smtp-mailbox-full"},
	{"550 david.chase@earthlink.net...User account is overquota",
		"https://pastebin.com/MMGUFmXp (EarthLink)", permanent, recipient, "smtp-mailbox-full"},

	// Replies that stay as they were.
	{"451 DT:SPM ,please try again",
		"https://biecuoliao.com/pa/MBRrwEM.html (NetEase bounce codes)", temporary, transient, "smtp-4xx"},
	{"451 Requested mail action not taken: too much fail authentication",
		"https://biecuoliao.com/pa/MBRrwEM.html (NetEase: too many failed logins)", temporary, transient, "smtp-4xx"},
	{"550 Sender frequency limited.",
		"https://smtp.codes/qq (QQ Mail)", temporary, sender, "smtp-sender-policy"},
	{"550 5.7.606 Access denied, banned sending IP [185.234.72.45]. To request removal from this list please visit https://sender.office.com/ and follow the directions.",
		"https://pastebin.com/EH1TUb0X (Exchange Online Protection)", temporary, sender, "smtp-sender-policy"},
}

func TestRecordedReplies(t *testing.T) {
	for _, tc := range recordedReplies {
		t.Run(tc.reply[:min(len(tc.reply), 40)], func(t *testing.T) {
			require.NotEmpty(t, tc.source)
			te := asError(SMTPReply(tc.reply))
			require.NotNil(t, te)
			assert.Equal(t, tc.kind, te.Kind, "kind of %q (%s)", tc.reply, te.Rule)
			assert.Equal(t, tc.scope, te.Scope, "scope of %q", tc.reply)
			assert.Equal(t, tc.rule, te.Rule, "rule of %q", tc.reply)
			if te.Scope == transport.ScopeRecipient {
				assert.NotEqual(t, connection, te.Kind, "a reply about one recipient is never Connection")
			}
		})
	}
}

// goErrors are the texts Go 1.26 prints for dial and resolver failures
// (syscall/zerrors_linux_amd64.go, net/net.go, net/dnsclient_unix.go), as
// go-mail flattens them.
var goErrors = []struct {
	text, detail, rule string
}{
	{"dial tcp 192.0.2.1:587: connect: connection timed out", "timeout", "net-timeout"},
	{"dial tcp 192.0.2.1:587: connect: no route to host", "host unreachable", "net-unreachable"},
	{"dial tcp 192.0.2.1:587: connect: network is unreachable", "network unreachable", "net-unreachable"},
	{"dial tcp 192.0.2.1:587: connect: host is down", "host down", "net-unreachable"},
	{"dial tcp: lookup smtp.example.com on 127.0.0.53:53: server misbehaving", "dns lookup failed", "net-dns"},
	{"dial tcp: lookup smtp.example.com: no such host", "dns lookup failed", "net-dns"},
	{"dial tcp: lookup smtp.example.com on 10.0.0.2:53: lame referral", "dns lookup failed", "net-dns"},
	{"dial tcp: lookup smtp.example.com on 10.0.0.2:53: no answer from DNS server", "dns lookup failed", "net-dns"},
	{"dial tcp 192.0.2.1:587: i/o timeout", "timeout", "net-timeout"},
	{"dial tcp 192.0.2.1:587: connect: connection refused", "connection refused", "net-refused"},
	{"read tcp 10.0.0.5:51234->192.0.2.1:587: read: connection reset by peer", "connection reset", "net-dropped"},
}

func TestFlattenedGoErrors(t *testing.T) {
	for _, tc := range goErrors {
		t.Run(tc.text, func(t *testing.T) {
			// go-mail flattens the cause into its own text.
			err := errors.New("failed to dial to SMTP server: " + tc.text)
			te := asError(Error(err))
			require.NotNil(t, te)
			assert.Equal(t, connection, te.Kind)
			assert.Equal(t, tc.detail, te.Detail)
			assert.Equal(t, tc.rule, te.Rule)
			assert.Equal(t, transport.ScopeLane, te.Scope)
		})
	}
}

// TestKnownMissClasses: the classes of reply the table used to get wrong,
// each in the wording recorded in scopedReplies and in a second one.
func TestKnownMissClasses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		reply   string
		session Session
		kind    transport.Kind
		scope   transport.Scope
	}{
		// The registry's "user account disabled": the recipient's, unless
		// it answers our AUTH.
		{"525 5.7.13 User account disabled", Session{}, permanent, recipient},
		{"525 5.7.13 User account disabled", Session{Relay: true, Command: "AUTH"}, connection, lane},
		// The sender's address syntax, whatever the basic code.
		{"550 5.1.7 Invalid address", Session{}, connection, sender},
		{"553 5.1.7 The sender address <noreply@shop> is not a valid RFC 5321 address.", Session{}, connection, sender},
		// A recipient that accepts only some senders.
		{"550 5.7.1 RESOLVER.RST.AuthRequired; authentication required", Session{}, permanent, recipient},
		{"550 5.7.133 RESOLVER.RST.SenderNotAuthenticatedForGroup; authentication required; Delivery restriction check failed because the sender was not authenticated when sending to this group", Session{}, permanent, recipient},
		{"550 5.7.1 You are not allowed to send mail to bob@example.org", Session{}, permanent, recipient},
		{"550 you are not allowed to send email to <list@example.org>", Session{Relay: true, Command: "RCPT"}, permanent, recipient},
		// A relay's 5xx at MAIL FROM is about our sender, whatever it names.
		{"550 5.1.1 <noreply@shop.example>: mailbox unavailable", Session{Relay: true, Command: "MAIL"}, temporary, sender},
		{"554 5.7.1 Account restricted, contact support", Session{Relay: true, Command: "RCPT"}, temporary, sender},
	} {
		te := asError(tc.session.SMTPReply(tc.reply))
		require.NotNil(t, te, tc.reply)
		assert.Equal(t, tc.kind, te.Kind, "kind of %q at %+v (%s)", tc.reply, tc.session, te.Rule)
		assert.Equal(t, tc.scope, te.Scope, "scope of %q at %+v (%s)", tc.reply, tc.session, te.Rule)
	}
}
