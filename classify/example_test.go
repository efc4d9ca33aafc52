package classify_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/mailspool/mailspool/classify"
	"github.com/mailspool/mailspool/transport"
)

func ExampleSMTPReply() {
	err := classify.SMTPReply("550-5.1.1 The email account that you tried to reach does not exist.\r\n" +
		"550 5.1.1 Please check the address.\r\n")

	var te *transport.Error
	if errors.As(err, &te) {
		fmt.Println(transport.KindOf(err), te.Code, te.Enhanced)
		fmt.Println(te.Detail)
	}
	fmt.Println(transport.KindOf(classify.SMTPReply("421 4.7.0 Too many connections, try again in 5 minutes")))
	fmt.Println(transport.KindOf(classify.SMTPReply("535 5.7.8 Error: authentication failed")))
	fmt.Println(classify.SMTPReply("250 2.0.0 OK: queued as 4Zx9"))
	// Output:
	// permanent 550 5.1.1
	// The email account that you tried to reach does not exist. Please check the address.
	// temporary
	// connection
	// <nil>
}

func ExampleExplain() {
	d := classify.Explain(classify.SMTPReply("550 The from address does not match a verified Sender Identity."))
	fmt.Println(d.Kind, d.Scope, d.Code, d.Rule)
	d = classify.Explain(classify.SMTPReply("550 5.1.1 <bob@example.org>: Recipient address rejected: User unknown"))
	fmt.Println(d.Kind, d.Scope, d.Enhanced, d.Rule)
	// A 5xx without evidence about the recipient or the message is
	// retried, never dropped at once.
	d = classify.Explain(classify.SMTPReply("550 Requested action not taken"))
	fmt.Println(d.Kind, d.Scope, d.Code, d.Rule)
	// Output:
	// connection sender 550 smtp-sender
	// permanent recipient 5.1.1 smtp-recipient
	// temporary transient 550 smtp-5xx
}

func ExampleRules_Apply() {
	// A provider that says "mailbox full" when the recipient's quota will
	// be freed tomorrow: the operator retries such mail after a day.
	rules, err := classify.NewRules([]classify.Rule{{
		Name: "acme-quota", Code: 552, Text: `quota.*tomorrow`,
		Kind: transport.Temporary, RetryAfter: 24 * time.Hour,
	}})
	if err != nil {
		panic(err)
	}
	d := classify.Explain(rules.Apply(classify.SMTPReply("552 5.2.2 Mailbox quota exceeded, cleared tomorrow")))
	fmt.Println(d.Kind, d.RetryAfter, d.Rule)
	d = classify.Explain(rules.Apply(classify.SMTPReply("552 5.2.2 Mailbox full")))
	fmt.Println(d.Kind, d.Rule)
	// Output:
	// temporary 24h0m0s operator:acme-quota
	// permanent smtp-mailbox-full
}
