package classify_test

import (
	"errors"
	"fmt"

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
